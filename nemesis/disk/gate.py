"""The disk gate: a FUSE filesystem passing every operation through to a
backing directory, with three switches a nemesis throws at run time.

- stall: every operation (data, metadata, open, close) waits at the gate
  until unstalled; operations already past it finish. The control socket
  is not a filesystem operation and keeps answering. A process that is
  SIGKILLed meanwhile is let go (its waiting operations fail with EINTR),
  so a kill during a stall is a crash, not a hang. Nothing is written back
  while stalled, so stall, kill, drop is a power cut at the stall's instant.
- errors: operations that touch the disk fail with EIO — open, create,
  read, write, fsync, fsyncdir, truncate, and every change of a name or an
  attribute (mkdir, mknod, unlink, rmdir, rename, link, symlink, chmod,
  chown, utimens). Looking (getattr, readdir, readlink, statfs, access)
  and closing (flush, release) keep working, so processes can still see
  their files and let go of them.
- the page cache (page_cache.py) is always on: file contents and sizes
  reach the backing directory on fsync or after the writeback delay, and
  `drop` forgets the rest. Closing a file (flush, release — also what a
  SIGKILL does to every file of a process) writes nothing back, and the
  kernel's own writeback cache is off, so every write a process made is
  in this cache when it dies: kill, then drop, loses exactly what a power
  cut would.

Operations on open files use their handle, never a path (nullpath_ok), so a
file unlinked while open keeps working without libfuse's `.fuse_hidden`
renames (hard_remove).

The switches and the waiting at them are switches.py's; this file is the
filesystem whose every operation passes them (`_gated`).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import itertools
import os
import threading
import time

import mfusepy

from nemesis.disk.page_cache import CachedFile, PageCache
from nemesis.disk.switches import Switches

# How long the kernel trusts names and attributes it was told (libfuse's
# entry_timeout and attr_timeout, passed as mount options). A drop changes
# sizes behind the kernel's back, so it answers only after this long: by
# then any open or stat asks the gate again.
KERNEL_CACHE_SECONDS = 1.0
# fuse_common.h capability bits
FUSE_CAP_AUTO_INVAL_DATA = 1 << 12
FUSE_CAP_WRITEBACK_CACHE = 1 << 16
# libfuse's worker threads are not Python's: each ctypes callback would
# create and destroy a Python thread state. One extra PyGILState_Ensure per
# worker keeps its state for good — a write costs about half as much CPU.
_worker = threading.local()


def _gated(*, fails: bool):
    """An operation that passes the gate's switches: it waits while the
    disk is stalled (or a drop is under way) and, with fails, raises EIO
    while errors are on."""
    def wrap(method):
        @functools.wraps(method)
        def gated(self: "DiskGate", *args):
            if not getattr(_worker, "pinned", False):
                ctypes.pythonapi.PyGILState_Ensure()
                _worker.pinned = True
            self.switches.enter(fails)
            try:
                return method(self, *args)
            finally:
                self.switches.leave()
        return gated
    return wrap


class DiskGate(mfusepy.Operations):
    use_ns = True            # utimens gets nanoseconds
    flag_nopath = True       # with flag_nullpath_ok: no paths for handle operations
    flag_nullpath_ok = True

    def __init__(self, backing: str, cache: PageCache):
        self.backing = os.path.abspath(backing).rstrip("/") or "/"
        self.cache = cache
        self._handles: dict[int, CachedFile] = {}
        self._dirs: dict[int, str] = {}
        self._ids = itertools.count(1)
        self.switches = Switches(cache)

    # -- what the control socket asks of the whole gate --------------------

    def drop(self) -> dict:
        """The switches' drop, answered once the kernel no longer trusts
        sizes it saw before."""
        dropped = self.switches.drop()
        if dropped["files"]:
            time.sleep(KERNEL_CACHE_SECONDS + 0.1)
        return dropped

    def status(self) -> dict:
        files, dirty = self.cache.dirty()
        return {**self.switches.status(), "dirty_files": files, "dirty_bytes": dirty,
                "writeback_delay": self.cache.writeback_delay,
                "open_files": len(self._handles), "backing": self.backing,
                "pid": os.getpid()}

    # -- at mount ----------------------------------------------------------

    def init_with_config(self, conn, config) -> None:
        """No kernel writeback cache: a write(2) returns once the gate has
        it. No auto_inval_data: every change goes through the kernel, so its
        page cache stays right, while with it each write's new mtime would
        throw the file's cached pages away at the next read. What a drop
        changes, the next open invalidates (no keep_cache)."""
        conn.want &= ~(FUSE_CAP_AUTO_INVAL_DATA | FUSE_CAP_WRITEBACK_CACHE)

    # -- helpers -----------------------------------------------------------

    def _path(self, path: str) -> str:
        return self.backing + path

    def _file(self, fh: int) -> CachedFile:
        try:
            return self._handles[fh]
        except KeyError:
            raise mfusepy.FuseOSError(errno.EBADF) from None

    def _attach(self, fd: int, flags: int) -> int:
        cached = self.cache.attach(fd)
        if flags & os.O_TRUNC:
            self._truncate(cached, 0)
        fh = next(self._ids)
        self._handles[fh] = cached
        return fh

    def _truncate(self, cached: CachedFile, length: int) -> None:
        cached.truncate(length)
        self.cache.changed(cached)

    @staticmethod
    def _open_backing(path: str, flags: int, mode: int = 0o644) -> int:
        """The cache's own descriptor: read-write whatever the caller asked
        (several handles share it); the caller's access mode if that fails."""
        extra = flags & (os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW)
        try:
            return os.open(path, os.O_RDWR | extra, mode)
        except PermissionError:
            return os.open(path, (flags & os.O_ACCMODE) | extra, mode)

    @staticmethod
    def _attrs(st: os.stat_result) -> dict:
        return {key: getattr(st, key) for key in (
            "st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid", "st_size",
            "st_blocks", "st_blksize", "st_rdev")} | {
            "st_atime": st.st_atime_ns, "st_mtime": st.st_mtime_ns, "st_ctime": st.st_ctime_ns}

    def _cached_attrs(self, st: os.stat_result, cached: CachedFile | None) -> dict:
        """st's attributes with a cached file's size: what readers see, dirty
        or not. A writeback may end between the stat of the backing file and
        here, and the stat then holds the size from before it: told that
        smaller size, the kernel would shrink the file and answer reads
        beyond it with EOF (seen as Kafka's "Unexpected EOF while attempting
        to read the next batch" on its metadata log)."""
        attrs = self._attrs(st)
        if cached is not None:
            with cached.lock:
                size, mtime_ns = cached.size, cached.mtime_ns
            attrs["st_size"] = size
            attrs["st_blocks"] = (size + 511) // 512
            if mtime_ns is not None:
                attrs["st_mtime"] = attrs["st_ctime"] = max(mtime_ns, st.st_mtime_ns)
        return attrs

    # -- looking -----------------------------------------------------------

    @_gated(fails=False)
    def getattr(self, path, fh=None):
        if path is None:
            cached = self._file(fh)
            return self._cached_attrs(os.fstat(cached.fd), cached)
        st = os.lstat(self._path(path))
        return self._cached_attrs(st, self.cache.lookup(st))

    @_gated(fails=False)
    def access(self, path, amode):
        if not os.access(self._path(path), amode, follow_symlinks=False):
            raise mfusepy.FuseOSError(errno.EACCES)
        return 0

    @_gated(fails=False)
    def readlink(self, path):
        return os.readlink(self._path(path))

    @_gated(fails=False)
    def statfs(self, path):
        st = os.statvfs(self._path(path))
        return {key: getattr(st, key) for key in (
            "f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
            "f_favail", "f_flag", "f_namemax")}

    @_gated(fails=False)
    def opendir(self, path):
        real = self._path(path)
        if not os.path.isdir(real):
            raise mfusepy.FuseOSError(errno.ENOTDIR)
        fh = next(self._ids)
        self._dirs[fh] = real
        return fh

    @_gated(fails=False)
    def readdir(self, path, fh):
        return [".", "..", *os.listdir(self._dirs[fh])]

    @_gated(fails=False)
    def releasedir(self, path, fh):
        self._dirs.pop(fh, None)
        return 0

    # -- file contents -----------------------------------------------------

    @_gated(fails=True)
    def open(self, path, flags):
        return self._attach(self._open_backing(self._path(path), flags), flags)

    @_gated(fails=True)
    def create(self, path, mode, flags):
        fd = self._open_backing(self._path(path), flags | os.O_CREAT, mode)
        return self._attach(fd, flags)

    @_gated(fails=True)
    def read(self, path, size, offset, fh):
        return self._file(fh).read(offset, size)

    @_gated(fails=True)
    def write(self, path, data, offset, fh):
        cached = self._file(fh)
        written = cached.write(offset, data)
        self.cache.changed(cached)
        return written

    @_gated(fails=True)
    def truncate(self, path, length, fh=None):
        if path is None:
            self._truncate(self._file(fh), length)
            return 0
        cached = self.cache.attach(self._open_backing(self._path(path), os.O_WRONLY))
        try:
            self._truncate(cached, length)
        finally:
            self.cache.release(cached)
        return 0

    @_gated(fails=True)
    def fsync(self, path, datasync, fh):
        self._file(fh).writeback(sync=True, datasync=bool(datasync))
        return 0

    @_gated(fails=False)
    def flush(self, path, fh):
        return 0    # close() writes nothing back: the page cache keeps it

    @_gated(fails=False)
    def release(self, path, fh):
        cached = self._handles.pop(fh, None)
        if cached is not None:
            self.cache.release(cached)
        return 0

    @_gated(fails=True)
    def fsyncdir(self, path, datasync, fh):
        fd = os.open(self._dirs[fh], os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return 0

    # -- names and attributes: through at once -----------------------------

    @_gated(fails=True)
    def mkdir(self, path, mode):
        os.mkdir(self._path(path), mode)
        return 0

    @_gated(fails=True)
    def mknod(self, path, mode, dev):
        os.mknod(self._path(path), mode, dev)
        return 0

    @_gated(fails=True)
    def rmdir(self, path):
        os.rmdir(self._path(path))
        return 0

    @_gated(fails=True)
    def unlink(self, path):
        os.unlink(self._path(path))
        return 0

    @_gated(fails=True)
    def rename(self, old, new):
        os.rename(self._path(old), self._path(new))
        return 0

    @_gated(fails=True)
    def link(self, target, source):
        os.link(self._path(source), self._path(target))
        return 0

    @_gated(fails=True)
    def symlink(self, target, source):
        os.symlink(source, self._path(target))
        return 0

    @_gated(fails=True)
    def chmod(self, path, mode):
        if path is None:    # fchmod: libfuse gives neither path nor handle here
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        os.chmod(self._path(path), mode, follow_symlinks=False)
        return 0

    @_gated(fails=True)
    def chown(self, path, uid, gid):
        if path is None:
            raise mfusepy.FuseOSError(errno.EOPNOTSUPP)
        os.chown(self._path(path), uid, gid, follow_symlinks=False)
        return 0

    @_gated(fails=True)
    def utimens(self, path, times=None):
        if path is None:
            return 0        # futimens: times are not what the gate is about
        real = self._path(path)
        if times is None:
            os.utime(real, follow_symlinks=False)
        else:
            os.utime(real, ns=(int(times[0]), int(times[1])), follow_symlinks=False)
        cached = self.cache.lookup(os.lstat(real))
        if cached is not None:
            cached.mtime_ns = None
        return 0


class _Fuse(mfusepy.FUSE):
    """mfusepy's FUSE 3 truncate drops the file handle; with nullpath_ok an
    ftruncate then names no file at all, so pass the handle on."""

    def truncate_fuse_3(self, path, length, fip):
        fh = fip.contents.fh if fip else None
        return self.operations.truncate(
            None if path is None else path.decode(self.encoding, self.errors), length, fh)


def serve(gate: DiskGate, mountpoint: str) -> None:
    """Mount the gate on mountpoint and serve it until it is unmounted:
    any user may use it (allow_other; the kernel checks modes), names and
    attributes are cached KERNEL_CACHE_SECONDS, hard_remove (see above).
    Writes arrive in pieces of up to 1 MiB (libfuse 3's max_write)."""
    _Fuse(gate, mountpoint, foreground=True, fsname="kchaos-disk", subtype="kchaos-disk",
          allow_other=True, default_permissions=True, hard_remove=True,
          attr_timeout=KERNEL_CACHE_SECONDS, entry_timeout=KERNEL_CACHE_SECONDS)
