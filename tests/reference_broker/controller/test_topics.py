"""Topic creation and deletion: replicas striped over the brokers (unfenced
first, the leader always unfenced), Kafka's defaults and errors."""

from __future__ import annotations

import uuid

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.controller import CreateTopic, DeleteTopic, PartitionState
from tests.reference_broker.controller.cluster import controller, running

NONE = ErrorCode.none


def layout(ctl, topic: str) -> list[tuple[tuple[int, ...], tuple[int, ...], int]]:
    return [(s.replicas, s.isr, s.leader) for s in ctl.image.partitions() if s.topic == topic]


def test_replicas_stripe_over_brokers_and_the_first_leads():
    ctl, _ = running(3)
    error, message, records = ctl.create_topic("t", 4, 2)
    assert (error, message) == (NONE, None)
    assert isinstance(records[0], CreateTopic) and records[0].name == "t"
    uuid.UUID(records[0].topic_id)
    assert records[1:] == [
        PartitionState("t", 0, (1, 2), (1, 2), 1, 0, 0),
        PartitionState("t", 1, (2, 3), (2, 3), 2, 0, 0),
        PartitionState("t", 2, (3, 1), (3, 1), 3, 0, 0),
        PartitionState("t", 3, (1, 2), (1, 2), 1, 0, 0)]


def test_the_stripe_continues_across_topics():
    ctl, _ = running(3)
    ctl.create_topic("a", 1, 1)
    ctl.create_topic("b", 2, 1)
    assert [leader for _, _, leader in layout(ctl, "b")] == [2, 3]
    assert ctl.create_topic("c", 1, 1)[2][0].topic_id != ctl.image.topics["a"].topic_id


def test_fenced_brokers_take_the_last_replicas_and_stay_out_of_the_isr():
    ctl, _ = running(2)
    ctl.register(3, "b3", 9092)              # registered, not yet caught up
    assert ctl.create_topic("t", 2, 3)[0] is NONE
    assert layout(ctl, "t") == [((1, 2, 3), (1, 2), 1), ((2, 1, 3), (2, 1), 2)]


@pytest.mark.parametrize("partitions, replication_factor, error", [
    (1, 0, ErrorCode.invalid_replication_factor),
    (1, -2, ErrorCode.invalid_replication_factor),
    (1, 4, ErrorCode.invalid_replication_factor),     # only 3 brokers registered
    (0, 1, ErrorCode.invalid_partitions),
    (-2, 1, ErrorCode.invalid_partitions),
])
def test_invalid_requests(partitions, replication_factor, error):
    ctl, _ = running(3)
    offset = ctl.image.offset
    refused, message, records = ctl.create_topic("t", partitions, replication_factor)
    assert (refused, records) == (error, []) and message
    assert ctl.image.offset == offset and "t" not in ctl.image.topics


def test_no_unfenced_broker_means_no_topic():
    ctl = controller()
    ctl.register(1, "b1", 9092)
    assert ctl.create_topic("t", 1, 1) == (
        ErrorCode.invalid_replication_factor,
        "Unable to replicate the partition: all brokers are currently fenced.", [])
    assert controller().create_topic("t", 1, 1)[::2] == (ErrorCode.invalid_replication_factor, [])


def test_minus_one_means_the_defaults():
    ctl, _ = running(3, default_replication_factor=3, default_partitions=2)
    assert ctl.create_topic("t", -1, -1)[0] is NONE
    assert [len(replicas) for replicas, _, _ in layout(ctl, "t")] == [3, 3]


def test_existing_topic():
    ctl, _ = running(1)
    ctl.create_topic("t", 1, 1)
    assert ctl.create_topic("t", 3, 1) == (ErrorCode.topic_already_exists,
                                           "Topic 't' already exists.", [])
    assert len(ctl.image.topics["t"].partitions) == 1


def test_validate_only_checks_and_writes_nothing():
    ctl, _ = running(1)
    offset = ctl.image.offset
    assert ctl.create_topic("t", 2, 1, validate_only=True) == (NONE, None, [])
    assert ctl.create_topic("t", 2, 2, validate_only=True)[::2] == (
        ErrorCode.invalid_replication_factor, [])
    assert ctl.image.offset == offset


def test_delete_topic():
    ctl, _ = running(1)
    ctl.create_topic("t", 2, 1)
    assert ctl.delete_topic("t") == (NONE, [DeleteTopic("t")])
    assert "t" not in ctl.image.topics and ctl.image.partitions_of(1) == []
    assert ctl.delete_topic("t") == (ErrorCode.unknown_topic_or_partition, [])
    assert ctl.create_topic("t", 1, 1)[0] is NONE
