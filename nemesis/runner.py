"""The nemesis as a process of the history (docs/history.md: process -1): it
starts and stops faults, records each as an invocation and a completion —
`info` with what was really done, `fail` with why it could not be — and
heals the whole cluster on demand.

A schedule (nemesis/schedule.py) or a hand-written script (a validation
recipe) drives it from one thread: `script(nemesis)` calls `start`, `stop`,
`sleep` and `until`, and returns when the run's main phase ends
(`sleep` and `until` return False then).
"""

from __future__ import annotations

import logging
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from nemesis.core import Cluster, Fault
from nemesis.heal import heal_all

log = logging.getLogger("nemesis")

PROCESS = -1
PROJECT = str(Path(__file__).resolve().parents[1])     # where a stuck script's own frames are


class Unmet(Exception):
    """A script's precondition did not happen: the cluster never reached
    the state the script needs, or the main phase ended first. The run
    could not test what it meant to: its verdict is `unknown`
    (kchaos/verdict.py), and the validation matrix counts it as
    inconclusive, neither a detection nor a clean run."""


class Nemesis:
    def __init__(self, cluster: Cluster, history, *, seed: int = 0):
        self.cluster = cluster
        self.history = history
        self.rng = random.Random(seed)
        self.active: list[Fault] = []
        self.done = threading.Event()       # the main phase is over
        self.realised: list[dict] = []      # what happened, for test.json
        self.dropped: list[dict] = []       # planned starts the main phase ended before
        self._lock = threading.Lock()
        self._outstanding: tuple[str, dict] | None = None   # an invocation not completed yet
        self._abandoned: int | None = None  # the thread whose records are dropped

    # -- faults ------------------------------------------------------------

    def start(self, fault: Fault) -> dict | None:
        """Apply fault; what was done, or None if it failed (recorded)."""
        done = self._do(fault.start_f, fault.asked(), lambda: fault.start(self.cluster, self.rng))
        if done is not None:
            self.active.append(fault)
        return done

    def stop(self, fault: Fault) -> dict | None:
        if fault in self.active:
            self.active.remove(fault)
        return self._do(fault.stop_f, fault.asked(), lambda: fault.stop(self.cluster))

    def stop_all(self) -> None:
        for fault in reversed(list(self.active)):
            self.stop(fault)

    def heal(self) -> list[str]:
        """Stop every active fault, then return every node to baseline
        (nemesis/heal.py); the problems found, also in the history."""
        self.stop_all()
        self._record("invoke", "heal", {})
        problems = heal_all(self.cluster)
        self._record("info", "heal", {"problems": problems})
        return problems

    def _do(self, f: str, asked: dict, action: Callable[[], dict]) -> dict | None:
        self._record("invoke", f, asked)
        try:
            done = action()
        except Exception as e:  # noqa: BLE001 — a fault that cannot be applied is a `fail`
            log.warning("nemesis %s %s failed: %s", f, asked, e)
            self._record("fail", f, asked, error=f"{type(e).__name__}: {e}")
            return None
        self._record("info", f, done)
        return done

    def abandon(self, thread: threading.Thread, why: str) -> None:
        """`thread` is stuck applying a fault: complete its invocation as
        `info` (it may still happen) and drop whatever it records later, so
        the nemesis stays one process with one operation at a time
        (docs/history.md) while the run heals the cluster without it."""
        with self._lock:
            self._abandoned = thread.ident
            if self._outstanding is not None:
                f, asked = self._outstanding
                self._append("info", f, asked, why)

    def _record(self, type: str, f: str, value: dict, error: str | None = None) -> None:
        with self._lock:
            if threading.get_ident() == self._abandoned:
                log.warning("nemesis: dropped %s %s of an abandoned script: %s", type, f, value)
                return
            self._append(type, f, value, error)

    def _append(self, type: str, f: str, value: dict, error: str | None) -> None:
        self.history.append(PROCESS, type, f, value, error=error)
        self._outstanding = (f, value) if type == "invoke" else None
        if type != "invoke":
            entry = {"f": f, "type": type, "value": value, **({"error": error} if error else {})}
            self.realised.append(entry)

    def require(self, holds: object, what: str) -> None:
        """A script's precondition: raise Unmet(what) unless it holds."""
        if not holds:
            raise Unmet(what + (" (the main phase ended first)" if self.done.is_set() else ""))

    # -- time --------------------------------------------------------------

    def sleep(self, seconds: float) -> bool:
        """Wait; False (at once) when the main phase has ended."""
        return not self.done.wait(max(0.0, seconds))

    def until(self, condition: Callable[[], object], timeout: float,
              interval: float = 0.2) -> bool:
        """Poll condition until it holds (True), timeout passes or the main
        phase ends (False)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if condition():
                return True
            if not self.sleep(interval):
                return False
        return bool(condition())


Script = Callable[[Nemesis], None]


class NemesisThread:
    """Runs script(nemesis) beside the workload; `finish` ends the script's
    waits and joins it. An exception in a script is kept for the run's
    outcome (an unmet precondition apart from an error), never raised into
    the workload."""

    def __init__(self, nemesis: Nemesis, script: Script):
        self.nemesis = nemesis
        self.script = script
        self.error: BaseException | None = None
        self.unmet: str | None = None       # the precondition that did not happen
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        try:
            self.script(self.nemesis)
        except Unmet as e:
            log.warning("the nemesis script's precondition did not happen: %s", e)
            self.unmet = str(e)
        except BaseException as e:  # noqa: BLE001 — reported by the run
            log.exception("the nemesis script failed")
            self.error = e

    def finish(self, timeout: float = 120.0) -> None:
        """End the script's waits and join it; a script still applying a
        fault after `timeout` is abandoned (Nemesis.abandon), and where it
        was stuck is logged and kept in the error."""
        self.nemesis.done.set()
        self._thread.join(timeout)
        if not self._thread.is_alive():
            return
        frame = sys._current_frames().get(self._thread.ident)
        stack = traceback.extract_stack(frame) if frame is not None else []
        log.error("the nemesis did not finish within %s s of the main phase's end; it is "
                  "stuck at:\n%s", timeout, "".join(stack.format() if stack else []))
        ours = [f for f in stack if f.filename.startswith(PROJECT + os.sep)
                and "-packages" not in f.filename] or stack
        where = (f"{os.path.relpath(ours[-1].filename, PROJECT)}:{ours[-1].lineno} "
                 f"{ours[-1].name}()" if ours else "an unknown place")
        self.nemesis.abandon(self._thread, f"not completed: the nemesis was still applying "
                                           f"it {timeout} s after the main phase ended")
        self.error = self.error or TimeoutError(
            f"the nemesis did not finish within {timeout} s of the main phase's end "
            f"(stuck in {where}; the whole stack is in kchaos.log)")
