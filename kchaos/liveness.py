"""Daemons that die unasked, seen when they die: a thread asks the DB
adapter every second from the cluster's start until its teardown, and the
adapter looks again itself before any start or kill (cluster/daemon_db.py
`deaths`). So a broker or controller that dies during the recovery or the
final reads is reported although heal-all or the teardown starts it again,
and a later scheduled kill of its node does not erase it.

Each death is judged once the run is over: one a fault injected on its own
node explains (nemesis/effects.py) is that fault's effect; any other is a
node failure, and the run's verdict is unknown (kchaos/verdict.py).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from nemesis.effects import explained

log = logging.getLogger("kchaos.liveness")
INTERVAL = 1.0      # seconds between looks: a remote node's look is a command


@dataclass(frozen=True)
class Death:
    node: str
    daemon: str
    phase: str          # the run's phase it was seen in
    at: float           # seconds into the run

    def __str__(self) -> str:
        return (f"{self.node}: the {self.daemon} died unasked in the {self.phase} phase, "
                f"{self.at:.0f} s into the run")


class LivenessWatch:
    """Polls `cluster.deaths()` in a thread while it runs; `phase` is set
    by the run as it moves on. `stop()` looks a last time and returns every
    death seen."""

    def __init__(self, cluster, started: float, interval: float = INTERVAL):
        self.cluster, self.started, self.interval = cluster, started, interval
        self.phase = "setup"
        self.deaths: list[Death] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="liveness", daemon=True)

    def start(self) -> "LivenessWatch":
        self._thread.start()
        return self

    def look(self) -> None:
        phase = self.phase
        try:
            found = self.cluster.deaths()
        except Exception:  # noqa: BLE001 — a node that did not answer: look again
            log.exception("looking for dead daemons failed")
            return
        for node, daemon, seen in found:
            self.deaths.append(Death(node, daemon, phase, round(seen - self.started, 1)))

    def stop(self) -> list[Death]:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.look()
        return self.deaths

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.look()


def judged(deaths: list[Death], realised: list[dict], logs) -> tuple[list[str], list[str]]:
    """(node failures, fault effects): each death as a line of the outcome;
    logs(node) is the text of the node's DB logs."""
    failures, effects = [], []
    for death in deaths:
        line = explained(death.node, realised, logs(death.node))
        if line is None:
            failures.append(str(death))
        else:
            effects.append(f"{death}, of the disk errors injected on its node: {line}")
    return failures, effects
