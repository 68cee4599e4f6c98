"""The size the disk gate tells the kernel (nemesis/disk/gate.py): always
what readers see, also when a writeback ended between the stat of the
backing file and the answer — the edge a mounted gate hits only by chance
under load, made here on purpose with the gate's own page cache."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("mfusepy", reason="the disk gate needs mfusepy and libfuse3")

from nemesis.disk.gate import DiskGate  # noqa: E402
from nemesis.disk.page_cache import PageCache  # noqa: E402


def test_a_stat_from_before_a_writeback_does_not_shrink_the_file(tmp_path):
    backing = tmp_path / "backing"
    backing.mkdir()
    cache = PageCache(writeback_delay=5.0)
    gate = DiskGate(str(backing), cache)
    path = backing / "00000000000000000000.log"
    cached = cache.attach(os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
    try:
        cached.write(0, b"x" * 8072)
        cached.writeback()
        cached.write(8072, b"y" * 100)          # an append, not yet written back
        before = os.lstat(path)                 # the backing file: 8072 bytes
        cached.writeback()                      # the flusher, racing the getattr
        assert os.lstat(path).st_size == 8172
        assert gate._cached_attrs(before, cache.lookup(before))["st_size"] == 8172
        cached.write(8172, b"z" * 28)
        assert gate._cached_attrs(os.lstat(path), cache.lookup(before))["st_size"] == 8200
    finally:
        cache.release(cached)
