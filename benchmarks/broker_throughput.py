"""Broker throughput with a real client: produce then consume with
confluent-kafka, 100-byte values over 4 partitions, for acks=1 and
acks=all; prints records/s, MB/s and produce latency percentiles.

    python benchmarks/broker_throughput.py [--records N] [--acks 1,all]
        [--linger-ms MS] [--batch-size BYTES]
        [--bootstrap HOST:PORT [--replication-factor R] | --cluster N]
        [--disk-gate [--disk-gate-writeback-delay S]]

Without --bootstrap or --cluster it starts one reference broker on a loopback
port (data in a temporary directory, removed afterwards). With --cluster N it
starts a reference cluster there instead (cluster/local_cluster.py: one
controller process and N broker processes) and creates each topic with
replication factor min(3, N), the brokers set to min.insync.replicas=min(2,
that): `--cluster 3` measures replication factor 3 with min.insync.replicas=2
(add `--acks all` for that figure alone). With --bootstrap it measures any
Kafka-compatible broker or cluster (topics with replication factor
--replication-factor, default 1; min.insync.replicas is the broker's own), so
brokers can be compared on the same machine.

With --disk-gate (root, FUSE) each broker's data directory sits on a disk
gate (nemesis/disk) passing through to a backing directory, its page cache
writing back after --disk-gate-writeback-delay seconds (default 5, the
gate's default; 0 writes through): the same figures with and without
measure what the gate costs.

The header line names the replication factor and min.insync.replicas. The
producer batches with linger.ms=5 and librdkafka's default batch.size unless
--linger-ms / --batch-size say otherwise (the header line shows both); every
record still waits for its own acknowledgement and its latency is measured
from produce() to the delivery report.

benchmarks/side_by_side.py measures the reference broker and Apache Kafka
in one run with this script's produce and consume.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster.broker_process import BrokerProcess  # noqa: E402
from cluster.local_cluster import LocalCluster  # noqa: E402

PARTITIONS = 4
VALUE_BYTES = 100
TIMEOUT = 120
LINGER_MS = 5
CLUSTER_MIN_INSYNC = 2


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def produce(bootstrap: str, topic: str, records: int, acks: str,
            client_config: dict | None = None, latencies_out: list | None = None) -> dict:
    """Produce records; latencies_out, if given, gets every record's latency (s)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": LINGER_MS,
                         **(client_config or {})})
    latencies: list[float] = []
    errors = []
    value = b"x" * VALUE_BYTES
    start = time.perf_counter()
    for n in range(records):
        sent_at = time.perf_counter()

        def report(err, msg, sent_at=sent_at):
            if err is not None:
                errors.append(err)
            latencies.append(time.perf_counter() - sent_at)
        stalled_until = time.perf_counter() + TIMEOUT
        while True:
            try:
                producer.produce(topic, value, partition=n % PARTITIONS, on_delivery=report)
                break
            except BufferError:  # the client's queue is full: let it drain
                if time.perf_counter() > stalled_until:
                    raise RuntimeError(f"produce: the client's queue stayed full for {TIMEOUT} s")
                producer.poll(0.05)
        if n % 1000 == 0:
            producer.poll(0)
    if producer.flush(TIMEOUT):
        raise RuntimeError(f"produce: records still unacknowledged after {TIMEOUT} s")
    seconds = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"produce: {len(errors)} failed, first: {errors[0]}")
    latencies.sort()
    if latencies_out is not None:
        latencies_out.extend(latencies)
    return {"seconds": seconds, "records_per_s": records / seconds,
            "mb_per_s": records * VALUE_BYTES / seconds / 1e6,
            "p50_ms": percentile(latencies, 0.5) * 1000, "p99_ms": percentile(latencies, 0.99) * 1000}


def consume(bootstrap: str, topic: str, records: int,
            partitions: list[int] | None = None) -> dict:
    """Consume records from partitions (default: all PARTITIONS) from offset 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    partitions = range(PARTITIONS) if partitions is None else partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    received = 0
    start = time.perf_counter()
    deadline = start + TIMEOUT
    while received < records and time.perf_counter() < deadline:
        for msg in consumer.consume(min(10_000, records - received), 1.0):
            if msg.error() is None:
                received += 1
    seconds = time.perf_counter() - start
    consumer.close()
    if received < records:
        raise RuntimeError(f"consume: {received} of {records} records in {TIMEOUT} s")
    return {"seconds": seconds, "records_per_s": records / seconds,
            "mb_per_s": records * VALUE_BYTES / seconds / 1e6}


def run(bootstrap: str, records: int, *, replication: int = 1, min_insync: str = "1",
        acks_settings: tuple[str, ...] = ("1", "all"), client_config: dict | None = None,
        gate: str = "") -> None:
    client_config = client_config or {}
    admin = AdminClient({"bootstrap.servers": bootstrap})
    batching = f"linger.ms={client_config.get('linger.ms', LINGER_MS)}"
    if "batch.size" in client_config:
        batching += f", batch.size={client_config['batch.size']}"
    print(f"{records:,} records of {VALUE_BYTES} bytes over {PARTITIONS} partitions, "
          f"replication factor {replication}, min.insync.replicas={min_insync}, "
          f"{batching}, bootstrap {bootstrap}{gate}")
    print(f"{'acks':<5}{'produce rec/s':>15}{'MB/s':>7}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'consume rec/s':>15}{'MB/s':>7}")
    for acks in acks_settings:
        topic = f"throughput-{acks}-{uuid.uuid4().hex[:8]}"
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, replication)])[topic].result(TIMEOUT)
        except KafkaException as e:
            raise SystemExit(f"cannot create topic {topic} on {bootstrap}: {e}")
        p = produce(bootstrap, topic, records, acks, client_config)
        c = consume(bootstrap, topic, records)
        print(f"{acks:<5}{p['records_per_s']:>15,.0f}{p['mb_per_s']:>7.1f}{p['p50_ms']:>8.1f}"
              f"{p['p99_ms']:>8.1f}{c['records_per_s']:>15,.0f}{c['mb_per_s']:>7.1f}", flush=True)


@contextlib.contextmanager
def disk_gates(root: Path, directories: list[str], writeback_delay: float | None):
    """A disk gate on each of root's directories while the block runs
    (nothing when writeback_delay is None); yields the header's note and
    the gates' process ids."""
    if writeback_delay is None:
        yield "", []
        return
    from cluster.local import LocalNode
    from nemesis.disk.fault import command, mount, unmount_all
    nodes = [LocalNode(f"gate-{name}", "127.0.0.1", root) for name in directories]
    try:
        for node, directory in zip(nodes, directories):
            mount(node, directory=directory, writeback_delay=writeback_delay)
        pids = [command(node, "status")["pid"]
                for node, directory in zip(nodes, directories)]
        yield f", data on disk gates (writeback delay {writeback_delay:g} s)", pids
    finally:
        for problem in unmount_all(nodes):
            print(f"unmounting a disk gate: {problem}", file=sys.stderr)


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU time the processes used so far."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])     # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def print_cpu(brokers: list[int], gates: list[int]) -> None:
    print(f"CPU seconds: brokers {cpu_seconds(brokers):.1f}"
          + (f", disk gates {cpu_seconds(gates):.1f}" if gates else ""))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    target = parser.add_mutually_exclusive_group()
    target.add_argument("--bootstrap", help="measure this broker instead of starting one")
    target.add_argument("--cluster", type=int, metavar="N",
                        help="start a reference cluster of N brokers (replication factor "
                             f"min(3, N), min.insync.replicas=min({CLUSTER_MIN_INSYNC}, that))")
    parser.add_argument("--replication-factor", type=int,
                        help="replication factor of the topics with --bootstrap (default 1)")
    parser.add_argument("--records", type=int, default=500_000, help="records per acks setting")
    parser.add_argument("--acks", default="1,all",
                        help="comma-separated acks settings to measure (default: 1,all)")
    parser.add_argument("--linger-ms", type=int, help=f"producer linger.ms (default {LINGER_MS})")
    parser.add_argument("--batch-size", type=int,
                        help="producer batch.size in bytes (default: librdkafka's)")
    parser.add_argument("--disk-gate", action="store_true",
                        help="each broker's data directory on a disk gate (root, FUSE)")
    parser.add_argument("--disk-gate-writeback-delay", type=float, default=5.0, metavar="S",
                        help="the gates' writeback delay in seconds (default 5; 0 writes "
                             "through)")
    args = parser.parse_args()
    if args.records < 1:
        parser.error("--records must be positive")
    if args.cluster is not None and args.cluster < 1:
        parser.error("--cluster must be at least 1")
    if args.replication_factor is not None and not args.bootstrap:
        parser.error("--replication-factor goes with --bootstrap")
    if args.disk_gate and (args.bootstrap or os.geteuid() != 0):
        parser.error("--disk-gate mounts FUSE under brokers started here: run as root, "
                     "without --bootstrap")
    acks_settings = tuple(a.strip() for a in args.acks.split(",") if a.strip())
    if not acks_settings or any(a not in ("0", "1", "all", "-1") for a in acks_settings):
        parser.error("--acks is a comma-separated list of 0, 1, all")
    client_config = {}
    if args.linger_ms is not None:
        client_config["linger.ms"] = args.linger_ms
    if args.batch_size is not None:
        client_config["batch.size"] = args.batch_size
    options = {"acks_settings": acks_settings, "client_config": client_config}
    if args.bootstrap:
        run(args.bootstrap, args.records, replication=args.replication_factor or 1,
            min_insync="the broker's", **options)
        return 0
    delay = args.disk_gate_writeback_delay if args.disk_gate else None
    with tempfile.TemporaryDirectory(prefix="kchaos-broker-bench-") as scratch:
        if args.cluster is None:
            with disk_gates(Path(scratch), ["data"], delay) as (gate, gate_pids), \
                    BrokerProcess(Path(scratch) / "data", log_level="WARNING") as broker:
                run(broker.bootstrap, args.records, gate=gate, **options)
                print_cpu([broker.process.pid], gate_pids)
        else:
            replication = min(3, args.cluster)
            min_insync = min(CLUSTER_MIN_INSYNC, replication)
            config = [f"min.insync.replicas={min_insync}"]
            directories = [f"broker-{i}" for i in range(1, args.cluster + 1)]
            with disk_gates(Path(scratch), directories, delay) as (gate, gate_pids):
                cluster = LocalCluster(Path(scratch), args.cluster, config=config,
                                       log_level="WARNING")
                try:  # not `with`: a cluster that fails to start has processes to kill
                    cluster.start()
                    run(cluster.bootstrap, args.records, replication=replication,
                        min_insync=str(min_insync), gate=gate, **options)
                    print_cpu([b.process.pid for b in cluster.brokers.values()], gate_pids)
                finally:
                    cluster.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
