"""PartitionLog durability: reopen, crash recovery of a torn tail, index
rebuilds, truncation, leader epochs across restarts, the flush policy."""

from __future__ import annotations

import os

import pytest

from reference_broker.log import LogConfig, PartitionLog, parse_batches
from tests.reference_broker.log.test_partition_log import fill, open_log, read_all
from tests.reference_broker.record_batches import BASE_TIME_MS, kio_batch, records_in, values_batch


def segment_file(tmp_path, base: int, suffix: str = "log"):
    return tmp_path / "topic-0" / f"{base:020d}.{suffix}"


def test_reopen_after_close_preserves_everything(tmp_path):
    log = open_log(tmp_path, segment_bytes=400, index_interval_bytes=100)
    fill(log, 6, epoch=0)
    fill(log, 6, epoch=2)
    log.close()
    before = {p.name: p.read_bytes() for p in (tmp_path / "topic-0").iterdir()}
    reopened = open_log(tmp_path, segment_bytes=400, index_interval_bytes=100)
    assert reopened.log_end_offset == 36 and reopened.log_start_offset == 0
    assert read_all(reopened) == [(o, b"%010d" % o) for o in range(36)]
    assert (reopened.latest_epoch(), reopened.end_offset_for_epoch(0)) == (2, (0, 18))
    assert {p.name: p.read_bytes() for p in (tmp_path / "topic-0").iterdir()} == before
    assert reopened.append_as_leader(values_batch(1), 2).first_offset == 36


def test_an_unclosed_log_reopens_with_everything_written(tmp_path):
    log = open_log(tmp_path)
    fill(log, 4)  # no close, no flush: what kill -9 leaves in the page cache
    assert read_all(open_log(tmp_path)) == read_all(log)


@pytest.mark.parametrize("tail", [
    pytest.param(lambda batch: batch[:len(batch) // 2], id="half-a-batch"),
    pytest.param(lambda batch: batch[:30], id="half-a-header"),
    pytest.param(lambda batch: os.urandom(200), id="garbage"),
    pytest.param(lambda batch: batch[:-1] + bytes([batch[-1] ^ 1]), id="crc-failure"),
])
def test_recovery_truncates_a_torn_tail(tmp_path, tail):
    log = open_log(tmp_path, segment_bytes=500)
    fill(log, 8)
    active = sorted((tmp_path / "topic-0").glob("*.log"))[-1]
    good_size = active.stat().st_size
    torn = tail(values_batch(3, start=24))
    with open(active, "ab") as f:
        f.write(torn)
    recovered = open_log(tmp_path, segment_bytes=500)
    assert recovered.log_end_offset == 24
    assert active.stat().st_size == good_size
    assert read_all(recovered) == [(o, b"%010d" % o) for o in range(24)]
    assert recovered.append_as_leader(values_batch(2), 0).first_offset == 24
    assert read_all(recovered, 24) == [(24, b"0000000000"), (25, b"0000000001")]


def test_batches_larger_than_a_read_chunk_recover_and_read(tmp_path):
    log = open_log(tmp_path, index_interval_bytes=1000)
    fill(log, 1)
    log.append_as_leader(values_batch(3, size=700_000, start=3), 0)  # > the 1 MiB scan chunk
    fill(log, 2)
    big = log.read(3, 0)
    assert records_in(big) == [(o, b"%0700000d" % o) for o in range(3, 6)]
    recovered = open_log(tmp_path, index_interval_bytes=1000)
    assert recovered.log_end_offset == 12
    assert recovered.read(4, 0) == big
    assert parse_batches(recovered.read(6, 1 << 20))[0].base_offset == 6


def test_recovery_cuts_at_a_corrupt_batch_in_the_middle(tmp_path):
    log = open_log(tmp_path)
    fill(log, 5)
    batch_size = len(values_batch(3))
    path = segment_file(tmp_path, 0)
    data = bytearray(path.read_bytes())
    data[2 * batch_size + 40] ^= 0xFF  # inside the third batch's CRC-covered bytes
    path.write_bytes(bytes(data))
    recovered = open_log(tmp_path)
    assert recovered.log_end_offset == 6
    assert path.stat().st_size == 2 * batch_size


def test_recovery_drops_epochs_of_the_torn_tail(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2, epoch=1)
    fill(log, 1, epoch=5)
    assert log.latest_epoch() == 5
    path = segment_file(tmp_path, 0)
    os.truncate(path, path.stat().st_size - 5)  # tear the epoch-5 batch
    recovered = open_log(tmp_path)
    assert recovered.log_end_offset == 6
    assert recovered.latest_epoch() == 1
    assert (tmp_path / "topic-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n1 0\n"


def test_recovery_rebuilds_missing_epochs_from_the_active_segment(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2, epoch=1)
    fill(log, 2, epoch=4)
    (tmp_path / "topic-0" / "leader-epoch-checkpoint").unlink()
    recovered = open_log(tmp_path)
    assert recovered.end_offset_for_epoch(1) == (1, 6)
    assert recovered.end_offset_for_epoch(4) == (4, 12)


def test_indexes_are_rebuilt_when_missing_or_corrupt(tmp_path):
    config = dict(segment_bytes=1200, index_interval_bytes=150)
    log = open_log(tmp_path, **config)
    fill(log, 30)
    log.close()
    old, active = segment_file(tmp_path, 0, "index"), sorted((tmp_path / "topic-0").glob("*.index"))[-1]
    expected = {old: old.read_bytes(), active: active.read_bytes()}
    assert all(expected.values())
    old.write_bytes(old.read_bytes()[:-3])  # not whole entries
    active.unlink()
    reopened = open_log(tmp_path, **config)
    assert read_all(reopened) == [(o, b"%010d" % o) for o in range(90)]
    assert {path: path.read_bytes() for path in expected} == expected


def test_truncate_to_across_segments(tmp_path):
    log = open_log(tmp_path, segment_bytes=500)
    fill(log, 4, epoch=1)
    fill(log, 8, epoch=2)
    fill(log, 4, epoch=3)
    assert len(list((tmp_path / "topic-0").glob("*.log"))) > 3
    log.truncate_to(15)
    assert log.log_end_offset == 15
    assert [p.name for p in sorted((tmp_path / "topic-0").glob("*.log"))] == [
        f"{0:020d}.log", f"{12:020d}.log"]
    assert not segment_file(tmp_path, 24, "index").exists()
    assert (log.latest_epoch(), log.end_offset_for_epoch(2)) == (2, (2, 15))
    assert log.end_offset_for_epoch(3) == (-1, -1)
    assert read_all(log) == [(o, b"%010d" % o) for o in range(15)]
    assert log.append_as_leader(values_batch(3, start=15), 4).first_offset == 15
    reopened_epochs = PartitionLog.open(tmp_path / "topic-0", LogConfig(segment_bytes=500))
    assert reopened_epochs.end_offset_for_epoch(2) == (2, 15)
    assert reopened_epochs.end_offset_for_epoch(4) == (4, 18)


def test_truncate_to_drops_the_whole_batch_holding_the_offset(tmp_path):
    log = open_log(tmp_path)
    fill(log, 4)
    log.truncate_to(7)  # inside the batch 6..8
    assert log.log_end_offset == 6
    assert parse_batches(log.read(0, 1 << 20))[-1].last_offset == 5


def test_truncate_to_at_or_past_the_end_is_a_no_op_and_to_zero_empties(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    fill(log, 6)
    log.truncate_to(18)
    assert log.log_end_offset == 18
    log.truncate_to(0)
    assert (log.log_end_offset, log.latest_epoch()) == (0, None)
    assert [p.stat().st_size for p in (tmp_path / "topic-0").glob("*.log")] == [0]
    assert log.read(0, 100) == b""
    assert log.append_as_leader(values_batch(2), 1).first_offset == 0


def test_timestamp_search_follows_truncation_and_reopen(tmp_path):
    log = open_log(tmp_path, segment_bytes=300)
    for i in range(8):
        log.append_as_leader(kio_batch([b"v"] * 3, timestamps=[BASE_TIME_MS + 10 * i] * 3), 0)
    assert log.offset_for_timestamp(BASE_TIME_MS + 65) == (21, BASE_TIME_MS + 70)
    log.truncate_to(12)
    assert log.offset_for_timestamp(BASE_TIME_MS + 35) is None
    log.append_as_leader(kio_batch([b"w"], timestamps=[BASE_TIME_MS + 100]), 0)
    assert log.offset_for_timestamp(BASE_TIME_MS + 35) == (12, BASE_TIME_MS + 100)
    log.close()
    reopened = open_log(tmp_path, segment_bytes=300)
    assert reopened.offset_for_timestamp(BASE_TIME_MS + 15) == (6, BASE_TIME_MS + 20)
    assert reopened.offset_for_timestamp(BASE_TIME_MS + 35) == (12, BASE_TIME_MS + 100)


def test_leader_epoch_cache_follows_appends_and_elections(tmp_path):
    log = open_log(tmp_path)
    fill(log, 2, epoch=0)
    fill(log, 1, epoch=3)
    assert log.end_offset_for_epoch(0) == (0, 6)
    assert log.end_offset_for_epoch(2) == (0, 6)  # largest epoch <= 2 is 0, it ended at 6
    assert log.end_offset_for_epoch(3) == (3, 9)  # the latest epoch: the LEO
    assert log.end_offset_for_epoch(7) == (-1, -1)
    assert log.epoch_for_offset(5) == 0 and log.epoch_for_offset(6) == 3
    log.assign_epoch_start_offset(5, log.log_end_offset)  # elected: KAFKA-7415
    assert log.end_offset_for_epoch(3) == (3, 9) and log.end_offset_for_epoch(5) == (5, 9)
    fill(log, 1, epoch=5)
    assert log.end_offset_for_epoch(5) == (5, 12)
    assert log.end_offset_for_epoch(4) == (3, 9)


@pytest.fixture
def fsyncs(monkeypatch):
    """Names of the segment files fsynced (the epoch checkpoint is synced
    whenever it changes, like Kafka's, and is not counted)."""
    calls = []
    real = os.fsync

    def fsync(fd):
        name = os.readlink(f"/proc/self/fd/{fd}")
        if name.endswith(".log"):
            calls.append(os.path.basename(name))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return calls


def test_no_fsync_on_the_write_path_by_default(tmp_path, fsyncs):
    log = open_log(tmp_path, segment_bytes=300)
    fill(log, 10)
    assert fsyncs == []
    log.close()  # a clean shutdown flushes every segment written to
    assert sorted(set(fsyncs)) == sorted(p.name for p in (tmp_path / "topic-0").glob("*.log"))


def test_flush_messages_one_fsyncs_every_append(tmp_path, fsyncs):
    log = open_log(tmp_path, flush_messages=1)
    for appended in range(1, 4):
        before = len(fsyncs)
        fill(log, 1)
        assert len(fsyncs) > before, f"append {appended} did not fsync"


def test_flush_messages_counts_records_since_the_last_flush(tmp_path, fsyncs):
    log = open_log(tmp_path, flush_messages=10)
    fill(log, 3)  # 9 records unflushed
    assert fsyncs == []
    fill(log, 1)  # 12 >= 10
    flushed = len(fsyncs)
    assert flushed
    fill(log, 3)  # 9 since the flush
    assert len(fsyncs) == flushed


def test_flush_ms_zero_fsyncs_every_append(tmp_path, fsyncs):
    log = open_log(tmp_path, flush_ms=0)
    fill(log, 1)
    assert fsyncs
    patient = open_log(tmp_path, "topic-1", flush_ms=3_600_000)
    before = len(fsyncs)
    fill(patient, 3)
    assert len(fsyncs) == before


@pytest.mark.parametrize("config, message", [
    (dict(segment_bytes=0), "segment_bytes=0"),
    (dict(segment_bytes=2**31), "segment_bytes=2147483648"),
    (dict(flush_messages=-1), "flush_messages=-1"),
    (dict(index_interval_bytes=-5), "index_interval_bytes=-5"),
])
def test_log_config_names_a_bad_value(config, message):
    with pytest.raises(ValueError, match=message):
        LogConfig(**config)
