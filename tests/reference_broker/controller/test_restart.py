"""The metadata log as the source of truth: a controller restarted from its
persisted records, and a broker following the log, both rebuild the same
image, and the restarted controller carries on from where it stopped."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.controller import (
    Controller, FenceBroker, InconsistentMetadataRecord, MetadataImage, RegisterBroker,
    UnfenceBroker, decode, encode)
from tests.reference_broker.controller.cluster import FakeClock, keep_alive, running


def snapshot(image: MetadataImage):
    return image.offset, image.brokers, image.topics


def busy_cluster(clock: FakeClock) -> tuple[Controller, dict[int, int], list[bytes]]:
    """Registrations, topics, a shrink, an expiry with elections, a deletion
    — every record persisted as the caller would."""
    ctl, epochs = running(3, clock)
    ctl.create_topic("t", 3, 3)
    ctl.create_topic("gone", 1, 1)
    ctl.delete_topic("gone")
    s = ctl.image.partition("t", 0)
    ctl.alter_partition(s.leader, epochs[s.leader], "t", 0, s.leader_epoch, s.partition_epoch,
                        (s.leader, s.replicas[1]))
    clock.advance_ms(9001)
    keep_alive(ctl, epochs, 1, 3)
    assert ctl.expire() and ctl.image.brokers[2].fenced
    return ctl, epochs, [encode(r) for r in ctl.records_since(0)]


def test_replaying_the_persisted_records_gives_the_same_image():
    clock = FakeClock()
    ctl, _, persisted = busy_cluster(clock)
    restarted = Controller([decode(data) for data in persisted], clock=clock)
    assert snapshot(restarted.image) == snapshot(ctl.image)
    assert restarted.records_since(0) == ctl.records_since(0)


def test_a_restarted_controller_carries_on():
    clock = FakeClock()
    ctl, epochs, persisted = busy_cluster(clock)
    restarted = Controller([decode(data) for data in persisted], clock=clock)
    # Broker epochs survive: the fenced broker's old one is still valid...
    error, records, fenced = restarted.heartbeat(2, epochs[2], want_fence=False, caught_up=True)
    assert (error, records[0], fenced) == (ErrorCode.none, UnfenceBroker(2), False)
    # ...and new ones are still log offsets.
    records, epoch = restarted.register(4, "b4", 9092)
    assert records == [RegisterBroker(4, "b4", 9092, epoch)]
    assert epoch == restarted.image.offset - 1 > len(persisted)
    # Elections continue from the persisted epochs.
    before = restarted.image.partition("t", 1)
    restarted.heartbeat(before.leader, epochs[before.leader], want_fence=True, caught_up=True)
    after = restarted.image.partition("t", 1)
    assert after.leader != before.leader
    assert (after.leader_epoch, after.partition_epoch) == (
        before.leader_epoch + 1, before.partition_epoch + 1)


def test_a_broker_following_the_log_builds_the_controllers_image():
    clock = FakeClock()
    ctl, epochs = running(2, clock)
    follower = MetadataImage()
    for step in (lambda: ctl.create_topic("t", 2, 2),
                 lambda: ctl.heartbeat(2, epochs[2], want_fence=True, caught_up=True),
                 lambda: ctl.register(3, "b3", 9092),
                 lambda: None):
        step()
        for record in ctl.records_since(follower.offset):
            follower.apply(record)
        assert snapshot(follower) == snapshot(ctl.image)
    assert ctl.records_since(ctl.image.offset) == []


@pytest.mark.parametrize("offset", [-1, 10_000])
def test_records_since_an_offset_outside_the_log(offset):
    ctl, _ = running(1)
    with pytest.raises(ValueError, match="log end offset 2"):
        ctl.records_since(offset)


def test_an_inconsistent_log_does_not_replay():
    with pytest.raises(InconsistentMetadataRecord, match="offset 0"):
        Controller([FenceBroker(1)])
