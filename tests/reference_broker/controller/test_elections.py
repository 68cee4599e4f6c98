"""Controller-side ISR shrink and leader election when brokers are fenced
and unfenced: assignment order, an ISR that never empties, and unclean
election only when enabled (PartitionChangeBuilder.electAnyLeader)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.controller import (
    NO_LEADER, Controller, FenceBroker, PartitionState, UnfenceBroker)
from tests.reference_broker.controller.cluster import FakeClock, keep_alive, running


def state(ctl: Controller) -> PartitionState:
    return ctl.image.partition("t", 0)


def fence(ctl: Controller, epochs: dict[int, int], broker: int) -> list:
    error, records, fenced = ctl.heartbeat(broker, epochs[broker], want_fence=True, caught_up=True)
    assert error is ErrorCode.none and fenced
    return records


def unfence(ctl: Controller, epochs: dict[int, int], broker: int) -> list:
    error, records, fenced = ctl.heartbeat(broker, epochs[broker], want_fence=False, caught_up=True)
    assert error is ErrorCode.none and not fenced
    return records


def shrink_to(ctl: Controller, epochs: dict[int, int], isr: tuple[int, ...]) -> None:
    s = state(ctl)
    error, _, _ = ctl.alter_partition(s.leader, epochs[s.leader], "t", 0, s.leader_epoch,
                                      s.partition_epoch, isr)
    assert error is ErrorCode.none


def test_fencing_a_follower_shrinks_the_isr_and_keeps_the_leader_epoch():
    ctl, epochs = running(3)
    ctl.create_topic("t", 1, 3)
    assert fence(ctl, epochs, 2) == [PartitionState("t", 0, (1, 2, 3), (1, 3), 1, 0, 1),
                                     FenceBroker(2)]


def test_new_leader_is_the_first_isr_member_in_assignment_order():
    ctl, epochs = running(3)
    ctl.create_topic("t", 1, 3)
    shrink_to(ctl, epochs, (1, 3, 2))       # ISR order differs from replica order
    assert fence(ctl, epochs, 1) == [PartitionState("t", 0, (1, 2, 3), (3, 2), 2, 1, 2),
                                     FenceBroker(1)]


def test_election_skips_replicas_outside_the_isr_and_fenced_ones():
    ctl, epochs = running(4)
    ctl.create_topic("t", 1, 4)
    shrink_to(ctl, epochs, (1, 3, 4))       # 2 is alive but out of the ISR
    fence(ctl, epochs, 3)
    fence(ctl, epochs, 1)
    assert (state(ctl).leader, state(ctl).isr) == (4, (4,))


def test_fencing_leaves_partitions_it_is_not_in_the_isr_of_alone():
    ctl, epochs = running(3)
    ctl.create_topic("t", 1, 3)
    shrink_to(ctl, epochs, (1, 2))
    assert fence(ctl, epochs, 3) == [FenceBroker(3)]


def test_isr_never_empties_and_the_partition_waits_for_its_last_member():
    ctl, epochs = running(2)
    ctl.create_topic("t", 1, 2)
    fence(ctl, epochs, 2)
    assert fence(ctl, epochs, 1) == [PartitionState("t", 0, (1, 2), (1,), NO_LEADER, 1, 2),
                                     FenceBroker(1)]
    # Without unclean election the out-of-sync replica coming back changes nothing...
    assert unfence(ctl, epochs, 2) == [UnfenceBroker(2)]
    assert state(ctl).leader == NO_LEADER
    # ...and the last ISR member coming back leads again, in a new epoch.
    assert unfence(ctl, epochs, 1) == [UnfenceBroker(1),
                                       PartitionState("t", 0, (1, 2), (1,), 1, 2, 3)]


def test_unclean_election_at_fencing_picks_a_live_replica_outside_the_isr():
    ctl, epochs = running(3, unclean_leader_election=True)
    ctl.create_topic("t", 1, 3)
    shrink_to(ctl, epochs, (1,))
    assert fence(ctl, epochs, 1) == [PartitionState("t", 0, (1, 2, 3), (2,), 2, 1, 2),
                                     FenceBroker(1)]


def test_unclean_election_at_unfencing_when_no_isr_member_returns():
    ctl, epochs = running(2, unclean_leader_election=True)
    ctl.create_topic("t", 1, 2)
    fence(ctl, epochs, 2)
    fence(ctl, epochs, 1)                    # nobody left: ISR (1,), no leader
    assert (state(ctl).leader, state(ctl).isr) == (NO_LEADER, (1,))
    assert unfence(ctl, epochs, 2) == [UnfenceBroker(2),
                                       PartitionState("t", 0, (1, 2), (2,), 2, 2, 3)]


def test_clean_election_is_preferred_even_when_unclean_is_enabled():
    ctl, epochs = running(3, unclean_leader_election=True)
    ctl.create_topic("t", 1, 3)
    shrink_to(ctl, epochs, (1, 3))
    fence(ctl, epochs, 1)
    assert (state(ctl).leader, state(ctl).isr) == (3, (3,))


def test_brokers_expiring_together_are_fenced_one_after_the_other():
    clock = FakeClock()
    ctl, epochs = running(3, clock)
    ctl.create_topic("t", 1, 3)
    clock.advance_ms(9001)
    keep_alive(ctl, epochs, 3)
    assert ctl.expire() == [
        PartitionState("t", 0, (1, 2, 3), (2, 3), 2, 1, 1), FenceBroker(1),
        PartitionState("t", 0, (1, 2, 3), (3,), 3, 2, 2), FenceBroker(2)]


def test_every_leader_the_broker_held_moves():
    ctl, epochs = running(3)
    ctl.create_topic("t", 3, 2)
    led_by_2 = [s.partition for s in ctl.image.partitions() if s.leader == 2]
    assert led_by_2
    fence(ctl, epochs, 2)
    assert all(s.leader != 2 and 2 not in s.isr for s in ctl.image.partitions())
    assert all(ctl.image.partition("t", p).leader_epoch == 1 for p in led_by_2)


def test_a_returning_replica_does_not_take_leadership_back():
    # No preferred-leader election here (auto.leader.rebalance.enable), and
    # the returning broker rejoins the ISR only when the leader expands it.
    ctl, epochs = running(2)
    ctl.create_topic("t", 1, 2)
    fence(ctl, epochs, 1)
    assert unfence(ctl, epochs, 1) == [UnfenceBroker(1)]
    assert (state(ctl).leader, state(ctl).isr) == (2, (2,))
