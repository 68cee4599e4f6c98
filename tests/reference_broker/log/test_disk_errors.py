"""A disk error half-way through an append: what was written stands or
nothing changes, never a log end offset behind its own segment.

The error that lost data in an every-fault run (EIO switched on between a
follower's segment write and its leader-epoch checkpoint) falls between two
writes of one append; no real disk fault can be timed there, so these tests
make the checkpoint or the segment write fail by replacing the one function
that does it (tests/nemesis/disk/test_disk_broker.py runs the real gate)."""

from __future__ import annotations

import errno
import os

import pytest

from reference_broker.log import leader_epoch_cache, segment
from tests.reference_broker.log.test_partition_log import fill, open_log, read_all


def eio(*args, **kwargs):
    raise OSError(errno.EIO, "Input/output error")


def test_a_failed_epoch_checkpoint_keeps_the_append_and_the_epoch(tmp_path, monkeypatch):
    leader = open_log(tmp_path, "leader")
    fill(leader, 2, epoch=0)
    fill(leader, 2, epoch=1)
    follower = open_log(tmp_path, "follower")
    follower.append_as_follower(leader.read(0, 1))     # one batch a fetch
    follower.append_as_follower(leader.read(3, 1))
    with monkeypatch.context() as m:
        m.setattr(leader_epoch_cache, "replace_atomically", eio)
        # The first batch of epoch 1 (offset 6): its checkpoint fails.
        follower.append_as_follower(leader.read(6, 1))
        assert follower.log_end_offset == 9
        assert follower.end_offset_for_epoch(0) == (0, 6) and follower.latest_epoch() == 1
        follower.append_as_follower(leader.read(9, 1 << 20))   # the next fetch follows on
    assert read_all(follower) == read_all(leader)
    # A kill: nothing closed or flushed. The checkpoint on disk never got
    # epoch 1; recovery of the active segment gives it back, and nothing is cut.
    recovered = open_log(tmp_path, "follower")
    assert recovered.log_end_offset == 12 and read_all(recovered) == read_all(leader)
    assert recovered.end_offset_for_epoch(0) == (0, 6) and recovered.latest_epoch() == 1


def test_a_pending_epoch_is_written_by_the_next_change(tmp_path, monkeypatch):
    log = open_log(tmp_path)
    fill(log, 1, epoch=0)
    with monkeypatch.context() as m:
        m.setattr(leader_epoch_cache, "replace_atomically", eio)
        fill(log, 1, epoch=2)
    fill(log, 1, epoch=3)
    checkpoint = (tmp_path / "topic-0" / leader_epoch_cache.CHECKPOINT_FILE).read_text()
    assert checkpoint.split("\n")[2:5] == ["0 0", "2 3", "3 6"]


def test_no_segment_rolls_while_an_epoch_is_pending(tmp_path, monkeypatch):
    """Recovery restores the epochs of the active segment only, so a roll
    writes a pending checkpoint first; if it cannot, the append fails whole."""
    log = open_log(tmp_path, segment_bytes=300)
    fill(log, 1, epoch=0)
    with monkeypatch.context() as m:
        m.setattr(leader_epoch_cache, "replace_atomically", eio)
        fill(log, 1, epoch=1)          # fits: stands, its epoch pending
        with pytest.raises(OSError):
            fill(log, 2, epoch=1)      # would roll
        assert log.log_end_offset == 6 and len(list((tmp_path / "topic-0").glob("*.log"))) == 1
    fill(log, 2, epoch=1)
    assert log.log_end_offset == 12 and len(list((tmp_path / "topic-0").glob("*.log"))) == 2
    recovered = open_log(tmp_path, segment_bytes=300)
    assert recovered.end_offset_for_epoch(0) == (0, 3) and recovered.latest_epoch() == 1


def test_a_failed_segment_write_changes_nothing_even_when_part_landed(tmp_path, monkeypatch):
    """A write that fails after part of it reached the file, whose cutting
    back fails too: the next append lands where the failed one began."""
    log = open_log(tmp_path)
    fill(log, 2)

    def half_then_eio(fd, data, position):
        os.pwrite(fd, memoryview(data)[:len(data) // 2], position)
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as m:
        m.setattr(segment, "write_all_at", half_then_eio)
        m.setattr(segment.os, "ftruncate", eio)
        with pytest.raises(OSError):
            fill(log, 1)
    assert log.log_end_offset == 6
    fill(log, 2)
    expected = [(o, b"%010d" % o) for o in range(12)]
    assert read_all(log) == expected
    assert read_all(open_log(tmp_path)) == expected
