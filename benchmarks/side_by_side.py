"""The reference broker and Apache Kafka side by side, in one run: for each
system and each node count it starts a cluster through kchaos's own
`SystemUnderTest` (network namespaces on --subnet as root, reached from here
through the run's bridge, as `kchaos run` reaches them), then for each
count of client processes produces and consumes with acks=all and prints
one table row.

    python benchmarks/side_by_side.py [--records N]
        [--systems reference,kafka] [--nodes 1,3] [--processes 1,4]
        [--subnet 198.18.40.0/24] [--write-docs]

Each cluster first takes an unmeasured cell of WARM_UP records (a JVM
compiles its hot code as it runs). Each cell gets a new topic of 4 partitions, replication factor min(3, nodes), the brokers set to
min.insync.replicas=min(2, that). P client processes (multiprocessing,
spawn) each produce records/P records (broker_throughput.produce: 100-byte
values, linger.ms=5) and then each consume their share of the partitions
(assigned, from offset 0). Records/s are all the records over the wall time
from the first process's start to the last one's end (the processes start
together once all are up); the latency percentiles are over every
process's records merged. --write-docs writes the table into
docs/performance.md (its broker-side-by-side block).
"""

from __future__ import annotations

import argparse
import logging
import multiprocessing
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import broker_throughput as bt  # noqa: E402

SYSTEMS = ("reference", "kafka")
SUBNET = "198.18.40.0/24"
READY_TIMEOUT = 120      # s for the client processes to start (imports)
CELL_TIMEOUT = 600       # s for one produce or consume of every process
WARM_UP = 20_000         # records produced and consumed on each cluster before its cells
PAGE = Path(__file__).resolve().parent.parent / "docs" / "performance.md"
BLOCK = "broker-side-by-side"
HEADER = ("| system | nodes | RF / min.isr | client processes | produce records/s | produce MB/s "
          "| p50 / p99 produce latency (ms) | consume records/s |\n"
          "|---|---|---|---|---|---|---|---|")


def _client(kind: str, bootstrap: str, topic: str, records: int, partitions: list[int],
            barrier, results) -> None:
    """One client process: wait for the others, then produce or consume."""
    try:
        barrier.wait(READY_TIMEOUT)
        start = time.monotonic()
        latencies: list[float] = []
        if kind == "produce":
            bt.produce(bootstrap, topic, records, "all", latencies_out=latencies)
        elif records:
            bt.consume(bootstrap, topic, records, partitions)
        results.put((start, time.monotonic(), latencies, None))
    except BaseException as e:  # noqa: BLE001 — reported to the parent, which raises
        results.put((0.0, 0.0, [], f"{kind}: {type(e).__name__}: {e}"))


def run_clients(kind: str, bootstrap: str, topic: str,
                shares: list[tuple[int, list[int]]]) -> tuple[float, list[float]]:
    """Run one client process per (records, partitions) share, all started
    together; the wall time from the first start to the last end, and the
    merged latencies."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(len(shares) + 1)
    results = ctx.Queue()
    processes = [ctx.Process(target=_client, daemon=True,
                             args=(kind, bootstrap, topic, records, partitions, barrier, results))
                 for records, partitions in shares]
    got = []
    try:
        for process in processes:
            process.start()
        barrier.wait(READY_TIMEOUT)
        deadline = time.monotonic() + CELL_TIMEOUT
        for _ in processes:
            got.append(results.get(timeout=max(1.0, deadline - time.monotonic())))
    finally:
        for process in processes:
            process.join(10)
            if process.is_alive():
                process.kill()
                process.join(10)
    errors = [error for *_, error in got if error]
    if errors:
        raise RuntimeError("; ".join(errors))
    latencies = sorted(lat for _, _, lats, _ in got for lat in lats)
    return max(end for _, end, _, _ in got) - min(start for start, *_ in got), latencies


def wait_for_leaders(bootstrap: str, topic: str, timeout: float = 60) -> None:
    from confluent_kafka.admin import AdminClient
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        partitions = admin.list_topics(topic, timeout=10).topics[topic].partitions
        if len(partitions) == bt.PARTITIONS and all(p.leader >= 0 for p in partitions.values()):
            return
        time.sleep(0.2)
    raise TimeoutError(f"{topic}: partitions without a leader after {timeout} s")


def high_watermarks(bootstrap: str, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}"})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1]
                for p in range(bt.PARTITIONS)]
    finally:
        consumer.close()


def measure_cell(bootstrap: str, records: int, processes: int, replication: int) -> dict:
    from kchaos.run import create_topics
    topic = f"side-by-side-{processes}-{uuid.uuid4().hex[:8]}"
    create_topics(bootstrap, [topic], bt.PARTITIONS, replication)
    wait_for_leaders(bootstrap, topic)
    counts = [records // processes + (i < records % processes) for i in range(processes)]
    seconds, latencies = run_clients("produce", bootstrap, topic,
                                     [(count, []) for count in counts])
    ends = high_watermarks(bootstrap, topic)
    if sum(ends) != records:
        raise RuntimeError(f"{topic}: {sum(ends)} records stored, {records} produced")
    shares = [list(range(bt.PARTITIONS))[i::processes] for i in range(processes)]
    consumed, _ = run_clients("consume", bootstrap, topic,
                              [(sum(ends[p] for p in share), share) for share in shares])
    return {"produce": records / seconds, "mb": records * bt.VALUE_BYTES / seconds / 1e6,
            "p50": bt.percentile(latencies, 0.5) * 1000,
            "p99": bt.percentile(latencies, 0.99) * 1000, "consume": records / consumed}


def run(systems: list[str], node_counts: list[int], process_counts: list[int], records: int,
        subnet: str) -> list[str]:
    """Every cell, printing each row as it is measured; the rows."""
    from kchaos.cluster import SystemUnderTest
    from kchaos.config import TestConfig
    from kchaos.config_checks import validate
    rows = []
    for system in systems:
        for nodes in node_counts:
            replication = min(3, nodes)
            min_insync = min(bt.CLUSTER_MIN_INSYNC, replication)
            config = TestConfig.build(
                db=system, nodes=nodes, subnet=subnet, replication_factor=replication,
                partitions=bt.PARTITIONS,
                broker_config=[f"min.insync.replicas={min_insync}"] if min_insync > 1 else [])
            validate(config)
            name = "reference broker" if system == "reference" else \
                f"Apache Kafka {config.kafka_version}"
            run_dir = Path(tempfile.mkdtemp(prefix=f"kchaos-side-by-side-{system}-{nodes}-"))
            cluster = SystemUnderTest(config, run_dir)
            try:
                started = time.monotonic()
                bootstrap = cluster.start()
                print(f"{name}, {nodes} node(s) at {bootstrap}: up in "
                      f"{time.monotonic() - started:.1f} s", file=sys.stderr, flush=True)
                # Unmeasured: a JVM's first records run interpreted code
                # and the first cell would pay for it.
                measure_cell(bootstrap, min(records, WARM_UP), 1, replication)
                for processes in process_counts:
                    cell = measure_cell(bootstrap, records, processes, replication)
                    rows.append(f"| {name} | {nodes} | {replication} / {min_insync} "
                                f"| {processes} | {cell['produce']:,.0f} | {cell['mb']:.1f} "
                                f"| {cell['p50']:.1f} / {cell['p99']:.1f} "
                                f"| {cell['consume']:,.0f} |")
                    print(rows[-1], flush=True)
            except BaseException:
                print(f"the nodes' logs are kept in {run_dir / 'nodes'}", file=sys.stderr)
                raise
            finally:
                cluster.teardown()
            shutil.rmtree(run_dir, ignore_errors=True)
    return rows


def csv(text: str, kind=str) -> list:
    return [kind(item.strip()) for item in text.split(",") if item.strip()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="side_by_side.py",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000,
                        help="records per cell, split over the client processes "
                             "(default 200,000)")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated, of reference, kafka (default: both)")
    parser.add_argument("--nodes", default="1,3", help="node counts (default 1,3)")
    parser.add_argument("--processes", default="1,4",
                        help=f"client process counts, at most {bt.PARTITIONS} (default 1,4)")
    parser.add_argument("--subnet", default=SUBNET,
                        help=f"the nodes' subnet (default {SUBNET})")
    parser.add_argument("--write-docs", action="store_true",
                        help=f"write the table into {PAGE.relative_to(PAGE.parent.parent)}")
    args = parser.parse_args(argv)
    try:
        systems, nodes = csv(args.systems), csv(args.nodes, int)
        processes = csv(args.processes, int)
    except ValueError as e:
        parser.error(str(e))
    if not systems or set(systems) - set(SYSTEMS):
        parser.error(f"--systems is a comma-separated list of {', '.join(SYSTEMS)}")
    if not nodes or min(nodes) < 1:
        parser.error("--nodes are positive")
    if not processes or not all(1 <= p <= bt.PARTITIONS for p in processes):
        parser.error(f"--processes are from 1 to {bt.PARTITIONS}")
    if args.records < max(processes):
        parser.error("--records must be at least the largest process count")
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    from validation.figures import machine, stamp
    measured_on = machine()
    started = time.monotonic()
    print(f"{args.records:,} records of {bt.VALUE_BYTES} bytes per cell over {bt.PARTITIONS} "
          f"partitions, acks=all, linger.ms={bt.LINGER_MS}; {measured_on}")
    print(HEADER, flush=True)
    rows = run(systems, nodes, processes, args.records, args.subnet)
    print(f"all cells in {time.monotonic() - started:.0f} s")
    if args.write_docs:
        from validation.figures import write_block
        text = "\n".join([HEADER, *rows]) + (
            f"\n\n{args.records:,} records of {bt.VALUE_BYTES} bytes per row, acks=all, "
            f"linger.ms={bt.LINGER_MS}, {bt.PARTITIONS} partitions; measured on "
            f"{measured_on}.\n\n({stamp()}.)")
        write_block(PAGE, BLOCK, text)
        print(f"wrote {PAGE}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
