"""Real clients end to end against a broker process: confluent-kafka and
kafka-python produce (acks 0, 1, all, idempotent), consume with assign,
commit and fetch committed offsets; the data survives SIGTERM and SIGKILL."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

TIMEOUT = 30


def create_topic(bootstrap, name, partitions=4):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, num_partitions=partitions,
                                            replication_factor=1)])
    futures[name].result(TIMEOUT)


def produce_confluent(bootstrap, topic, values, **conf):
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    acked, errors = {}, []

    def report(err, msg):
        if err is not None:
            errors.append(err)
        else:
            acked[int(msg.value())] = (msg.partition(), msg.offset())
    for v in values:
        producer.produce(topic, str(v).encode(), partition=v % 4, on_delivery=report)
        producer.poll(0)
    assert producer.flush(TIMEOUT) == 0
    assert errors == []
    return acked


def consume_assigned(bootstrap, topic, partitions, expect, group=None):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or "reader",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    seen = {}
    deadline = time.monotonic() + TIMEOUT
    while len(seen) < expect and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is None:
            continue
        assert msg.error() is None or msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
        if msg.error() is None:
            seen[int(msg.value())] = (msg.partition(), msg.offset())
    consumer.close()
    return seen


@pytest.mark.parametrize("acks", ["1", "all"])
def test_confluent_produce_and_consume(broker, acks):
    create_topic(broker.bootstrap, "t")
    acked = produce_confluent(broker.bootstrap, "t", range(200), acks=acks)
    assert len(acked) == 200
    seen = consume_assigned(broker.bootstrap, "t", range(4), 200)
    assert seen == acked
    # Offsets per partition are dense and in send order.
    for p in range(4):
        offsets = sorted(o for part, o in acked.values() if part == p)
        assert offsets == list(range(50))


def test_confluent_acks_zero_and_idempotent(broker):
    create_topic(broker.bootstrap, "t")
    producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "0"})
    for v in range(100):
        producer.produce("t", str(v).encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    acked = produce_confluent(broker.bootstrap, "t", range(100, 200),
                              **{"enable.idempotence": True})
    assert len(acked) == 100
    seen = consume_assigned(broker.bootstrap, "t", range(4), 200)
    assert set(seen) == set(range(200))


def test_kafka_python_produce_consume_commit(broker):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, acks="all")
    futures = [producer.send("auto", str(v).encode(), partition=0) for v in range(50)]
    offsets = [f.get(TIMEOUT).offset for f in futures]
    producer.close()
    assert offsets == list(range(50))  # auto-created topic, one partition per num.partitions
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, group_id="g",
                             enable_auto_commit=False, auto_offset_reset="earliest")
    tp = KTopicPartition("auto", 0)
    consumer.assign([tp])
    values = []
    deadline = time.monotonic() + TIMEOUT
    while len(values) < 50 and time.monotonic() < deadline:
        for records in consumer.poll(500).values():
            values += [int(r.value) for r in records]
    assert values == list(range(50))
    consumer.commit({tp: __import__("kafka").OffsetAndMetadata(50, "", -1)})
    assert consumer.committed(tp) == 50
    consumer.close()


def test_confluent_commit_and_committed(broker):
    create_topic(broker.bootstrap, "t")
    produce_confluent(broker.bootstrap, "t", range(40))
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("t", 1, 7)], asynchronous=False)
    [got] = consumer.committed([TopicPartition("t", 1)], timeout=TIMEOUT)
    assert got.offset == 7
    consumer.close()


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_data_offsets_and_producer_ids_survive_restart(broker, how):
    create_topic(broker.bootstrap, "t")
    acked = produce_confluent(broker.bootstrap, "t", range(100),
                              **{"enable.idempotence": True})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g",
                         "enable.auto.commit": False})
    consumer.commit(offsets=[TopicPartition("t", 2, 11)], asynchronous=False)
    consumer.close()
    getattr(broker, how)()
    broker.start()
    assert consume_assigned(broker.bootstrap, "t", range(4), 100) == acked
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g"})
    [got] = consumer.committed([TopicPartition("t", 2)], timeout=TIMEOUT)
    consumer.close()
    assert got.offset == 11
    # A new producer after the restart gets offsets after the old data.
    more = produce_confluent(broker.bootstrap, "t", range(100, 104),
                             **{"enable.idempotence": True})
    assert sorted(o for _, o in more.values()) == [25, 25, 25, 25]


@pytest.mark.parametrize("conf", [{"acks": 0}, {"acks": 1}, {"acks": "all"},
                                  {"acks": "all", "enable_idempotence": True}],
                         ids=["acks0", "acks1", "acksall", "idempotent"])
def test_kafka_python_produce(broker, conf):
    create_topic(broker.bootstrap, "t")
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5, **conf)
    futures = [producer.send("t", str(v).encode(), partition=v % 4) for v in range(200)]
    producer.flush(TIMEOUT)
    for f in futures:
        f.get(TIMEOUT)
    producer.close()
    seen = consume_assigned(broker.bootstrap, "t", range(4), 200)
    assert set(seen) == set(range(200))
    for p in range(4):  # each partition holds its values in send order
        in_order = [v for v, _ in sorted(seen.items(), key=lambda kv: kv[1]) if v % 4 == p]
        assert in_order == list(range(p, 200, 4))
