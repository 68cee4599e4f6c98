"""The one Spark session of a kchaos process, started when it costs the run
nothing: in the background while the cluster starts, and ready before the
workload begins (kchaos/run.py), so that the verdict follows the final
reads by seconds rather than by a JVM start, and the history never shows
the two cores the start takes.

Starting it means more than a JVM: the checker suite runs once on a tiny
built-in history (checkers.suite.warm_up), so Spark's generated code and
its Python workers are ready when the run's own history comes.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from pathlib import Path
from typing import Mapping

from kchaos.processes import processes

log = logging.getLogger("kchaos.session")


class BackgroundSession:
    """A Spark session made on first need: `start()` begins making it in a
    background thread (idempotent); `get()` waits for it and returns it, or
    raises what making it raised."""

    def __init__(self, *, master: str | None = None, conf: Mapping[str, str] | None = None,
                 scratch_dir: str | Path | None = None):
        self._args = {"master": master, "conf": dict(conf or {}), "scratch_dir": scratch_dir}
        self._lock = threading.Lock()
        self._started = False
        self._ready = threading.Event()
        self._session = None
        self._error: BaseException | None = None

    @classmethod
    def around(cls, session) -> "BackgroundSession":
        """A handle on a session that is already running."""
        handle = cls()
        handle._started, handle._session = True, session
        handle._ready.set()
        return handle

    def start(self) -> "BackgroundSession":
        with self._lock:
            if not self._started:
                self._started = True
                threading.Thread(target=self._make, name="spark-session", daemon=True).start()
        return self

    def wait(self) -> None:
        """Until the session is made (or failed: get() raises it)."""
        self._ready.wait()

    def get(self):
        self.start()
        self._ready.wait()
        if self._error is not None:
            raise self._error
        return self._session

    def _make(self) -> None:
        from checkers.suite import warm_up
        from history_analysis.spark import spark_session
        try:
            session = spark_session(**self._args)
            try:
                warm_up(session)
            except Exception:  # noqa: BLE001 — a cold check is slower, not wrong
                log.exception("warming up the checker suite failed")
            self._session = session
        except BaseException as e:  # noqa: BLE001 — raised by get()
            self._error = e
        finally:
            self._ready.set()

    def abandon(self) -> None:
        """Ctrl-C or SIGTERM: end Spark's driver JVM now, made or still in
        the making. It would end by itself once this process's end closes
        its stdin, but it reads stdin only once its gateway is up
        (PythonGatewayServer), which a loaded machine delays by a minute:
        a cancelled run must leave no process behind."""
        for pid in spark_drivers(os.getpid()):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def stop(self) -> None:
        if self._started:
            self._ready.wait()
        if self._session is not None:
            self._session.stop()


# spark-submit (a script) execs java with SparkSubmit: the driver is one of
# the two, by the time it is looked for.
DRIVER_MARKS = ("spark-submit", "org.apache.spark.deploy.SparkSubmit")


def spark_drivers(parent: int) -> list[int]:
    """The children of process `parent` that are Spark drivers being started
    or running (pyspark's launch_gateway starts one per process)."""
    return [pid for pid, ppid, cmdline in processes()
            if ppid == parent and any(mark in cmdline for mark in DRIVER_MARKS)]
