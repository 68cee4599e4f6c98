"""Progress of a run: on a terminal a live status line (rich), elsewhere
(CI, a pipe) a plain line every few seconds — phase, elapsed time,
operations per second and errors so far."""

from __future__ import annotations

import os
import sys
import threading
import time


class Progress:
    def __init__(self, live: bool, interval: float = 5.0, stream=None):
        self.live = live
        self.interval = interval
        self.stream = stream or sys.stderr
        self.started = time.monotonic()
        self._phase = "start"
        self._stats = None
        self._last = (time.monotonic(), 0)
        self._stop = threading.Event()
        self._console = None
        self._status = None
        if live:
            from rich.console import Console
            self._console = Console(file=self.stream)
            self._status = self._console.status(self._line())
            self._status.start()
        if live or interval != float("inf"):
            threading.Thread(target=self._loop, name="progress", daemon=True).start()

    @classmethod
    def for_terminal(cls) -> "Progress":
        """Live on an interactive terminal, plain under CI or a pipe."""
        return cls(live=sys.stderr.isatty() and not os.environ.get("CI"))

    @classmethod
    def quiet(cls) -> "Progress":
        return cls(live=False, interval=float("inf"))

    def phase(self, name: str, stats=None) -> None:
        self._phase = name
        if stats is not None:
            self._stats = stats
        self._emit()

    def _line(self) -> str:
        elapsed = time.monotonic() - self.started
        parts = [f"{self._phase}", f"{elapsed:6.1f} s"]
        if self._stats is not None:
            done, errors = self._stats.snapshot()
            now = time.monotonic()
            then, before = self._last
            rate = (done - before) / (now - then) if now > then else 0.0
            self._last = (now, done)
            parts += [f"{done} ops", f"{rate:,.0f} ops/s", f"{errors} fail/info"]
        return "kchaos: " + " | ".join(parts)

    def _emit(self) -> None:
        if self._status is not None:
            self._status.update(self._line())
        elif self.interval != float("inf"):
            print(self._line(), file=self.stream, flush=True)

    def _loop(self) -> None:
        while not self._stop.wait(1.0 if self.live else self.interval):
            self._emit()

    def close(self) -> None:
        self._stop.set()
        if self._status is not None:
            self._status.stop()
