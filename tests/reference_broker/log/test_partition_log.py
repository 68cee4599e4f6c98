"""PartitionLog appends and reads: offset assignment, segment rolls, the
sparse index, read limits, timestamps, follower appends."""

from __future__ import annotations

import struct

import pytest

from reference_broker.log import (
    CorruptRecordError, LogConfig, OffsetOutOfRange, PartitionLog, UnexpectedAppendOffset,
    parse_batches,
)
from tests.reference_broker.record_batches import (
    BASE_TIME_MS, kafka_python_batch, kio_batch, records_in, values_batch,
)


def open_log(tmp_path, name="topic-0", **config) -> PartitionLog:
    return PartitionLog.open(tmp_path / name, LogConfig(**config))


def fill(log: PartitionLog, batches: int, records: int = 3, size: int = 10, epoch: int = 0) -> None:
    """Append `batches` batches of `records` values, numbered by offset."""
    for _ in range(batches):
        log.append_as_leader(values_batch(records, size, start=log.log_end_offset), epoch)


def read_all(log: PartitionLog, start: int = 0) -> list[tuple[int, bytes | None]]:
    found, offset = [], start
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20)
        found += records_in(data)
        offset = parse_batches(data)[-1].last_offset + 1
    return found


def test_leader_assigns_consecutive_offsets_across_appends_and_batches(tmp_path):
    log = open_log(tmp_path)
    first = log.append_as_leader(kio_batch([b"a", b"b", b"c"]), leader_epoch=4)
    assert (first.first_offset, first.last_offset) == (0, 2)
    second = log.append_as_leader(kio_batch([b"d", b"e"]) + kio_batch([b"f"] * 4), leader_epoch=4)
    assert (second.first_offset, second.last_offset) == (3, 8)
    assert [(h.base_offset, h.last_offset) for h in second.batches] == [(3, 4), (5, 8)]
    assert {h.partition_leader_epoch for h in first.batches + second.batches} == {4}
    assert log.log_end_offset == 9 and log.log_start_offset == 0
    assert read_all(log) == list(enumerate([b"a", b"b", b"c", b"d", b"e", b"f", b"f", b"f", b"f"]))
    stored = parse_batches(log.read(0, 1 << 20))  # CRCs verified: only offsets and epochs changed
    assert [h.base_offset for h in stored] == [0, 3, 5] and {h.partition_leader_epoch for h in stored} == {4}


def test_pre_parsed_headers_give_the_same_append(tmp_path):
    raw = values_batch(5)
    one, two = open_log(tmp_path, "a"), open_log(tmp_path, "b")
    assert one.append_as_leader(raw, 1) == two.append_as_leader(raw, 1, headers=parse_batches(raw))
    assert one.read(0, 1000) == two.read(0, 1000)


def test_real_client_batches_append_and_read_back(tmp_path):
    log = open_log(tmp_path)
    log.append_as_leader(kafka_python_batch([b"x" * 100] * 4, compression=1), 0)
    log.append_as_leader(kafka_python_batch([b"y", b"z"]), 0)
    data = log.read(0, 1 << 20)
    assert [(h.base_offset, h.compression) for h in parse_batches(data)] == [(0, 1), (4, 0)]
    assert records_in(data[parse_batches(data)[0].size:]) == [(4, b"y"), (5, b"z")]


def test_empty_append_changes_nothing(tmp_path):
    log = open_log(tmp_path)
    info = log.append_as_leader(b"", 0)
    assert (info.first_offset, info.last_offset, info.batches) == (-1, -1, [])
    assert log.log_end_offset == 0


def test_crc_failure_on_append_is_rejected_and_nothing_is_appended(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2)
    before = log.read(0, 1 << 20)
    bad = bytearray(values_batch(3) + values_batch(3))
    bad[-1] ^= 0x01  # the second batch fails its CRC: the first is not appended either
    with pytest.raises(CorruptRecordError, match="CRC-32C mismatch"):
        log.append_as_leader(bytes(bad), 0)
    assert log.log_end_offset == 6
    assert log.read(0, 1 << 20) == before
    assert (tmp_path / "topic-0" / f"{0:020d}.log").stat().st_size == len(before)


def test_segments_roll_at_segment_bytes(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    batch_size = len(values_batch(3))
    fill(log, 20)
    files = sorted((tmp_path / "topic-0").glob("*.log"))
    per_segment = 500 // batch_size
    assert len(files) == -(-20 // per_segment)
    assert [f.name for f in files] == [f"{3 * per_segment * i:020d}.log" for i in range(len(files))]
    assert all(f.stat().st_size <= 500 for f in files)
    assert read_all(log) == [(o, b"%010d" % o) for o in range(60)]


def test_a_batch_larger_than_a_segment_gets_its_own(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    fill(log, 1)
    log.append_as_leader(values_batch(10, size=100, start=3), 0)
    fill(log, 1)
    sizes = [f.stat().st_size for f in sorted((tmp_path / "topic-0").glob("*.log"))]
    assert len(sizes) == 3 and sizes[1] > 300
    assert read_all(log) == [(o, b"%0*d" % (100 if 3 <= o < 13 else 10, o)) for o in range(16)]


def index_entries(path) -> list[tuple[int, int]]:
    return list(struct.iter_unpack(">ii", path.read_bytes()))


def test_sparse_index_maps_a_batch_last_offset_to_its_position(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=200)
    fill(log, 40)
    batch_size = len(values_batch(3))
    entries = index_entries(tmp_path / "topic-0" / f"{0:020d}.index")
    assert len(entries) > 5
    previous = 0
    for relative_offset, position in entries:
        assert position - previous > 200  # one entry per index.interval.bytes, not more
        assert position % batch_size == 0
        assert relative_offset == 3 * (position // batch_size) + 2  # the batch's last offset
        previous = position


def test_read_from_any_offset_returns_the_batch_holding_it(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=100, segment_bytes=2000)
    fill(log, 60)
    for offset in range(log.log_end_offset):
        first = parse_batches(log.read(offset, 1))[0]
        assert first.base_offset <= offset <= first.last_offset
        assert first.base_offset == offset - offset % 3


def test_read_limits(tmp_path):
    log = open_log(tmp_path)
    fill(log, 5)
    size = len(values_batch(3))
    assert len(log.read(0, 0)) == size  # KIP-74: the first batch comes whole
    assert len(log.read(4, size // 2)) == size
    assert len(log.read(0, 2 * size)) == 2 * size
    assert len(log.read(0, 3 * size - 1)) == 2 * size  # never a partial batch
    assert len(log.read(0, 10_000)) == 5 * size
    assert [h.base_offset for h in parse_batches(log.read(0, 10_000, upper_bound=9))] == [0, 3, 6]
    assert [h.base_offset for h in parse_batches(log.read(7, 10_000, upper_bound=10))] == [6, 9]
    assert log.read(9, 10_000, upper_bound=9) == b""
    assert log.read(15, 10_000) == b""  # at the log end offset


def test_reads_outside_the_log_are_out_of_range(tmp_path):
    log = open_log(tmp_path)
    fill(log, 1)
    with pytest.raises(OffsetOutOfRange) as raised:
        log.read(4, 100)
    assert (raised.value.offset, raised.value.log_start_offset, raised.value.log_end_offset) == (4, 0, 3)
    with pytest.raises(OffsetOutOfRange):
        log.read(-1, 100)
    with pytest.raises(ValueError, match="max_bytes=-1"):
        log.read(0, -1)


def test_a_read_comes_from_one_segment(tmp_path):
    log = open_log(tmp_path, segment_bytes=250)
    fill(log, 6)
    per_segment = 250 // len(values_batch(3))
    data = log.read(0, 1 << 20)
    assert parse_batches(data)[-1].last_offset == 3 * per_segment - 1
    assert parse_batches(log.read(3 * per_segment, 1 << 20))[0].base_offset == 3 * per_segment


def test_offset_for_timestamp_finds_the_first_record_in_offset_order(tmp_path):
    log = open_log(tmp_path, segment_bytes=200)
    t = BASE_TIME_MS
    log.append_as_leader(kio_batch([b"a", b"b"], timestamps=[t + 10, t + 20]), 0)
    log.append_as_leader(kio_batch([b"c", b"d", b"e"], timestamps=[t + 50, t + 30, t + 60]), 0)
    log.append_as_leader(kio_batch([b"f"], timestamps=[t + 40]), 0)  # older than offset 4
    assert len(list((tmp_path / "topic-0").glob("*.log"))) > 1
    assert log.offset_for_timestamp(t) == (0, t + 10)
    assert log.offset_for_timestamp(t + 15) == (1, t + 20)
    assert log.offset_for_timestamp(t + 25) == (2, t + 50)  # first record >= in offset order
    assert log.offset_for_timestamp(t + 55) == (4, t + 60)
    assert log.offset_for_timestamp(t + 61) is None


def test_follower_append_keeps_offsets_and_epochs(tmp_path):
    leader = open_log(tmp_path, "leader")
    fill(leader, 2, epoch=1)
    fill(leader, 2, epoch=3)
    follower = open_log(tmp_path, "follower")
    info = follower.append_as_follower(leader.read(0, 1 << 20))
    assert (info.first_offset, info.last_offset) == (0, 11)
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    assert follower.end_offset_for_epoch(1) == (1, 6) and follower.latest_epoch() == 3


def test_follower_append_below_its_end_is_refused(tmp_path):
    leader = open_log(tmp_path, "leader")
    fill(leader, 3)
    follower = open_log(tmp_path, "follower")
    follower.append_as_follower(leader.read(0, 1))
    with pytest.raises(UnexpectedAppendOffset, match="does not follow offset 2"):
        follower.append_as_follower(leader.read(0, 1 << 20))
    assert follower.log_end_offset == 3
    follower.append_as_follower(leader.read(3, 1 << 20))
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)


def test_batches_and_headers_from_an_offset_across_segments(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    fill(log, 10)
    batches = list(log.batches(7))
    assert [h.base_offset for h, _ in batches] == list(range(6, 30, 3))
    assert [h for h in log.headers(7)] == [h for h, _ in batches]
    assert b"".join(raw for _, raw in log.batches()) == b"".join(
        log.read(o, 1) for o in range(0, 30, 3))
    assert list(log.batches(30)) == [] and list(log.headers(30)) == []
