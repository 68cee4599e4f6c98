"""Three brokers and a controller on loopback, real clients, real failures:
the leader killed under acks=all idempotent load, the old leader back and
rejoining the ISR, the group coordinator killed during commits, a follower
paused past replica.lag.time.max.ms.

Timeouts are shortened (session 3 s, lag 3 s) so each failover takes a few
seconds; every wait is bounded.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from cluster.local_cluster import LocalCluster
from reference_broker.group import partition_for
from reference_broker.log import LogConfig, PartitionLog
from tests.reference_broker.record_batches import records_in

OFFSETS_PARTITIONS = 3
SETTINGS = [
    "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=3000", "replica.fetch.wait.max.ms=200",
    f"offsets.topic.num.partitions={OFFSETS_PARTITIONS}",
    "group.initial.rebalance.delay.ms=0", "min.insync.replicas=2",
]
TIMEOUT = 60.0


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(tmp_path, 3, config=SETTINGS) as started:
        yield started


def create_topic(cluster: LocalCluster, name: str, partitions: int, replication: int) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    for future in admin.create_topics([NewTopic(name, partitions, replication)]).values():
        future.result(TIMEOUT)
    cluster.wait_ready()


def wait_until(condition, what: str, timeout: float = TIMEOUT):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {timeout} s: {what}")


class Sender:
    """An idempotent acks=all producer of the values n, n+1, ... to one partition."""

    def __init__(self, cluster: LocalCluster, topic: str, partition: int = 0):
        self.topic, self.partition = topic, partition
        self.producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                                  "enable.idempotence": True, "linger.ms": 2,
                                  "message.timeout.ms": 45000})
        self.sent = 0
        self.acked: list[int] = []
        self.failed: list[tuple[int, KafkaError]] = []

    def send(self, count: int) -> None:
        for _ in range(count):
            value = self.sent
            self.sent += 1

            def report(err, msg, value=value):
                if err is None:
                    self.acked.append(value)
                else:
                    self.failed.append((value, err))
            self.producer.produce(self.topic, str(value).encode(), partition=self.partition,
                                  on_delivery=report)
            self.producer.poll(0)

    def flush(self) -> None:
        assert self.producer.flush(TIMEOUT) == 0, "records unacknowledged after the timeout"


def read_all(cluster: LocalCluster, topic: str, partition: int, until: int) -> list[int]:
    """Every value in the partition from offset 0 up to offset `until`."""
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, partition, 0)])
    values: list[int] = []
    offset = -1
    deadline = time.monotonic() + TIMEOUT
    try:
        while offset + 1 < until and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is None:
                    values.append(int(message.value()))
                    offset = message.offset()
    finally:
        consumer.close()
    assert offset + 1 >= until, f"read up to offset {offset}, expected {until - 1}"
    return values


def high_watermark(cluster: LocalCluster, topic: str, partition: int = 0) -> int:
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": "hw"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), TIMEOUT)[1]
    finally:
        consumer.close()


def assert_exactly_once_in_order(values: list[int], acked: list[int]) -> None:
    assert len(values) == len(set(values)), "a record was read twice"
    assert values == sorted(values), "records out of send order"
    missing = set(acked) - set(values)
    assert not missing, f"{len(missing)} acknowledged records lost, e.g. {sorted(missing)[:5]}"


def test_leader_killed_under_acks_all_loses_nothing_then_rejoins_after_truncating(cluster):
    create_topic(cluster, "t", 1, 3)
    sender = Sender(cluster, "t")
    sender.send(5000)
    old_leader = cluster.leader("t")
    cluster.kill(old_leader)            # mid-stream: some batches are in flight
    sender.send(5000)
    sender.flush()
    new_leader = wait_until(lambda: (cluster.leader("t") not in (-1, old_leader)
                                     and cluster.leader("t")), "a new leader")
    assert not sender.failed
    assert sorted(sender.acked) == list(range(10000))
    assert_exactly_once_in_order(read_all(cluster, "t", 0, high_watermark(cluster, "t")),
                                 sender.acked)

    # The old leader comes back: it truncates whatever it had beyond the
    # new leader's log and rejoins the ISR.
    cluster.restart(old_leader)
    wait_until(lambda: sorted(cluster.isr("t")) == [1, 2, 3], "the old leader back in the ISR")
    sender.send(1000)
    sender.flush()
    committed = high_watermark(cluster, "t")
    # Every replica's log, read from disk after a clean stop, holds the
    # same records up to the high watermark: the acknowledged ones, once.
    for node in cluster.brokers:
        cluster.stop(node)
    logs = {node: replica_values(cluster, node, "t", 0) for node in cluster.brokers}
    for node, values in logs.items():
        assert len(values) >= committed, f"broker {node} holds {len(values)} < HW {committed}"
        assert values[:committed] == logs[new_leader][:committed], f"broker {node} diverges"
    assert_exactly_once_in_order(logs[old_leader][:committed], sender.acked)
    assert new_leader != old_leader


def replica_values(cluster: LocalCluster, node: int, topic: str, partition: int) -> list[int]:
    log = PartitionLog.open(cluster.brokers[node].data_dir / f"{topic}-{partition}", LogConfig())
    try:
        return [int(value) for _, raw in log.batches() for _, value in records_in(raw)]
    finally:
        log.close()


def test_group_coordinator_killed_during_commits(cluster):
    create_topic(cluster, "orders", 1, 3)
    sender = Sender(cluster, "orders")
    sender.send(3000)
    sender.flush()
    group = "g"
    offsets_partition = partition_for(group, OFFSETS_PARTITIONS)
    consumer = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.subscribe(["orders"])
    committed_before_kill = None
    coordinator = None
    consumed = 0
    last_committed = 0
    deadline = time.monotonic() + TIMEOUT
    try:
        while consumed < 3000 and time.monotonic() < deadline:
            messages = [m for m in consumer.consume(100, 0.5) if m.error() is None]
            if not messages:
                continue
            consumed = messages[-1].offset() + 1
            try:
                consumer.commit(offsets=[TopicPartition("orders", 0, consumed)],
                                asynchronous=False)
                last_committed = consumed
            except KafkaException:
                # A commit while the coordinator moves may fail; the next one retries.
                continue
            if coordinator is None and consumed >= 1000:
                committed_before_kill = last_committed
                coordinator = cluster.leader("__consumer_offsets", offsets_partition)
                cluster.kill(coordinator)
        assert consumed == 3000, f"the group stopped at offset {consumed}"
        assert coordinator is not None and committed_before_kill >= 1000
        wait_until(lambda: cluster.leader("__consumer_offsets", offsets_partition)
                   not in (-1, coordinator), "a new coordinator")
        assert last_committed == 3000
    finally:
        consumer.close()
    # A new member of the group resumes at the committed offset, from the new coordinator.
    resumed = Consumer({"bootstrap.servers": cluster.bootstrap, "group.id": group,
                        "enable.auto.commit": False})
    try:
        [committed] = resumed.committed([TopicPartition("orders", 0)], timeout=TIMEOUT)
        assert committed.offset == 3000
    finally:
        resumed.close()


def test_paused_follower_leaves_the_isr_and_acks_all_is_refused_until_it_returns(cluster):
    create_topic(cluster, "pairs", 1, 2)
    leader = cluster.leader("pairs")
    [follower] = [n for n in cluster.isr("pairs") if n != leader]
    strict = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all",
                       "enable.idempotence": False, "retries": 0, "linger.ms": 0,
                       "message.timeout.ms": 10000})
    outcomes: list[KafkaError | None] = []

    def produce_one() -> KafkaError | None:
        outcomes.clear()
        strict.produce("pairs", b"x", partition=0, on_delivery=lambda err, msg: outcomes.append(err))
        strict.flush(TIMEOUT)
        return outcomes[0]

    assert produce_one() is None
    cluster.pause(follower)
    try:
        wait_until(lambda: cluster.isr("pairs") == [leader], "the ISR shrunk to the leader")
        error = produce_one()
        assert error is not None and error.code() == KafkaError.NOT_ENOUGH_REPLICAS, error
    finally:
        cluster.resume(follower)
    wait_until(lambda: sorted(cluster.isr("pairs")) == sorted([leader, follower]),
               "the follower back in the ISR")
    assert wait_until(lambda: produce_one() is None, "acks=all accepted again")


def test_a_restarted_controller_resumes_from_its_log(cluster):
    """Without the controller the brokers keep serving what they lead; the
    restarted controller knows every topic and broker from its log, and
    the next failover is decided from there."""
    create_topic(cluster, "t", 1, 3)
    sender = Sender(cluster, "t")
    sender.send(500)
    sender.flush()
    cluster.controller.stop()
    sender.send(500)
    sender.flush()
    cluster.controller.start()
    cluster.wait_ready()
    leader = cluster.leader("t")
    cluster.kill(leader)
    wait_until(lambda: cluster.leader("t") not in (-1, leader), "a new leader")
    sender.send(500)
    sender.flush()
    assert sorted(sender.acked) == list(range(1500)) and not sender.failed
    assert_exactly_once_in_order(read_all(cluster, "t", 0, high_watermark(cluster, "t")),
                                 sender.acked)


def test_kafka_python_idempotent_producer_and_consumer_across_a_leader_kill(cluster):
    """The second client: kafka-python's idempotent producer retries into
    the new leader, and its consumer reads every acknowledged record once."""
    create_topic(cluster, "kp", 1, 3)
    producer = KafkaProducer(bootstrap_servers=cluster.bootstrap.split(","), acks="all",
                             enable_idempotence=True, linger_ms=2, request_timeout_ms=10000,
                             delivery_timeout_ms=50000, retries=2 ** 31 - 1)
    futures = [producer.send("kp", str(v).encode(), partition=0) for v in range(2000)]
    producer.flush(TIMEOUT)
    leader = cluster.leader("kp")
    cluster.kill(leader)
    futures += [producer.send("kp", str(v).encode(), partition=0) for v in range(2000, 4000)]
    producer.flush(TIMEOUT)
    acked = [v for v, f in enumerate(futures) if f.succeeded()]
    producer.close(TIMEOUT)
    assert acked == list(range(4000))
    consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap.split(","),
                             enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=3000)
    consumer.assign([KTopicPartition("kp", 0)])
    values = [int(m.value) for m in consumer]
    consumer.close()
    assert_exactly_once_in_order(values, acked)
