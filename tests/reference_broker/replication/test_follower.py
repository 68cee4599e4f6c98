"""FollowerState on a real PartitionLog: fetch position, appending the
leader's batches, learning the HW, errors, OFFSET_OUT_OF_RANGE, and the
pre-KIP-101 truncation to the local HW."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.log import LogConfig, PartitionLog
from reference_broker.replication import NO_EPOCH, TRUNCATE_TO_LOCAL_HW, FetchedPartition, FollowerState
from tests.reference_broker.record_batches import records_in, values_batch


def open_log(tmp_path, name: str) -> PartitionLog:
    return PartitionLog.open(tmp_path / name, LogConfig())


def write(log: PartitionLog, epoch: int, *counts: int) -> None:
    """One batch per count, values numbered by offset, in leader epoch `epoch`."""
    for count in counts:
        log.append_as_leader(values_batch(count, start=log.log_end_offset), epoch)


def fetched(records: bytes = b"", high_watermark: int = 0, error: ErrorCode = ErrorCode.none,
            diverging_epoch: tuple[int, int] | None = None) -> FetchedPartition:
    return FetchedPartition(error, high_watermark, 0, records, diverging_epoch)


def test_an_empty_follower_fetches_from_zero_without_an_epoch(tmp_path):
    follower = FollowerState(leader_id=1, leader_epoch=3, log=open_log(tmp_path, "f"), high_watermark=0)
    assert follower.fetch_position() == (0, NO_EPOCH)


def test_apply_appends_the_leaders_batches_as_they_are(tmp_path):
    leader_log = open_log(tmp_path, "l")
    write(leader_log, 0, 3, 2)
    write(leader_log, 4, 5)
    follower = FollowerState(leader_id=1, leader_epoch=4, log=open_log(tmp_path, "f"), high_watermark=0)
    follower.apply(fetched(leader_log.read(0, 1 << 20), high_watermark=5))
    assert follower.log.read(0, 1 << 20) == leader_log.read(0, 1 << 20)
    assert follower.fetch_position() == (10, 4)
    assert follower.log.end_offset_for_epoch(0) == (0, 5)
    assert follower.high_watermark == 5


def test_hw_is_the_leaders_clamped_to_the_own_leo_and_may_move_back(tmp_path):
    log = open_log(tmp_path, "f")
    write(log, 0, 4)
    follower = FollowerState(leader_id=1, leader_epoch=0, log=log, high_watermark=2)
    assert follower.high_watermark == 2
    follower.apply(fetched(high_watermark=50))
    assert follower.high_watermark == 4
    follower.apply(fetched(high_watermark=3))  # a new leader's lagging HW
    assert follower.high_watermark == 3


def test_a_new_follower_keeps_its_log_and_fetches_with_its_epoch(tmp_path):
    log = open_log(tmp_path, "f")
    write(log, 0, 2, 2, 2, 2, 2)
    follower = FollowerState(leader_id=2, leader_epoch=1, log=log, high_watermark=6)
    assert log.log_end_offset == 10
    assert follower.fetch_position() == (10, 0)


def test_bug_truncate_to_local_hw(tmp_path):
    # KAFKA-1211: the leader had acknowledged offsets 6..9, this follower's
    # HW (6) lags by a fetch; becoming a follower cuts them, and an epoch-less
    # fetch leaves the leader no way to see a divergence later.
    log = open_log(tmp_path, "f")
    write(log, 0, 2, 2, 2, 2, 2)
    follower = FollowerState(leader_id=2, leader_epoch=1, log=log, high_watermark=6,
                             bugs=frozenset({TRUNCATE_TO_LOCAL_HW}))
    assert log.log_end_offset == 6
    assert [offset for offset, _ in records_in(log.read(0, 1 << 20))] == list(range(6))
    assert follower.fetch_position() == (6, NO_EPOCH)


def test_an_error_changes_nothing(tmp_path):
    log = open_log(tmp_path, "f")
    write(log, 0, 4)
    follower = FollowerState(leader_id=1, leader_epoch=0, log=log, high_watermark=2)
    for error in (ErrorCode.fenced_leader_epoch, ErrorCode.not_leader_or_follower,
                  ErrorCode.offset_out_of_range):
        follower.apply(fetched(values_batch(1), high_watermark=4, error=error,
                               diverging_epoch=(0, 0)))
    assert (log.log_end_offset, follower.high_watermark) == (4, 2)


def test_out_of_range_cuts_to_a_leader_behind_us(tmp_path):
    log = open_log(tmp_path, "f")
    write(log, 0, 2, 2, 2)
    follower = FollowerState(leader_id=1, leader_epoch=0, log=log, high_watermark=6)
    follower.on_out_of_range(leader_log_end_offset=9)
    assert log.log_end_offset == 6
    follower.on_out_of_range(leader_log_end_offset=4)
    assert (log.log_end_offset, follower.high_watermark) == (4, 4)
