"""Faults on the system under test's processes: pause/resume (SIGSTOP and
SIGCONT) and kill/restart (SIGKILL, then start again on the same data),
through the DB adapter's `Pause` and `Kill` capabilities (cluster/db.py).

A paused broker keeps its sockets open and answers nothing — clients and
peers see timeouts, not refused connections, which is what a GC pause or a
stalled VM looks like. A killed one loses whatever it had not written to
its files; with the disk gate, `DiskFault("lose-unsynced")` also loses what
the files had not made durable.
"""

from __future__ import annotations

import random

from nemesis.core import Cluster, FaultError, choose_targets, names


def only_broker(broker_only: bool) -> dict:
    """The keyword a DB adapter's kill and pause take to spare all but the
    broker (cluster/db.py, ReferenceDB)."""
    return {"daemon": "broker"} if broker_only else {}


def _capable(cluster: Cluster, *methods: str) -> None:
    missing = [m for m in methods if not callable(getattr(cluster.db, m, None))]
    if missing:
        raise FaultError(f"the DB adapter {type(cluster.db).__name__} cannot "
                         f"{', '.join(missing)} nodes: drop this fault from --nemesis")


class _SignalFault:
    """Do `hurt` to the DB on the targets at start, `help` at stop: to
    everything the DB runs on each node, or with `broker_only` to its
    broker alone (the validation recipes keep the reference broker's
    controller, which shares the first node, out of their scenarios)."""
    start_f = stop_f = hurt = help = ""

    def __init__(self, targets="one", broker_only: bool = False):
        self.targets = targets
        self.broker_only = broker_only
        self.nodes: list = []

    def asked(self) -> dict:
        return {"targets": self.targets, **({"broker_only": True} if self.broker_only else {})}

    def start(self, cluster: Cluster, rng: random.Random) -> dict:
        _capable(cluster, self.hurt, self.help)
        self.nodes = choose_targets(cluster, self.targets, rng)
        for node in self.nodes:
            getattr(cluster.db, self.hurt)(node, **only_broker(self.broker_only))
        return {**self.asked(), "nodes": names(self.nodes)}

    def stop(self, cluster: Cluster) -> dict:
        for node in self.nodes:
            getattr(cluster.db, self.help)(node)
        return {"nodes": names(self.nodes)}


class PauseFault(_SignalFault):
    start_f, stop_f, hurt, help = "pause", "resume", "pause", "resume"


class KillFault(_SignalFault):
    """SIGKILL the brokers on the targets; stop starts them again (the
    restart is not waited for: a broker that cannot come back shows in the
    run's outcome and in heal-all's wait)."""
    start_f, stop_f, hurt, help = "kill", "restart", "kill", "start"


def heal(cluster: Cluster) -> list[str]:
    """Resume every node's DB (a SIGCONT to a running process is harmless)
    and start those that are not running. Problems are returned, not
    raised, so one node's failure does not keep the others unhealed."""
    problems = []
    resume = getattr(cluster.db, "resume", None)
    alive, start = getattr(cluster.db, "alive", None), getattr(cluster.db, "start", None)
    for node in cluster.nodes:
        try:
            if resume is not None:
                resume(node)
            if alive is not None and start is not None and not alive(node):
                start(node)
        except Exception as e:  # noqa: BLE001 — reported, the next node still healed
            problems.append(f"{node.name}: {e}")
    return problems
