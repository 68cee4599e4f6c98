"""A leader's DivergingEpoch answer and the follower's truncation, on two
real logs (KIP-101, KIP-279, KIP-320 truncate-on-fetch), and the KIP-101 v0
epoch lookup that let divergent tails survive (KAFKA-6361)."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.log import LogConfig, OffsetOutOfRange, PartitionLog
from reference_broker.replication import (
    EPOCH_LOOKUP_V0, FetchedPartition, FollowerState, LeaderState,
)
from tests.reference_broker.record_batches import kio_batch, records_in

NOW = 1_000_000


def open_log(tmp_path, name: str) -> PartitionLog:
    return PartitionLog.open(tmp_path / name, LogConfig())


def write(log: PartitionLog, epoch: int, values: bytes) -> None:
    """One batch holding one record per character of `values`."""
    log.append_as_leader(kio_batch([bytes([value]) for value in values]), epoch)


def contents(log: PartitionLog) -> bytes:
    return b"".join(value for _, value in records_in(log.read(0, 1 << 20)))


def leader_of(log: PartitionLog, epoch: int, bugs: frozenset[str] = frozenset()) -> LeaderState:
    return LeaderState(replica_id=1, replicas=(1, 2), isr=(1, 2), leader_epoch=epoch,
                       partition_epoch=epoch, log_end_offset=log.log_end_offset, high_watermark=0,
                       epoch_start_offset=log.log_end_offset, min_insync_replicas=1,
                       replica_lag_time_max_ms=30_000, now_ms=NOW, bugs=bugs)


def fetch_round(leader: LeaderState, leader_log: PartitionLog,
                follower: FollowerState) -> FetchedPartition:
    """One follower fetch as the broker serves it: divergence check first,
    else read to the LEO, with the HW as of the start of the read."""
    offset, epoch = follower.fetch_position()
    high_watermark = leader.high_watermark
    diverging = leader.diverging_epoch(epoch, offset, leader_log)
    if diverging is not None:
        answer = FetchedPartition(ErrorCode.none, high_watermark, 0, b"", diverging)
    else:
        answer = FetchedPartition(ErrorCode.none, high_watermark, 0, leader_log.read(offset, 1 << 20))
        leader.on_follower_fetch(2, offset, NOW)
    follower.apply(answer)
    return answer


def replicate(leader: LeaderState, leader_log: PartitionLog, follower: FollowerState) -> list:
    """Fetch until the follower is at the leader's LEO; the answers' diverging epochs."""
    divergences = []
    for _ in range(10):
        if follower.log.log_end_offset == leader_log.log_end_offset:
            return divergences
        divergences.append(fetch_round(leader, leader_log, follower).diverging_epoch)
    raise AssertionError("follower did not catch up in 10 fetches")


@pytest.fixture
def diverged(tmp_path):
    """The follower led epoch 1 briefly and wrote xy, zwv after abc; the
    leader never saw epoch 1 and wrote de in epoch 0, fghij in epoch 2."""
    leader_log, follower_log = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"abc")
    write(leader_log, 0, b"de")
    write(leader_log, 2, b"fghij")
    write(follower_log, 0, b"abc")
    write(follower_log, 1, b"xy")
    write(follower_log, 1, b"zwv")
    return leader_log, follower_log


def test_truncation_by_epoch_after_divergence(diverged):
    leader_log, follower_log = diverged
    follower = FollowerState(leader_id=1, leader_epoch=2, log=follower_log, high_watermark=8)
    divergences = replicate(leader_of(leader_log, 2), leader_log, follower)
    # Epoch 1 ends at 5 on the leader as epoch 0; epoch 0 ends at 3 here.
    assert divergences == [(0, 5), None]
    assert contents(follower_log) == contents(leader_log) == b"abcdefghij"


def test_bug_epoch_lookup_v0(diverged):
    leader_log, follower_log = diverged
    follower = FollowerState(leader_id=1, leader_epoch=2, log=follower_log, high_watermark=8)
    replicate(leader_of(leader_log, 2, frozenset({EPOCH_LOOKUP_V0})), leader_log, follower)
    # An offset-only answer (5) cuts after xy: same offsets, different records.
    assert contents(follower_log) == b"abcxyfghij"
    assert contents(leader_log) == b"abcdefghij"


def test_a_follower_that_never_saw_the_leaders_epoch_cuts_at_its_own_earlier_epoch(tmp_path):
    leader_log, follower_log = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"abc")
    write(leader_log, 1, b"def")
    write(leader_log, 3, b"gh")
    write(follower_log, 0, b"abc")
    write(follower_log, 2, b"pqrstu")
    follower = FollowerState(leader_id=1, leader_epoch=3, log=follower_log, high_watermark=3)
    divergences = replicate(leader_of(leader_log, 3), leader_log, follower)
    # The leader's epoch 1 (ending at 6) is unknown here: cutting at 6 would
    # keep pqr; KIP-279 cuts at the end of epoch 0 and asks again.
    assert divergences == [(1, 6), None]
    assert contents(follower_log) == b"abcdefgh"


def test_hw_reaches_the_follower_one_fetch_after_the_leader_moves_it(tmp_path):
    leader_log, follower_log = open_log(tmp_path, "leader"), open_log(tmp_path, "follower")
    write(leader_log, 0, b"abc")
    leader = leader_of(leader_log, 0)
    follower = FollowerState(leader_id=1, leader_epoch=0, log=follower_log, high_watermark=0)
    assert fetch_round(leader, leader_log, follower).high_watermark == 0
    assert (follower_log.log_end_offset, leader.high_watermark) == (3, 0)
    fetch_round(leader, leader_log, follower)  # at 3: the leader's HW moves to 3
    assert (leader.high_watermark, follower.high_watermark) == (3, 0)
    fetch_round(leader, leader_log, follower)
    assert follower.high_watermark == 3


def test_truncation_pulls_the_follower_hw_down(diverged):
    leader_log, follower_log = diverged
    follower = FollowerState(leader_id=1, leader_epoch=2, log=follower_log, high_watermark=8)
    fetch_round(leader_of(leader_log, 2), leader_log, follower)
    assert (follower_log.log_end_offset, follower.high_watermark) == (3, 3)


def test_no_divergence_check_without_a_last_fetched_epoch_and_out_of_range_when_unknown(diverged):
    leader_log, _ = diverged
    leader = leader_of(leader_log, 2)
    assert leader.diverging_epoch(-1, 8, leader_log) is None
    assert leader.diverging_epoch(2, 10, leader_log) is None
    with pytest.raises(OffsetOutOfRange):
        leader.diverging_epoch(7, 10, leader_log)  # an epoch after all of ours
