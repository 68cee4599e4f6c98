"""Broker throughput with a real client: produce then consume with
confluent-kafka, 100-byte values over 4 partitions, for acks=1 and
acks=all; prints records/s, MB/s and produce latency percentiles.

    python benchmarks/broker_throughput.py [--bootstrap HOST:PORT] [--records N]

Without --bootstrap it starts one reference broker on a loopback port (data in
a temporary directory, removed afterwards); with it, it measures any
Kafka-compatible broker, so brokers can be compared on the same machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster.broker_process import BrokerProcess  # noqa: E402

PARTITIONS = 4
VALUE_BYTES = 100
TIMEOUT = 120


def percentile(sorted_values: list[float], q: float) -> float:
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def produce(bootstrap: str, topic: str, records: int, acks: str) -> dict:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
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
        while True:
            try:
                producer.produce(topic, value, partition=n % PARTITIONS, on_delivery=report)
                break
            except BufferError:  # the client's queue is full: let it drain
                producer.poll(0.05)
        if n % 1000 == 0:
            producer.poll(0)
    if producer.flush(TIMEOUT):
        raise RuntimeError(f"produce: records still unacknowledged after {TIMEOUT} s")
    seconds = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"produce: {len(errors)} failed, first: {errors[0]}")
    latencies.sort()
    return {"seconds": seconds, "records_per_s": records / seconds,
            "mb_per_s": records * VALUE_BYTES / seconds / 1e6,
            "p50_ms": percentile(latencies, 0.5) * 1000, "p99_ms": percentile(latencies, 0.99) * 1000}


def consume(bootstrap: str, topic: str, records: int) -> dict:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4()}",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
    received = 0
    start = time.perf_counter()
    deadline = start + TIMEOUT
    while received < records and time.perf_counter() < deadline:
        for msg in consumer.consume(10_000, 1.0):
            if msg.error() is None:
                received += 1
    seconds = time.perf_counter() - start
    consumer.close()
    if received < records:
        raise RuntimeError(f"consume: {received} of {records} records in {TIMEOUT} s")
    return {"seconds": seconds, "records_per_s": records / seconds,
            "mb_per_s": records * VALUE_BYTES / seconds / 1e6}


def run(bootstrap: str, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    print(f"{records:,} records of {VALUE_BYTES} bytes over {PARTITIONS} partitions, "
          f"linger.ms=5, bootstrap {bootstrap}")
    print(f"{'acks':<5}{'produce rec/s':>15}{'MB/s':>7}{'p50 ms':>8}{'p99 ms':>8}"
          f"{'consume rec/s':>15}{'MB/s':>7}")
    for acks in ("1", "all"):
        topic = f"throughput-{acks}-{uuid.uuid4().hex[:8]}"
        try:
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(TIMEOUT)
        except KafkaException as e:
            raise SystemExit(f"cannot create topic {topic} on {bootstrap}: {e}")
        p = produce(bootstrap, topic, records, acks)
        c = consume(bootstrap, topic, records)
        print(f"{acks:<5}{p['records_per_s']:>15,.0f}{p['mb_per_s']:>7.1f}{p['p50_ms']:>8.1f}"
              f"{p['p99_ms']:>8.1f}{c['records_per_s']:>15,.0f}{c['mb_per_s']:>7.1f}", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", help="measure this broker instead of starting one")
    parser.add_argument("--records", type=int, default=500_000, help="records per acks setting")
    args = parser.parse_args()
    if args.records < 1:
        parser.error("--records must be positive")
    if args.bootstrap:
        run(args.bootstrap, args.records)
        return 0
    with tempfile.TemporaryDirectory(prefix="kchaos-broker-bench-") as scratch:
        with BrokerProcess(Path(scratch) / "data", log_level="WARNING") as broker:
            run(broker.bootstrap, args.records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
