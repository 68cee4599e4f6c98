"""The producer adapters with real clients against a real reference broker
(one broker for the module; a 3-broker cluster where replicas must fail):
every test runs once per library, the same suite for every implementation."""

from __future__ import annotations

import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.local_cluster import LocalCluster
from tests.workloads.clients.client_support import TIMEOUT, producer
from workloads.clients import ClientSettings, Outcome, make_producer


# -- send ------------------------------------------------------------------------

def test_send_acknowledged_with_offsets_in_order(library, broker, topic, clients):
    p = producer(library, broker, clients)
    outcome = p.send([(topic, 0, 10), (topic, 0, 11), (topic, 1, 12), (topic, 0, 13)], 10)
    assert outcome == Outcome("ok", {"sends": [
        {"topic": topic, "partition": 0, "value": 10, "offset": 0},
        {"topic": topic, "partition": 0, "value": 11, "offset": 1},
        {"topic": topic, "partition": 1, "value": 12, "offset": 0},
        {"topic": topic, "partition": 0, "value": 13, "offset": 2}]})
    assert p.send([(topic, 0, 14)], 10).value["sends"][0]["offset"] == 3


def test_send_with_acks_zero_has_no_offset(library, broker, topic, clients):
    p = producer(library, broker, clients, ClientSettings(acks="0", idempotence=False))
    outcome = p.send([(topic, 1, 20)], 10)
    assert outcome.type == "ok"
    assert outcome.value["sends"][0]["offset"] is None


def test_send_to_missing_topic_fails(library, broker, clients):
    p = producer(library, broker, clients, ClientSettings(max_block_ms=1000))
    started = time.monotonic()
    outcome = p.send([("no-such-topic", 0, 30), ("no-such-topic", 1, 31)], 10)
    assert outcome.type == "fail", outcome
    assert [s["offset"] for s in outcome.value["sends"]] == [None, None]
    # confluent: UNKNOWN_TOPIC_OR_PART once topic.metadata.propagation.max.ms
    # passed; kafka-python and java: send() found no metadata within
    # max_block_ms (Java's TimeoutException is REQUEST_TIMED_OUT).
    assert outcome.error.split(":")[0] in ("UNKNOWN_TOPIC_OR_PART", "KafkaTimeoutError",
                                           "REQUEST_TIMED_OUT")
    assert time.monotonic() - started < 8


def test_send_to_missing_partition_fails(library, broker, topic, clients):
    p = producer(library, broker, clients)
    assert p.send([(topic, 0, 40)], 10).type == "ok"  # the topic's metadata is known now
    outcome = p.send([(topic, 7, 41)], 10)
    assert outcome.type == "fail", outcome
    # java: the partition did not appear in the metadata within max_block_ms.
    assert outcome.error.split(":")[0] in ("_UNKNOWN_PARTITION", "ValueError",
                                           "REQUEST_TIMED_OUT")


def test_send_to_paused_broker_is_info_and_spends_the_producer(library, broker, topic,
                                                               clients):
    p = producer(library, broker, clients)
    assert p.send([(topic, 0, 50)], 10).type == "ok"  # connected
    broker.pause()
    try:
        started = time.monotonic()
        outcome = p.send([(topic, 0, 51)], 1.5)
        elapsed = time.monotonic() - started
    finally:
        broker.resume()
    assert outcome.type == "info", outcome
    assert outcome.value["sends"] == [{"topic": topic, "partition": 0, "value": 51,
                                       "offset": None}]
    assert outcome.error.split(":")[0] in ("_TIMED_OUT", "KafkaTimeoutError", "REQUEST_TIMED_OUT")
    assert 1.4 < elapsed < 5
    with pytest.raises(RuntimeError, match="make a new one"):
        p.send([(topic, 0, 52)], 1)


CLUSTER_SETTINGS = [
    "broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
    "replica.lag.time.max.ms=2000", "replica.fetch.wait.max.ms=200",
    "group.initial.rebalance.delay.ms=0", "min.insync.replicas=3",
]


def test_not_enough_replicas_fails_only_without_retries(library, tmp_path):
    """min.insync.replicas=3 and a follower down: the leader refuses acks=all
    before the append. Without retries that is certain (`fail`); with
    retries the producer tries until its timeout (`info`)."""
    with LocalCluster(tmp_path, 3, config=CLUSTER_SETTINGS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic("r", 1, 3)])["r"].result(TIMEOUT)
        cluster.wait_ready(TIMEOUT)
        eager = make_producer(library, cluster.bootstrap,
                              ClientSettings(idempotence=False, retries=0), "eager")
        patient = make_producer(library, cluster.bootstrap, ClientSettings(), "patient")
        try:
            assert eager.send([("r", 0, 1)], 10).type == "ok"
            assert patient.send([("r", 0, 2)], 10).type == "ok"
            leader = cluster.leader("r", 0)
            cluster.kill(next(n for n in cluster.brokers if n != leader))
            deadline = time.monotonic() + TIMEOUT
            while len(cluster.isr("r", 0)) > 2 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(cluster.isr("r", 0)) == 2
            refused = eager.send([("r", 0, 3)], 10)
            retried = patient.send([("r", 0, 4)], 2)
        finally:
            eager.close()
            patient.close()
    assert refused.type == "fail", refused
    assert refused.error.split(":")[0] in ("NOT_ENOUGH_REPLICAS", "NotEnoughReplicasError")
    assert retried.type == "info", retried
