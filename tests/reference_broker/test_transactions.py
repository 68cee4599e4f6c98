"""Transactions end to end against a broker process, with real clients:
confluent-kafka (librdkafka) and kafka-python transactional producers,
read_committed and read_uncommitted consumers, a zombie fenced, an open
transaction holding readers at the last stable offset, a transaction
expired by the coordinator, and the KIP-664 views of all of it."""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition
from kafka.errors import KafkaError as KafkaPythonError
from kio.schema.describe_producers.v0 import request as describe_producers
from kio.schema.describe_transactions.v0 import request as describe_transactions
from kio.schema.list_transactions.v0 import request as list_transactions
from kio.schema.types import TopicName, TransactionalId
from kio.static.primitive import i32

from cluster.broker_process import BrokerProcess
from reference_broker.peer import Peer

TIMEOUT = 30
TOPIC = "t"


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", config=[
        "group.initial.rebalance.delay.ms=0", "num.partitions=2",
        "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"], log_level="DEBUG")
    with process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(TIMEOUT)
        yield process


def confluent_producer(bootstrap, transactional_id, **conf):
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                         "linger.ms": 5, **conf})
    producer.init_transactions(TIMEOUT)
    return producer


def transaction(producer, values, *, commit: bool):
    """Send `values` (value v to partition v % 2) in one transaction, flushed
    to the broker before the commit or abort (librdkafka purges what is
    still queued when it aborts)."""
    producer.begin_transaction()
    for v in values:
        producer.produce(TOPIC, str(v).encode(), partition=v % 2)
    assert producer.flush(TIMEOUT) == 0
    if commit:
        producer.commit_transaction(TIMEOUT)
    else:
        producer.abort_transaction(TIMEOUT)


def left_open(producer, value: bytes, partition: int = 0) -> None:
    """Begin a transaction and put `value` in the broker's log, never ending it."""
    producer.begin_transaction()
    producer.produce(TOPIC, value, partition=partition)
    assert producer.flush(TIMEOUT) == 0


def read_all(bootstrap, isolation, expect_at_least=0, wait=3.0):
    """Every value on both partitions, read from the start; polls until
    `expect_at_least` values or `wait` seconds after the last one."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"reader-{isolation}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in (0, 1)])
    seen, deadline = [], time.monotonic() + TIMEOUT
    quiet_until = time.monotonic() + wait
    while time.monotonic() < deadline and (len(seen) < expect_at_least
                                           or time.monotonic() < quiet_until):
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
            quiet_until = time.monotonic() + wait
    consumer.close()
    return sorted(seen)


def test_committed_values_are_read_and_aborted_ones_only_uncommitted(broker):
    producer = confluent_producer(broker.bootstrap, "tx-a")
    transaction(producer, range(0, 4), commit=True)
    transaction(producer, range(4, 8), commit=False)
    transaction(producer, range(8, 12), commit=True)
    committed = [*range(0, 4), *range(8, 12)]
    assert read_all(broker.bootstrap, "read_committed", 8) == committed
    assert read_all(broker.bootstrap, "read_uncommitted", 12) == list(range(12))
    # kafka-python's consumer drops the aborted batches by the ranges the
    # fetch returns (KIP-98's AbortedTransactions) as librdkafka does.
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap,
                             isolation_level="read_committed", consumer_timeout_ms=3000)
    consumer.assign([KTopicPartition(TOPIC, p) for p in (0, 1)])
    consumer.seek_to_beginning()
    assert sorted(int(m.value) for m in consumer) == committed
    consumer.close()


def test_kafka_python_commits_and_aborts(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-kp")
    producer.init_transactions()
    for values, commit in ((range(0, 3), True), (range(3, 6), False), (range(6, 9), True)):
        producer.begin_transaction()
        for v in values:
            producer.send(TOPIC, str(v).encode(), partition=v % 2)
        producer.flush(TIMEOUT)
        producer.commit_transaction() if commit else producer.abort_transaction()
    producer.close(TIMEOUT)
    assert read_all(broker.bootstrap, "read_committed", 6) == [0, 1, 2, 6, 7, 8]
    assert read_all(broker.bootstrap, "read_uncommitted", 9) == list(range(9))


def test_an_open_transaction_holds_read_committed_readers_at_its_start(broker):
    producer = confluent_producer(broker.bootstrap, "tx-open")
    transaction(producer, [0, 1], commit=True)
    left_open(producer, b"2")
    # Partition 0: value 0, the commit marker, value 2 of the open
    # transaction. ListOffsets latest is the last stable offset (2) under
    # read_committed, the high watermark (3) under read_uncommitted.
    ends = {}
    for isolation in ("read_committed", "read_uncommitted"):
        reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "lso",
                           "isolation.level": isolation})
        ends[isolation] = reader.get_watermark_offsets(TopicPartition(TOPIC, 0), TIMEOUT,
                                                       cached=False)
        reader.close()
    assert ends == {"read_committed": (0, 2), "read_uncommitted": (0, 3)}
    assert read_all(broker.bootstrap, "read_committed") == [0, 1]
    producer.commit_transaction(TIMEOUT)
    assert read_all(broker.bootstrap, "read_committed", 3) == [0, 1, 2]


@pytest.mark.parametrize("client", ["confluent-kafka", "kafka-python"])
def test_a_second_producer_with_the_same_id_fences_the_first(broker, client):
    if client == "confluent-kafka":
        zombie = confluent_producer(broker.bootstrap, "tx-z")
        zombie.begin_transaction()
        zombie.produce(TOPIC, b"100", partition=0)
        assert zombie.flush(TIMEOUT) == 0
    else:
        zombie = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="tx-z")
        zombie.init_transactions()
        zombie.begin_transaction()
        zombie.send(TOPIC, b"100", partition=0)
        zombie.flush(TIMEOUT)
    successor = confluent_producer(broker.bootstrap, "tx-z")   # aborts the zombie's
    transaction(successor, [1], commit=True)
    with pytest.raises((KafkaException, KafkaPythonError)):
        zombie.commit_transaction(*([TIMEOUT] if client == "confluent-kafka" else []))
    assert read_all(broker.bootstrap, "read_committed", 1) == [1]
    assert read_all(broker.bootstrap, "read_uncommitted", 2) == [1, 100]


def test_the_coordinator_aborts_an_expired_transaction_and_fences_its_producer(broker):
    producer = confluent_producer(broker.bootstrap, "tx-slow", **{"transaction.timeout.ms": 1500})
    producer.begin_transaction()
    producer.produce(TOPIC, b"7", partition=1)
    assert producer.flush(TIMEOUT) == 0
    time.sleep(4)           # past the timeout and a sweep
    with pytest.raises(KafkaException):
        producer.commit_transaction(TIMEOUT)
    assert read_all(broker.bootstrap, "read_committed") == []
    assert "timed out after 1500 ms; aborting" in broker.log_path.read_text()


def test_the_kip_664_views(broker):
    producer = confluent_producer(broker.bootstrap, "tx-view")
    producer.begin_transaction()
    producer.produce(TOPIC, b"1", partition=1)
    assert producer.flush(TIMEOUT) == 0
    host, port = broker.bootstrap.split(":")
    peer = Peer(host, int(port), "test")

    async def ask():
        described = await peer.request(describe_transactions.DescribeTransactionsRequest(
            transactional_ids=(TransactionalId("tx-view"), TransactionalId("nobody"))), 10)
        listed = await peer.request(list_transactions.ListTransactionsRequest(
            state_filters=("Ongoing",), producer_id_filters=()), 10)
        producers = await peer.request(describe_producers.DescribeProducersRequest(topics=(
            describe_producers.TopicRequest(name=TopicName(TOPIC),
                                            partition_indexes=(i32(1),)),)), 10)
        peer.close()
        return described, listed, producers

    described, listed, producers = asyncio.run(ask())
    view, missing = described.transaction_states
    assert (view.transaction_state, [(t.topic, t.partitions) for t in view.topics]) \
        == ("Ongoing", [(TOPIC, (1,))])
    assert missing.error_code.name == "transactional_id_not_found"
    assert [s.transactional_id for s in listed.transaction_states] == ["tx-view"]
    state, = producers.topics[0].partitions[0].active_producers
    assert (state.producer_id, state.current_txn_start_offset) == (view.producer_id, 0)
    producer.abort_transaction(TIMEOUT)


def ctp_round(consumer, producer, count, *, commit: bool):
    """Consume `count` input values, write each +1000 to TOPIC, and send the
    consumer's positions with the transaction (KIP-447)."""
    got = []
    deadline = time.monotonic() + TIMEOUT
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            got.append(int(message.value()))
    producer.begin_transaction()
    for v in got:
        producer.produce(TOPIC, str(v + 1000).encode(), partition=v % 2)
    producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                         consumer.consumer_group_metadata(), TIMEOUT)
    assert producer.flush(TIMEOUT) == 0
    return got


def committed(bootstrap, group, isolation="read_committed", timeout=TIMEOUT):
    """The group's offset of `in`/0. read_committed (librdkafka's default)
    asks OffsetFetch with require_stable, and librdkafka retries an
    UNSTABLE_OFFSET_COMMIT answer until `timeout`."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                       "isolation.level": isolation})
    try:
        offset, = reader.committed([TopicPartition("in", 0)], timeout)
        return offset.offset
    finally:
        reader.close()


def test_consume_transform_produce_commits_the_input_offsets_with_the_output(broker):
    """The offsets sent with a transaction are the group's only once it
    commits (pending until the marker: unstable to a read_committed
    consumer), are dropped when it aborts, and survive a restart of the
    broker — also while still pending."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("in", 1, 1)])["in"].result(TIMEOUT)
    feeder = Producer({"bootstrap.servers": broker.bootstrap})
    for v in range(15):
        feeder.produce("in", str(v).encode(), partition=0)
    assert feeder.flush(TIMEOUT) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "ctp",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["in"])
    producer = confluent_producer(broker.bootstrap, "tx-ctp")

    assert ctp_round(consumer, producer, 5, commit=True) == [0, 1, 2, 3, 4]
    producer.commit_transaction(TIMEOUT)
    assert committed(broker.bootstrap, "ctp") == 5
    ctp_round(consumer, producer, 5, commit=False)
    producer.abort_transaction(TIMEOUT)
    assert committed(broker.bootstrap, "ctp") == 5

    consumer.seek(TopicPartition("in", 0, 5))
    assert ctp_round(consumer, producer, 5, commit=True) == [5, 6, 7, 8, 9]
    # KIP-447: while offset 10 is pending, a read_committed consumer is not
    # told 5 (it would process 5..9 again); a read_uncommitted one is.
    assert committed(broker.bootstrap, "ctp", "read_uncommitted") == 5
    with pytest.raises(KafkaException, match="(?i)timed out"):
        committed(broker.bootstrap, "ctp", timeout=2)
    broker.stop()               # the offsets are pending in the log
    broker.start()
    producer.commit_transaction(TIMEOUT)    # retried until the restarted broker answers
    deadline = time.monotonic() + TIMEOUT
    while committed(broker.bootstrap, "ctp") != 10 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert committed(broker.bootstrap, "ctp") == 10
    consumer.close()
    assert read_all(broker.bootstrap, "read_committed", 10) == [*range(1000, 1005),
                                                                *range(1005, 1010)]
