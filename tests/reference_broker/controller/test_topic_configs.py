"""The controller's side of per-topic configs and manual assignments:
config records between the topic and its partitions, placement as the
request assigns it, IncrementalAlterConfigs writing only what changes, a
topic's unclean.leader.election.enable overriding the controller's in
either direction, and all of it rebuilt from the log."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.controller import (
    NO_LEADER, Controller, InconsistentMetadataRecord, MetadataImage, PartitionState,
    SetTopicConfig,
)
from reference_broker.topic_configs import APPEND, DELETE, SET, ConfigChange
from tests.reference_broker.controller.cluster import running
from tests.reference_broker.controller.test_elections import fence, unfence

NONE = ErrorCode.none


def test_configs_are_written_between_the_topic_and_its_partitions():
    ctl, _ = running(2)
    error, message, records = ctl.create_topic(
        "t", 2, 2, configs=[("min.insync.replicas", "2"), ("retention.ms", "-1")])
    assert (error, message) == (NONE, None)
    assert [type(r).__name__ for r in records] == [
        "CreateTopic", "SetTopicConfig", "SetTopicConfig", "PartitionState", "PartitionState"]
    assert records[1:3] == [SetTopicConfig("t", "min.insync.replicas", "2"),
                            SetTopicConfig("t", "retention.ms", "-1")]
    assert ctl.image.topics["t"].configs == {"min.insync.replicas": "2", "retention.ms": "-1"}


def test_configs_are_checked_before_the_placement_and_refusals_write_nothing():
    ctl, _ = running(1)
    offset = ctl.image.offset
    error, message, records = ctl.create_topic("t", 1, 5, configs=[("segment.bytes", "1")])
    assert (error, records) == (ErrorCode.invalid_config, [])
    assert message == ("Invalid value 1 for configuration segment.bytes: "
                       "Value must be at least 14")
    assert ctl.create_topic("t", 1, 1, configs=[("flush.messages", "5")],
                            validate_only=True) == (NONE, None, [])
    assert ctl.image.offset == offset and "t" not in ctl.image.topics


def test_a_manual_assignment_places_replicas_as_given_and_fenced_ones_stay_out_of_the_isr():
    ctl, epochs = running(3)
    fence(ctl, epochs, 3)
    error, _, records = ctl.create_topic("t", -1, -1, assignments=[(1, (2, 3, 1)),
                                                                   (0, (3, 1, 2))])
    assert error is NONE
    assert records[1:] == [PartitionState("t", 0, (3, 1, 2), (1, 2), 1, 0, 0),
                           PartitionState("t", 1, (2, 3, 1), (2, 1), 2, 0, 0)]


@pytest.mark.parametrize("assignments, says", [
    ([(0, (1, 2)), (1, (1,))], "includes a partition with 1 replica(s), but this is not "
                               "consistent with previous partitions, which have 2"),
    ([(0, (3,))], "for partition 0 are fenced"),
    ([(0, (1,)), (0, (2,))], "multiple manual partition assignments for partition 0"),
    ([(0, (1,)), (2, (2,))], "consecutive 0-based integer sequence"),
])
def test_manual_assignments_kafka_refuses(assignments, says):
    ctl, epochs = running(3)
    fence(ctl, epochs, 3)
    error, message, records = ctl.create_topic("t", -1, -1, assignments=assignments)
    assert (error, records) == (ErrorCode.invalid_replica_assignment, [])
    assert says in message


def test_alter_writes_only_the_keys_that_change():
    ctl, _ = running(1)
    ctl.create_topic("t", 1, 1, configs=[("min.insync.replicas", "2"), ("retention.ms", "-1")])
    error, _, records = ctl.alter_topic_configs("t", [
        ConfigChange("min.insync.replicas", SET, "2"),          # unchanged: no record
        ConfigChange("retention.ms", DELETE, None),
        ConfigChange("follower.replication.throttled.replicas", APPEND, "0:1")])
    assert error is NONE
    assert records == [SetTopicConfig("t", "follower.replication.throttled.replicas", "0:1"),
                       SetTopicConfig("t", "retention.ms", None)]
    assert ctl.image.topics["t"].configs == {
        "min.insync.replicas": "2", "follower.replication.throttled.replicas": "0:1"}
    assert ctl.alter_topic_configs("x", [])[0] is ErrorCode.unknown_topic_or_partition
    before = ctl.image.offset
    assert ctl.alter_topic_configs("t", [ConfigChange("min.insync.replicas", SET, "1")],
                                   validate_only=True) == (NONE, None, [])
    assert ctl.image.offset == before


def leaderless(ctl: Controller, epochs: dict[int, int]) -> None:
    """Replicas (1, 2) of every topic: 2 leaves the ISR, then 1 goes too."""
    fence(ctl, epochs, 2)
    fence(ctl, epochs, 1)
    assert all(s.leader == NO_LEADER and s.isr == (1,) for s in ctl.image.partitions())


@pytest.mark.parametrize("default", [False, True])
def test_a_topics_unclean_election_setting_overrides_the_controllers(default):
    ctl, epochs = running(2, unclean_leader_election=default)
    ctl.create_topic("own", 1, 2, configs=[("unclean.leader.election.enable", str(not default))])
    ctl.create_topic("inherits", 1, 2)
    leaderless(ctl, epochs)
    unfence(ctl, epochs, 2)         # only the out-of-sync replica comes back
    leaders = {s.topic: s.leader for s in ctl.image.partitions()}
    assert leaders == {"own": 2 if not default else NO_LEADER,
                       "inherits": 2 if default else NO_LEADER}


def test_turning_unclean_election_on_elects_a_leaderless_topic_at_once():
    # KAFKA-12670: the controller does not wait for a broker to come back.
    ctl, epochs = running(2)
    ctl.create_topic("t", 1, 2)
    leaderless(ctl, epochs)
    unfence(ctl, epochs, 2)
    assert ctl.image.partition("t", 0).leader == NO_LEADER
    error, _, records = ctl.alter_topic_configs(
        "t", [ConfigChange("unclean.leader.election.enable", SET, "true")])
    assert error is NONE
    assert records == [SetTopicConfig("t", "unclean.leader.election.enable", "true"),
                       PartitionState("t", 0, (1, 2), (2,), 2, 2, 3)]


def test_configs_replay_from_the_log_and_go_with_their_topic():
    ctl, _ = running(1)
    ctl.create_topic("t", 1, 1, configs=[("min.insync.replicas", "2")])
    ctl.alter_topic_configs("t", [ConfigChange("max.message.bytes", SET, "100")])
    follower = MetadataImage()
    for record in ctl.records_since(0):
        follower.apply(record)
    assert follower.topics["t"].configs == Controller(ctl.records_since(0)).image.topics[
        "t"].configs == {"min.insync.replicas": "2", "max.message.bytes": "100"}
    ctl.delete_topic("t")
    ctl.create_topic("t", 1, 1)
    assert ctl.image.topics["t"].configs == {}
    with pytest.raises(InconsistentMetadataRecord, match="unknown topic 'gone'"):
        MetadataImage().apply(SetTopicConfig("gone", "retention.ms", "-1"))
