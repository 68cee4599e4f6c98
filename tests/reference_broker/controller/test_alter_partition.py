"""AlterPartition (KIP-497) as the KRaft controller validates it: only the
current leader, in the current leader and partition epochs, with an ISR of
live replicas that includes itself — so a deposed leader cannot shrink the
ISR (ReplicationControlManager.validateAlterPartitionData)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.controller import Controller, PartitionState
from tests.reference_broker.controller.cluster import FakeClock, keep_alive, running

NONE = ErrorCode.none


@pytest.fixture
def cluster() -> tuple[Controller, dict[int, int]]:
    ctl, epochs = running(4)
    ctl.create_topic("t", 1, 3)      # replicas (1, 2, 3), leader 1
    return ctl, epochs


def alter(ctl: Controller, epochs: dict[int, int], new_isr: tuple[int, ...], *,
          broker: int = 1, leader_epoch: int | None = None, partition_epoch: int | None = None,
          topic: str = "t", partition: int = 0):
    current = ctl.image.partition("t", 0)
    return ctl.alter_partition(
        broker, epochs.get(broker, 0), topic, partition,
        current.leader_epoch if leader_epoch is None else leader_epoch,
        current.partition_epoch if partition_epoch is None else partition_epoch, new_isr)


def test_shrink_and_expand_move_the_partition_epoch_only(cluster):
    ctl, epochs = cluster
    shrunk = PartitionState("t", 0, (1, 2, 3), (1, 2), 1, 0, 1)
    assert alter(ctl, epochs, (1, 2)) == (NONE, shrunk, [shrunk])
    expanded = PartitionState("t", 0, (1, 2, 3), (1, 2, 3), 1, 0, 2)
    assert alter(ctl, epochs, (1, 2, 3)) == (NONE, expanded, [expanded])
    assert ctl.image.partition("t", 0) == expanded
    assert ctl.records_since(ctl.image.offset - 2) == [shrunk, expanded]


def test_unchanged_isr_answers_the_current_state_and_writes_nothing(cluster):
    ctl, epochs = cluster
    offset = ctl.image.offset
    assert alter(ctl, epochs, (1, 2, 3)) == (NONE, ctl.image.partition("t", 0), [])
    assert ctl.image.offset == offset


def test_deposed_leader_cannot_shrink_the_isr():
    # Leader 1 is cut off from the controller and its followers: the
    # controller fences it and elects 2. 1 still believes it leads and tries
    # to drop the followers that stopped fetching from it.
    clock = FakeClock()
    ctl, epochs = running(3, clock)
    ctl.create_topic("t", 1, 3)
    old = ctl.image.partition("t", 0)
    clock.advance_ms(9001)
    keep_alive(ctl, epochs, 2, 3)
    ctl.expire()
    assert ctl.image.partition("t", 0).leader == 2
    assert ctl.alter_partition(1, epochs[1], "t", 0, old.leader_epoch, old.partition_epoch,
                               (1,)) == (ErrorCode.fenced_leader_epoch, None, [])
    assert ctl.image.partition("t", 0).isr == (2, 3)


def test_stale_partition_epoch_is_rejected(cluster):
    ctl, epochs = cluster
    assert alter(ctl, epochs, (1, 2), partition_epoch=0)[0] is NONE
    assert alter(ctl, epochs, (1, 3), partition_epoch=0) == (
        ErrorCode.invalid_update_version, None, [])


@pytest.mark.parametrize("kwargs, new_isr, error", [
    ({"broker": 2}, (1, 2), ErrorCode.invalid_request),                   # not the leader
    ({}, (1, 4), ErrorCode.invalid_request),                              # 4 is not a replica
    ({}, (1, 2, 2), ErrorCode.invalid_request),                           # duplicate
    ({}, (2, 3), ErrorCode.invalid_request),                              # leader missing
    ({}, (), ErrorCode.invalid_request),
    ({"leader_epoch": 1}, (1, 2), ErrorCode.not_controller),              # ahead of us
    ({"partition_epoch": 5}, (1, 2), ErrorCode.not_controller),
    ({"leader_epoch": -1}, (1, 2), ErrorCode.fenced_leader_epoch),
    ({"broker": 9}, (1, 2), ErrorCode.stale_broker_epoch),                # never registered
    ({"topic": "nope"}, (1, 2), ErrorCode.unknown_topic_or_partition),
    ({"partition": 1}, (1, 2), ErrorCode.unknown_topic_or_partition),
])
def test_rejections_write_nothing(cluster, kwargs, new_isr, error):
    ctl, epochs = cluster
    before = (ctl.image.offset, ctl.image.partition("t", 0))
    assert alter(ctl, epochs, new_isr, **kwargs) == (error, None, [])
    assert (ctl.image.offset, ctl.image.partition("t", 0)) == before


def test_fenced_leader_epoch_is_checked_before_leadership(cluster):
    # Kafka's order: a lower leader epoch answers FENCED_LEADER_EPOCH even
    # from a broker that is not the leader.
    ctl, epochs = cluster
    assert alter(ctl, epochs, (2, 3), broker=2, leader_epoch=-1)[0] is \
        ErrorCode.fenced_leader_epoch


def test_stale_broker_epoch_of_the_requester(cluster):
    ctl, epochs = cluster
    assert alter(ctl, {1: epochs[1] + 1}, (1, 2)) == (ErrorCode.stale_broker_epoch, None, [])


def test_fenced_replica_cannot_join_the_isr(cluster):
    ctl, epochs = cluster
    assert alter(ctl, epochs, (1, 2))[0] is NONE
    ctl.heartbeat(3, epochs[3], want_fence=True, caught_up=True)
    assert alter(ctl, epochs, (1, 2, 3)) == (ErrorCode.ineligible_replica, None, [])
    ctl.heartbeat(3, epochs[3], want_fence=False, caught_up=True)
    assert alter(ctl, epochs, (1, 2, 3))[1].isr == (1, 2, 3)
