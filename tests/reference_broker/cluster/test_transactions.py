"""Transactions on three brokers and a controller, with real failures: the
transaction coordinator killed in the middle of a commit or an abort while
the markers cannot land (the data partition's leader paused), and
read_committed readers across the leader change that follows; and an open
transaction whose partition leader is killed half-way (the new leader
holds read_committed readers at its start until the marker).

`__transaction_state` has one partition, so the coordinator is its leader;
the data topic is placed so that its leader is another broker.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kio.schema.describe_transactions.v0 import request as describe_transactions
from kio.schema.types import TransactionalId

from cluster.local_cluster import LocalCluster
from reference_broker.peer import Peer

SETTINGS = [
    "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=3000", "replica.fetch.wait.max.ms=200",
    "transaction.state.log.num.partitions=1", "offsets.topic.num.partitions=1",
    "group.initial.rebalance.delay.ms=0", "min.insync.replicas=2",
]
TIMEOUT = 60.0
TOPIC = "t"


@pytest.fixture
def cluster(tmp_path):
    with LocalCluster(tmp_path, 3, config=SETTINGS) as started:
        yield started


def read_committed(bootstrap, expect, isolation="read_committed", quiet=3.0):
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{time.monotonic()}",
                         "isolation.level": isolation, "enable.auto.commit": False})
    consumer.assign([TopicPartition(TOPIC, 0, 0)])
    seen, deadline, quiet_until = [], time.monotonic() + TIMEOUT, time.monotonic() + quiet
    while time.monotonic() < deadline and (len(seen) < expect or time.monotonic() < quiet_until):
        message = consumer.poll(0.2)
        if message is not None and message.error() is None:
            seen.append(int(message.value()))
            quiet_until = time.monotonic() + quiet
    consumer.close()
    return seen


def describe(cluster, node, transactional_id):
    address = cluster.brokers[node].bootstrap
    host, port = address.split(":")
    peer = Peer(host, int(port), "test")

    async def ask():
        try:
            return await peer.request(describe_transactions.DescribeTransactionsRequest(
                transactional_ids=(TransactionalId(transactional_id),)), 10)
        finally:
            peer.close()
    return asyncio.run(ask()).transaction_states[0]


def producer_away_from_coordinator(cluster, transactional_id):
    """An initialised transactional producer, and TOPIC's one partition
    placed so that its leader is not the transaction coordinator:
    (producer, coordinator, data leader)."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap,
                         "transactional.id": transactional_id, "linger.ms": 5})
    producer.init_transactions(TIMEOUT)
    coordinator = cluster.leader("__transaction_state")
    others = sorted(set(cluster.brokers) - {coordinator})
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, num_partitions=1, replica_assignment=[[
        others[0], others[1], coordinator]])])[TOPIC].result(30)
    cluster.wait_ready()
    data_leader = cluster.leader(TOPIC)
    assert data_leader != coordinator
    return producer, coordinator, data_leader


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_coordinator_killed_mid_transaction_end_while_markers_cannot_land(cluster, commit):
    producer, coordinator, data_leader = producer_away_from_coordinator(cluster, "tx")

    producer.begin_transaction()
    for v in range(20):
        producer.produce(TOPIC, str(v).encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    cluster.pause(data_leader)          # the markers cannot land now
    try:
        if commit:
            producer.commit_transaction(TIMEOUT)    # answered once PrepareCommit is written
        else:
            producer.abort_transaction(TIMEOUT)
        cluster.kill(coordinator)       # before any marker could be written
    finally:
        cluster.resume(data_leader)
    # A new coordinator loads Prepare* and writes the markers, to whichever
    # broker leads the partition by then.
    expected = list(range(20)) if commit else []
    assert read_committed(cluster.bootstrap, len(expected)) == expected
    assert sorted(read_committed(cluster.bootstrap, 20, "read_uncommitted")) == list(range(20))
    successor = cluster.leader("__transaction_state")
    assert successor != coordinator
    deadline = time.monotonic() + TIMEOUT
    while (state := describe(cluster, successor, "tx").transaction_state) \
            != ("CompleteCommit" if commit else "CompleteAbort") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert state == ("CompleteCommit" if commit else "CompleteAbort")

    # The producer goes on with the new coordinator; readers see the next
    # transaction across the leader change.
    producer.begin_transaction()
    producer.produce(TOPIC, b"100", partition=0)
    producer.commit_transaction(TIMEOUT)
    assert read_committed(cluster.bootstrap, len(expected) + 1) == [*expected, 100]


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_an_open_transaction_outlives_its_partition_leader(cluster, commit):
    """Half a transaction written to one leader, the other half to the
    replica that takes over when it is killed: the new leader rebuilds the
    open transaction from its log, so read_committed readers stop at its
    first offset until the marker, and then see all of it or none."""
    producer, _, first_leader = producer_away_from_coordinator(cluster, "tx-lc")
    feeder = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    feeder.produce(TOPIC, b"-1", partition=0)       # committed before the transaction
    assert feeder.flush(TIMEOUT) == 0

    producer.begin_transaction()
    for v in range(10):
        producer.produce(TOPIC, str(v).encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    deadline = time.monotonic() + TIMEOUT       # both halves' replicas in the ISR
    while len(cluster.isr(TOPIC)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    cluster.kill(first_leader)
    deadline = time.monotonic() + TIMEOUT
    while cluster.leader(TOPIC) in (first_leader, -1) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert cluster.leader(TOPIC) not in (first_leader, -1)
    # Open on the new leader: read_committed stops before its first record.
    assert read_committed(cluster.bootstrap, 1) == [-1]
    assert read_committed(cluster.bootstrap, 11, "read_uncommitted") == list(range(-1, 10))

    for v in range(10, 20):
        producer.produce(TOPIC, str(v).encode(), partition=0)
    assert producer.flush(TIMEOUT) == 0
    if commit:
        producer.commit_transaction(TIMEOUT)
    else:
        producer.abort_transaction(TIMEOUT)
    feeder.produce(TOPIC, b"100", partition=0)      # after the marker
    assert feeder.flush(TIMEOUT) == 0
    expected = [-1, *(range(20) if commit else ()), 100]
    assert read_committed(cluster.bootstrap, len(expected)) == expected
