"""The gate's page cache: what a crash can take away.

One idea, the OS page cache as Jepsen's LazyFS models it: a write changes
what readers see at once but reaches the backing file only when it is
written back — on fsync/fdatasync of that file, when its oldest unsynced
change is older than the writeback delay (Linux's dirty_expire), or when
too much is dirty. `drop` forgets everything not written back, so the
backing directory is what a machine that lost power would find: what was
fsynced or written back, nothing else.

Per backing inode (keyed by device and inode number, so a rename keeps its
cache), a `CachedFile` holds:
- `size`, the size readers see; `durable_size`, the backing file's;
- `valid`: backing bytes below it are current — a truncation lowers it, so
  bytes cut off and later re-extended read as zeros, not as the old data;
- `extents`: sorted, disjoint (start, bytes) runs written since the last
  writeback, which lie over the backing bytes.
Writeback replays that state in an idempotent order: cut the backing file
to `valid`, write the extents, set its size to `size`. A failed writeback
leaves the file dirty and is simply tried again.

Only file contents and sizes are cached. Names (create, mkdir, rename,
unlink, link, symlink) and attributes (chmod, chown, utimes) pass through
to the backing directory at once and survive a drop: a created but never
synced file survives empty, like a crashed ext4's committed directory entry.
"""

from __future__ import annotations

import bisect
import logging
import os
import threading
import time

log = logging.getLogger("nemesis.disk")

# Linux's vm.dirty_bytes idea: past this much dirty data, write back the
# oldest files early instead of holding more.
MAX_DIRTY_BYTES = 256 * 1024 * 1024


class CachedFile:
    def __init__(self, fd: int, key: tuple[int, int]):
        self.fd = fd
        self.key = key
        self.lock = threading.Lock()
        self.durable_size = self.valid = self.size = os.fstat(fd).st_size
        self.starts: list[int] = []
        self.extents: list[bytearray] = []
        self.dirty_bytes = 0
        self.dirty_since: float | None = None   # monotonic time of the oldest unsynced change
        self.mtime_ns: int | None = None        # of the last cached change, for getattr
        self.handles = 0                        # open file handles through the gate

    @property
    def dirty(self) -> bool:
        return self.dirty_since is not None

    def _touch(self) -> None:
        if self.dirty_since is None:
            self.dirty_since = time.monotonic()
        self.mtime_ns = time.time_ns()

    def write(self, offset: int, data: bytes) -> int:
        if not data:
            return 0
        end = offset + len(data)
        with self.lock:
            starts, extents = self.starts, self.extents
            if starts and starts[-1] + len(extents[-1]) == offset:
                extents[-1] += data     # an append: the broker's usual write
                self.dirty_bytes += len(data)
            else:
                self._merge(offset, end, data)
            self.size = max(self.size, end)
            self._touch()
        return len(data)

    def _merge(self, offset: int, end: int, data: bytes) -> None:
        """Put data at offset, joining every extent it overlaps or touches."""
        starts, extents = self.starts, self.extents
        first = bisect.bisect_left(starts, offset)
        if first > 0 and starts[first - 1] + len(extents[first - 1]) >= offset:
            first -= 1
        last = bisect.bisect_right(starts, end)
        start = min(offset, starts[first]) if first < last else offset
        stop = max([end] + [starts[i] + len(extents[i]) for i in range(first, last)])
        merged = bytearray(stop - start)
        for i in range(first, last):
            merged[starts[i] - start:starts[i] - start + len(extents[i])] = extents[i]
        merged[offset - start:end - start] = data
        self.dirty_bytes += len(merged) - sum(len(extents[i]) for i in range(first, last))
        starts[first:last] = [start]
        extents[first:last] = [merged]

    def truncate(self, length: int) -> None:
        with self.lock:
            self.size = length
            self.valid = min(self.valid, length)
            cut = bisect.bisect_left(self.starts, length)
            if cut > 0 and self.starts[cut - 1] + len(self.extents[cut - 1]) > length:
                keep = length - self.starts[cut - 1]
                self.dirty_bytes -= len(self.extents[cut - 1]) - keep
                del self.extents[cut - 1][keep:]
            self.dirty_bytes -= sum(len(e) for e in self.extents[cut:])
            del self.starts[cut:], self.extents[cut:]
            self._touch()

    def read(self, offset: int, size: int) -> bytes:
        with self.lock:
            size = min(size, self.size - offset)
            if size <= 0:
                return b""
            end = offset + size
            if not self.starts and self.valid >= end:
                return os.pread(self.fd, size, offset)
            view = bytearray(size)
            if self.valid > offset:
                backing = os.pread(self.fd, min(self.valid, end) - offset, offset)
                view[:len(backing)] = backing
            i = max(0, bisect.bisect_right(self.starts, offset) - 1)
            while i < len(self.starts) and self.starts[i] < end:
                start, extent = self.starts[i], self.extents[i]
                lo, hi = max(start, offset), min(start + len(extent), end)
                if lo < hi:
                    view[lo - offset:hi - offset] = extent[lo - start:hi - start]
                i += 1
            return bytes(view)

    def writeback(self, *, sync: bool = False, datasync: bool = False) -> int:
        """Make the backing file what readers see; the bytes written. With
        sync, fsync (fdatasync with datasync) the backing file too."""
        with self.lock:
            if self.fd < 0:
                return 0
            written = self.dirty_bytes
            if self.dirty:
                if self.valid < self.durable_size:
                    os.ftruncate(self.fd, self.valid)
                for start, extent in zip(self.starts, self.extents):
                    view = memoryview(extent)
                    while view:
                        done = os.pwrite(self.fd, view, start)
                        view, start = view[done:], start + done
                if os.fstat(self.fd).st_size != self.size:
                    os.ftruncate(self.fd, self.size)
                self.durable_size = self.valid = self.size
                self.starts, self.extents = [], []
                self.dirty_bytes, self.dirty_since = 0, None
            if sync:
                (os.fdatasync if datasync else os.fsync)(self.fd)
            return written

    def drop(self) -> int:
        """Forget what was not written back; the bytes forgotten."""
        with self.lock:
            dropped = self.dirty_bytes
            self.size = self.valid = self.durable_size
            self.starts, self.extents = [], []
            self.dirty_bytes, self.dirty_since, self.mtime_ns = 0, None, None
            return dropped


class PageCache:
    """Every backing file the gate has open or holds dirty data for.

    writeback_delay 0 writes every change through at once (nothing is ever
    dirty, drop finds nothing to lose)."""

    def __init__(self, writeback_delay: float = 5.0, max_dirty_bytes: int = MAX_DIRTY_BYTES):
        if writeback_delay < 0:
            raise ValueError(f"writeback_delay={writeback_delay!r}: seconds, 0 or more "
                             f"(0 writes through)")
        self.writeback_delay = writeback_delay
        self.max_dirty_bytes = max_dirty_bytes
        self._files: dict[tuple[int, int], CachedFile] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # A stalled device writes nothing back either: while held, dirty
        # data stays dirty however old, so a drop loses all of it.
        self.held = False

    @property
    def lazy(self) -> bool:
        return self.writeback_delay > 0

    def attach(self, fd: int) -> CachedFile:
        """The cache of the file fd is open on, with one more handle; fd is
        kept (the first one) or closed (the file is already cached)."""
        st = os.fstat(fd)
        key = (st.st_dev, st.st_ino)
        with self._lock:
            cached = self._files.get(key)
            if cached is None:
                cached = self._files[key] = CachedFile(fd, key)
            else:
                os.close(fd)
            cached.handles += 1
            return cached

    def lookup(self, st: os.stat_result) -> CachedFile | None:
        return self._files.get((st.st_dev, st.st_ino))

    def release(self, cached: CachedFile) -> None:
        with self._lock:
            cached.handles -= 1
            self._forget_if_unused(cached)

    def _forget_if_unused(self, cached: CachedFile) -> None:
        """Close a file no handle uses that holds nothing to write back (or
        whose last name is gone: nobody can ever read what it holds)."""
        with cached.lock:
            if cached.handles > 0 or cached.fd < 0:
                return
            if cached.dirty and os.fstat(cached.fd).st_nlink > 0:
                return
            if self._files.get(cached.key) is cached:
                del self._files[cached.key]
            os.close(cached.fd)
            cached.fd = -1      # a writeback racing this one finds nothing to do

    def changed(self, cached: CachedFile) -> None:
        """After a write or truncation: write through when not lazy."""
        if not self.lazy:
            cached.writeback()

    def dirty(self) -> tuple[int, int]:
        """(files, bytes) not written back."""
        with self._lock:
            files = [c for c in self._files.values() if c.dirty]
        return len(files), sum(c.dirty_bytes for c in files)

    def expire(self, now: float | None = None) -> int:
        """Write back the files whose oldest change is older than the
        writeback delay, and the oldest others while too much is dirty;
        the bytes written. Nothing while held."""
        if self.held:
            return 0
        now = time.monotonic() if now is None else now
        with self._lock:
            dirty = sorted((c for c in self._files.values() if c.dirty),
                           key=lambda c: c.dirty_since or now)
        total, written = sum(c.dirty_bytes for c in dirty), 0
        for cached in dirty:
            since = cached.dirty_since
            if since is None:
                continue
            if now - since < self.writeback_delay and total <= self.max_dirty_bytes:
                break
            done = cached.writeback()
            total -= done
            written += done
            with self._lock:
                self._forget_if_unused(cached)
        return written

    def sync(self) -> dict:
        """Write back everything (a clean unmount, the `sync` command)."""
        with self._lock:
            dirty = [c for c in self._files.values() if c.dirty]
        written = 0
        for cached in dirty:
            written += cached.writeback(sync=True)
            with self._lock:
                self._forget_if_unused(cached)
        return {"files": len(dirty), "bytes": written}

    def drop(self) -> dict:
        """Forget everything not written back: files and bytes lost."""
        with self._lock:
            dirty = [c for c in self._files.values() if c.dirty]
        dropped = sum(cached.drop() for cached in dirty)
        with self._lock:
            for cached in dirty:
                self._forget_if_unused(cached)
        return {"files": len(dirty), "bytes": dropped}

    def start_writeback(self) -> None:
        """The background flusher (Linux's writeback threads)."""
        if not self.lazy or self._thread is not None:
            return
        interval = min(1.0, max(0.05, self.writeback_delay / 10))

        def flusher() -> None:
            while not self._stop.wait(interval):
                try:
                    self.expire()
                except OSError as e:   # the backing disk failed: keep the data, try later
                    log.warning("writeback failed, will retry: %s", e)

        self._thread = threading.Thread(target=flusher, name="writeback", daemon=True)
        self._thread.start()

    def stop_writeback(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
