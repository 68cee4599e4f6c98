"""The disk gate's switches, thrown from the control socket's thread while
libfuse's workers run the filesystem operations (gate.py): stall, errors,
and the wait for quiet that a drop of the page cache needs. Every
operation passes `enter` and `leave`; what it does in between is the
gate's business, not theirs."""

from __future__ import annotations

import errno
import logging
import signal
import threading
import time
from pathlib import Path

import mfusepy

from nemesis.disk.page_cache import PageCache

log = logging.getLogger("nemesis.disk")

QUIESCE_SECONDS = 10.0
# How often an operation waiting at a stalled gate looks whether its
# process is being killed.
DYING_POLL_SECONDS = 0.05
SIGKILL_BIT = 1 << (signal.SIGKILL - 1)     # in /proc/PID/status's signal masks


def _dying() -> bool:
    """Whether the thread that made the current request has a SIGKILL
    pending (or is gone). The kernel keeps a request it has sent to the
    gate, and so even a SIGKILLed process, until the gate answers
    (fs/fuse/dev.c, request_wait_answer), and a dying process closes its
    files through the gate too: a stall would make a kill hang where a
    crash must not. Any other signal (a pause's SIGSTOP) keeps the
    operation waiting, as a process on a hung disk does."""
    pid = mfusepy.fuse_get_context()[2]
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return True
    return any(int(line.split()[1], 16) & SIGKILL_BIT for line in status.splitlines()
               if line.startswith(("SigPnd:", "ShdPnd:")))


class Switches:
    """Stall and errors, and the count of operations under way. A stall
    also holds the page cache's writeback: nothing reaches the backing
    directory while the disk does not answer."""

    def __init__(self, cache: PageCache):
        self.cache = cache
        self._cond = threading.Condition(threading.Lock())
        self.stalled = False
        self.failing = False
        self._draining = False
        self._in_flight = 0
        self._waiting = 0

    # -- the operations' side (libfuse's worker threads) -------------------

    def enter(self, fails: bool) -> None:
        """Wait while the disk is stalled (or a drop is under way); with
        fails, raise EIO while errors are on. A process being killed is let
        go with EINTR."""
        with self._cond:
            while self.stalled or self._draining:
                if _dying():
                    raise mfusepy.FuseOSError(errno.EINTR)
                self._waiting += 1
                try:
                    self._cond.wait(DYING_POLL_SECONDS)
                finally:
                    self._waiting -= 1
            if fails and self.failing:
                raise mfusepy.FuseOSError(errno.EIO)
            self._in_flight += 1

    def leave(self) -> None:
        with self._cond:
            self._in_flight -= 1
            if self._in_flight == 0:
                self._cond.notify_all()

    # -- the control socket's side -----------------------------------------

    def set_stalled(self, stalled: bool) -> None:
        with self._cond:
            self.stalled = stalled
            self.cache.held = stalled
            self._cond.notify_all()

    def set_failing(self, failing: bool) -> None:
        with self._cond:
            self.failing = failing

    def drop(self) -> dict:
        """Forget what was not written back, with no operation in flight
        (one that was under way lands before, none lands after)."""
        with self._cond:
            self._draining = True
            deadline = time.monotonic() + QUIESCE_SECONDS
            while self._in_flight and time.monotonic() < deadline:
                self._cond.wait(deadline - time.monotonic())
            busy = self._in_flight
            try:
                dropped = self.cache.drop()
            finally:
                self._draining = False
                self._cond.notify_all()
        if busy:
            log.warning("drop: %d operation(s) still in flight after %s s", busy, QUIESCE_SECONDS)
        return dropped

    def status(self) -> dict:
        with self._cond:
            return {"stalled": self.stalled, "errors": self.failing,
                    "blocked_ops": self._waiting, "in_flight_ops": self._in_flight}

    def shutdown(self) -> None:
        """Let every waiting operation through (the gate is going away)."""
        with self._cond:
            self.stalled = self.failing = False
            self._cond.notify_all()
