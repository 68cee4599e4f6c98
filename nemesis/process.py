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

from cluster.db import Kill, Pause
from nemesis.core import Cluster, FaultError, choose_targets, names


def only_broker(db, broker_only: bool) -> dict:
    """The keyword a DB adapter's kill and pause take to spare all but the
    broker daemon (cluster/db.py, cluster/command_db.py)."""
    return {"daemon": db.broker_daemon} if broker_only else {}


class _SignalFault:
    """Hurt the DB on the targets at start, help it at stop: everything
    the DB runs on each node, or with `broker_only` its broker alone (the
    validation recipes keep the reference broker's controller, which
    shares the first node, out of their scenarios)."""
    start_f = stop_f = ""
    capability: type = object       # the DB protocol (cluster/db.py) hurt and help use

    def hurt(self, db, node) -> None:
        raise NotImplementedError

    def help(self, db, node) -> None:
        raise NotImplementedError

    def __init__(self, targets="one", broker_only: bool = False):
        self.targets = targets
        self.broker_only = broker_only
        self.nodes: list = []

    def asked(self) -> dict:
        return {"targets": self.targets, **({"broker_only": True} if self.broker_only else {})}

    def start(self, cluster: Cluster, rng: random.Random) -> dict:
        if not isinstance(cluster.db, self.capability):
            raise FaultError(f"the DB adapter {type(cluster.db).__name__} cannot "
                             f"{self.start_f} nodes: drop this fault from --nemesis")
        self.nodes = choose_targets(cluster, self.targets, rng)
        for node in self.nodes:
            self.hurt(cluster.db, node)
        return {**self.asked(), "nodes": names(self.nodes)}

    def stop(self, cluster: Cluster) -> dict:
        for node in self.nodes:
            self.help(cluster.db, node)
        return {"nodes": names(self.nodes)}


class PauseFault(_SignalFault):
    start_f, stop_f, capability = "pause", "resume", Pause

    def hurt(self, db: Pause, node) -> None:
        db.pause(node, **only_broker(db, self.broker_only))

    def help(self, db: Pause, node) -> None:
        db.resume(node)


class KillFault(_SignalFault):
    """SIGKILL the brokers on the targets; stop starts them again (the
    restart is not waited for: a broker that cannot come back shows in the
    run's outcome and in heal-all's wait)."""
    start_f, stop_f, capability = "kill", "restart", Kill

    def hurt(self, db: Kill, node) -> None:
        db.kill(node, **only_broker(db, self.broker_only))

    def help(self, db: Kill, node) -> None:
        db.start(node)


def heal(cluster: Cluster) -> list[str]:
    """Resume every node's DB (a SIGCONT to a running process is harmless)
    and start those that are not running. Problems are returned, not
    raised, so one node's failure does not keep the others unhealed."""
    problems, db = [], cluster.db
    for node in cluster.nodes:
        try:
            if isinstance(db, Pause):
                db.resume(node)
            if isinstance(db, Kill) and not db.alive(node):
                db.start(node)
        except Exception as e:  # noqa: BLE001 — reported, the next node still healed
            problems.append(f"{node.name}: {e}")
    return problems
