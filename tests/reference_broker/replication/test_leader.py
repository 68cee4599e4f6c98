"""LeaderState: the high watermark, ISR shrink and expand, acks=all, and the
bug switches that break each rule."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.replication import (
    ACKS_ALL_IGNORES_MIN_ISR, HW_ADVANCES_UNDER_MIN_ISR, ISR_EXPAND_BELOW_EPOCH_START,
    STALE_HW_AFTER_FAILOVER, AlterIsr, LeaderState,
)

NOW = 1_000_000
LAG = 30_000


def leader(**overrides) -> LeaderState:
    """Broker 1 leads replicas 1, 2, 3 in epoch 5 at LEO = HW = epoch start 100."""
    config = dict(replica_id=1, replicas=(1, 2, 3), isr=(1, 2, 3), leader_epoch=5,
                  partition_epoch=10, log_end_offset=100, high_watermark=100,
                  epoch_start_offset=100, min_insync_replicas=2,
                  replica_lag_time_max_ms=LAG, now_ms=NOW)
    config.update(overrides)
    return LeaderState(**config)


def fetched_by_all(state: LeaderState, offset: int, now_ms: int = NOW) -> None:
    for follower_id in state.isr:
        if follower_id != state.replica_id:
            assert state.on_follower_fetch(follower_id, offset, now_ms) is None


def test_hw_is_the_lowest_isr_leo_and_never_moves_back():
    state = leader()
    fetched_by_all(state, 100)
    state.on_append(120, NOW)
    assert state.high_watermark == 100
    state.on_follower_fetch(2, 120, NOW)
    assert state.high_watermark == 100  # follower 3 lags
    state.on_follower_fetch(3, 110, NOW)
    assert state.high_watermark == 110
    # Follower 3 truncated and fetches lower: the HW stays.
    state.on_follower_fetch(3, 105, NOW)
    assert state.high_watermark == 110
    state.on_follower_fetch(3, 120, NOW)
    assert state.high_watermark == 120


def test_new_leader_stalls_until_every_isr_follower_has_fetched_in_its_epoch():
    # Elected with the HW it learnt as a follower (40), LEO 100.
    state = leader(high_watermark=40)
    assert state.high_watermark == 40
    state.on_follower_fetch(2, 100, NOW)
    assert state.high_watermark == 40  # follower 3 has not fetched from us yet
    state.on_follower_fetch(3, 100, NOW)
    assert state.high_watermark == 100


def test_a_single_replica_leader_commits_on_append():
    state = leader(replicas=(1,), isr=(1,), min_insync_replicas=1, high_watermark=0)
    assert state.high_watermark == 100
    state.on_append(103, NOW)
    assert state.high_watermark == 103


def test_no_hw_advance_while_the_isr_is_below_min_isr():
    state = leader(isr=(1,))
    state.on_append(110, NOW)
    assert state.high_watermark == 100  # KAFKA-15583


def test_bug_hw_advances_under_min_isr():
    state = leader(isr=(1,), bugs=frozenset({HW_ADVANCES_UNDER_MIN_ISR}))
    state.on_append(110, NOW)
    assert state.high_watermark == 110


def test_min_isr_is_capped_by_the_replication_factor():
    state = leader(replicas=(1,), isr=(1,), min_insync_replicas=2)
    state.on_append(110, NOW)
    assert state.high_watermark == 110
    assert state.acks_all_check() is ErrorCode.none


def test_a_changed_min_isr_governs_acks_all_and_the_hw_at_once():
    # A topic's min.insync.replicas altered while this broker leads it.
    state = leader(isr=(1,))
    state.on_append(110, NOW)
    assert (state.high_watermark, state.acks_all_check()) == (100, ErrorCode.not_enough_replicas)
    state.set_min_insync_replicas(1, NOW)
    assert (state.high_watermark, state.acks_all_check()) == (110, ErrorCode.none)
    state.set_min_insync_replicas(3, NOW)
    assert state.acks_all_check() is ErrorCode.not_enough_replicas
    with pytest.raises(ValueError, match="must be >= 1"):
        state.set_min_insync_replicas(0, NOW)


def test_caught_up_time_is_the_previous_fetch_when_the_follower_reaches_the_leo_of_then():
    state = leader(isr=(1, 2), replicas=(1, 2))
    state.on_follower_fetch(2, 100, NOW)          # caught up at NOW
    state.on_append(110, NOW + 1_000)
    state.on_follower_fetch(2, 105, NOW + 10_000)  # behind the LEO (110)
    state.on_append(120, NOW + 11_000)
    # Reaches 110, the leader's LEO at its previous fetch: caught up as of that fetch.
    state.on_follower_fetch(2, 110, NOW + 20_000)
    assert state.maybe_shrink(NOW + 10_000 + LAG) is None
    assert state.maybe_shrink(NOW + 10_000 + LAG + 1) == AlterIsr(5, 10, (1,))


def test_a_follower_behind_the_leo_of_its_previous_fetch_is_not_caught_up():
    state = leader(isr=(1, 2), replicas=(1, 2))
    state.on_follower_fetch(2, 100, NOW)
    state.on_append(110, NOW + 1_000)
    state.on_follower_fetch(2, 105, NOW + 10_000)
    state.on_follower_fetch(2, 108, NOW + 20_000)  # below 110: no later caught-up time
    assert state.maybe_shrink(NOW + LAG) is None
    assert state.maybe_shrink(NOW + LAG + 1) == AlterIsr(5, 10, (1,))


def test_shrink_after_lag_time_then_the_hw_moves_once_committed():
    state = leader()
    fetched_by_all(state, 100)
    state.on_append(150, NOW)
    state.on_follower_fetch(2, 150, NOW + LAG)  # follower 3 stopped at 100
    assert state.high_watermark == 100
    assert state.maybe_shrink(NOW + LAG) is None
    shrink = state.maybe_shrink(NOW + LAG + 1)
    assert shrink == AlterIsr(leader_epoch=5, partition_epoch=10, new_isr=(1, 2))
    assert state.maybe_shrink(NOW + LAG + 2) is None  # one change in flight
    # A pending shrink does not count (KIP-497): 3 still holds the HW back.
    assert state.maximal_isr == (1, 2, 3)
    state.on_follower_fetch(2, 150, NOW + LAG + 2)
    assert state.high_watermark == 100
    state.on_isr_committed((1, 2), 11, NOW + LAG + 3)
    assert (state.isr, state.partition_epoch, state.pending) == ((1, 2), 11, None)
    assert state.high_watermark == 150


def test_a_follower_at_the_leaders_leo_is_never_shrunk():
    state = leader()
    fetched_by_all(state, 100)
    assert state.maybe_shrink(NOW + 10 * LAG) is None


def test_rejected_shrink_rolls_back_only_on_ineligible_replica():
    state = leader()
    fetched_by_all(state, 100)
    state.on_append(150, NOW)
    assert state.maybe_shrink(NOW + LAG + 1) is not None
    state.on_isr_rejected(ErrorCode.invalid_update_version)
    assert state.pending is not None  # waits for newer metadata
    state.on_isr_committed((1, 2, 3), 9, NOW + LAG + 1)  # stale: ignored
    assert state.pending is not None
    state.on_isr_rejected(ErrorCode.ineligible_replica)
    assert state.pending is None
    assert state.isr == (1, 2, 3)


def test_isr_expand_needs_the_hw_and_the_epoch_start():
    # A new leader whose HW (40) lags its epoch start (100); 3 is out of the ISR.
    state = leader(isr=(1, 2), high_watermark=40)
    assert state.on_follower_fetch(3, 50, NOW) is None  # >= HW but < epoch start
    expansion = state.on_follower_fetch(3, 100, NOW)
    assert expansion == AlterIsr(leader_epoch=5, partition_epoch=10, new_isr=(1, 2, 3))
    # A pending expansion holds the HW back at once (maximal ISR).
    assert state.maximal_isr == (1, 2, 3)
    state.on_append(120, NOW)
    state.on_follower_fetch(2, 120, NOW)
    assert state.high_watermark == 100


def test_bug_isr_expand_below_epoch_start():
    state = leader(isr=(1, 2), high_watermark=40, bugs=frozenset({ISR_EXPAND_BELOW_EPOCH_START}))
    assert state.on_follower_fetch(3, 50, NOW) == AlterIsr(5, 10, (1, 2, 3))  # KAFKA-7128


def test_isr_expand_refused_below_the_hw():
    state = leader(isr=(1, 2))
    state.on_follower_fetch(2, 100, NOW)
    assert state.on_follower_fetch(3, 90, NOW) is None
    assert state.pending is None


def test_acks_all_rejected_before_append_below_min_isr():
    assert leader(isr=(1,)).acks_all_check() is ErrorCode.not_enough_replicas
    assert leader(isr=(1, 2)).acks_all_check() is ErrorCode.none


def test_acks_all_answers_when_the_hw_passes_the_batch():
    async def scenario():
        state = leader()
        fetched_by_all(state, 100)
        state.on_append(105, NOW)
        waiter = state.wait_for(104)
        state.on_follower_fetch(2, 105, NOW)
        assert not waiter.done()
        state.on_follower_fetch(3, 104, NOW)  # HW 104 does not pass offset 104
        assert not waiter.done()
        state.on_follower_fetch(3, 105, NOW)
        assert await waiter is ErrorCode.none
        assert await state.wait_for(103) is ErrorCode.none  # already committed
    asyncio.run(scenario())


def test_acks_all_waits_out_an_isr_shrink_below_min_isr():
    async def scenario():
        state = leader(isr=(1, 2), replicas=(1, 2))
        state.on_follower_fetch(2, 100, NOW)
        state.on_append(105, NOW)
        waiter = state.wait_for(104)
        assert state.maybe_shrink(NOW + LAG + 1) == AlterIsr(5, 10, (1,))
        state.on_isr_committed((1,), 11, NOW + LAG + 1)
        # Under min ISR the HW stays: the request times out in the caller.
        assert state.high_watermark == 100
        assert not waiter.done()
    asyncio.run(scenario())


def test_acks_all_after_append_error_when_the_hw_passes_under_min_isr():
    # Pre-3.7 HW rule: the HW passes with the leader alone, and the waiter
    # learns that the ISR shrank below the minimum meanwhile.
    async def scenario():
        state = leader(isr=(1, 2), replicas=(1, 2), bugs=frozenset({HW_ADVANCES_UNDER_MIN_ISR}))
        state.on_follower_fetch(2, 100, NOW)
        state.on_append(105, NOW)
        waiter = state.wait_for(104)
        state.maybe_shrink(NOW + LAG + 1)
        state.on_isr_committed((1,), 11, NOW + LAG + 1)
        assert state.high_watermark == 105
        assert await waiter is ErrorCode.not_enough_replicas_after_append
        assert state.acks_all_check() is ErrorCode.not_enough_replicas
    asyncio.run(scenario())


def test_bug_acks_all_ignores_min_isr():
    async def scenario():
        state = leader(isr=(1,), bugs=frozenset({ACKS_ALL_IGNORES_MIN_ISR}))
        assert state.acks_all_check() is ErrorCode.none
        state.on_append(105, NOW)
        assert state.high_watermark == 105
        assert await state.wait_for(104) is ErrorCode.none
    asyncio.run(scenario())


def test_step_down_answers_waiters_not_leader_and_cancelled_waiters_are_skipped():
    async def scenario():
        state = leader()
        fetched_by_all(state, 100)
        state.on_append(110, NOW)
        cancelled, waiting = state.wait_for(101), state.wait_for(109)
        cancelled.cancel()
        fetched_by_all(state, 105)  # passes the cancelled waiter's offset
        assert state.high_watermark == 105 and not waiting.done()
        state.step_down()
        assert await waiting is ErrorCode.not_leader_or_follower
    asyncio.run(scenario())


def test_high_watermark_lags_after_failover_until_it_reaches_the_epoch_start():
    state = leader(high_watermark=40)
    assert state.high_watermark_lagging  # ListOffsets: OFFSET_NOT_AVAILABLE (KIP-207)
    fetched_by_all(state, 100)
    assert not state.high_watermark_lagging


def test_bug_stale_hw_after_failover():
    state = leader(high_watermark=40, bugs=frozenset({STALE_HW_AFTER_FAILOVER}))
    assert state.high_watermark == 40
    assert not state.high_watermark_lagging  # serves 40, below the old leader's HW


def test_fetches_from_strangers_or_past_the_leo_are_refused():
    state = leader()
    with pytest.raises(ValueError, match="follower_id=4"):
        state.on_follower_fetch(4, 100, NOW)
    with pytest.raises(ValueError, match="fetch_offset=101"):
        state.on_follower_fetch(2, 101, NOW)
    with pytest.raises(ValueError, match="isr="):
        leader(isr=(2, 3))
