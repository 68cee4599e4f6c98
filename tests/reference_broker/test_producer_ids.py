"""Producer ids are never handed out twice, across restarts and failed
writes (reference_broker/producer_ids.py).

Found by a generic run on the correct broker: disk errors made a broker's
write of its next block fail, it handed out ids of that block anyway, and
after a restart of every node it handed them out again. A new producer got
the id of a live one, and its first two sends were answered as duplicates
of the other's, with offsets of records it never wrote (lost-write)."""

from __future__ import annotations

import pytest

from reference_broker.producer_ids import _BLOCK, ProducerIds


def opened(data_dir) -> ProducerIds:
    ids = ProducerIds(data_dir, node_id=3)
    ids.open()
    return ids


def test_ids_handed_out_before_a_failed_write_are_not_handed_out_again(tmp_path):
    ids = opened(tmp_path)
    before = {ids.allocate() for _ in range(_BLOCK)}       # the first block, used up
    # The next block's end cannot be written: a directory where its
    # temporary file goes (a real failure of the write, as EIO was).
    blocker = tmp_path / "producer-ids.json.tmp"
    blocker.mkdir()
    with pytest.raises(OSError):
        ids.allocate()
    with pytest.raises(OSError):
        ids.allocate()                  # still none: the block was never persisted
    blocker.rmdir()
    before.add(ids.allocate())          # written now
    after = {opened(tmp_path).allocate() for _ in range(3)}
    assert len(before) == _BLOCK + 1
    assert not before & after, sorted(before & after)
