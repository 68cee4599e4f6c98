"""What every fault shares: the cluster it acts on, how targets are chosen,
and the `Fault` protocol (docs/architecture.md).

A fault is a value: built from a plain description (`{"fault": "pause",
"targets": "minority"}`), started once, stopped once. `start` picks its
nodes with the random generator it is given — so a seeded schedule picks
the same nodes again — and returns what it really did, which the history
records beside what was asked. Targets that depend on the cluster's state
(`leader`) are resolved when the fault starts, from cluster metadata.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from cluster.db import Primary
from cluster.node import Node

# --fault-targets: how many and which nodes a pause, kill, disk or
# packet-loss fault hits. The roles after "all" are resolved from the
# cluster's state when the fault starts.
TARGETS = ("one", "minority", "majority", "all", "leader", "follower", "leader-and-follower",
           "controller", "coordinator")


class FaultError(RuntimeError):
    """A fault could not be applied; the history records it as `fail`."""


@dataclass
class Cluster:
    """The nodes, the DB adapter running the system under test on them, and
    where clients connect: everything a fault may touch."""
    nodes: list[Node]
    db: object
    bootstrap: str = ""
    topics: list[str] = field(default_factory=list)
    partitions: int = 1
    groups: list[str] = field(default_factory=list)    # the workload's consumer groups

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise ValueError(f"node={name!r}: not one of {[n.name for n in self.nodes]}")

    def leader(self, topic: str | None = None, partition: int = 0) -> Node | None:
        """The node leading topic-partition (the first topic by default)
        according to cluster metadata; None when it has no leader or the
        DB cannot say (the `Primary` capability)."""
        topic = topic if topic is not None else (self.topics[0] if self.topics else None)
        if not isinstance(self.db, Primary) or topic is None:
            return None
        return self.db.primary(topic, partition)

    def in_sync(self, topic: str | None = None, partition: int = 0) -> list[Node] | None:
        """The nodes in topic-partition's ISR by cluster metadata; None when
        nobody answers or the DB cannot say."""
        topic = topic if topic is not None else (self.topics[0] if self.topics else None)
        if not isinstance(self.db, Primary) or topic is None:
            return None
        return self.db.in_sync(topic, partition)

    def controller(self) -> Node | None:
        """The node hosting the (active) controller, if the DB says."""
        return self.db.controller_node() if isinstance(self.db, Primary) else None

    def coordinator(self, group: str) -> Node | None:
        """The node coordinating `group` (FindCoordinator), if the DB says."""
        return self.db.group_coordinator(group) if isinstance(self.db, Primary) else None


def choose_targets(cluster: Cluster, spec: str | Sequence[str], rng: random.Random, *,
                   partition: int | None = None) -> list[Node]:
    """Nodes for a target spec: one of TARGETS, or a list of node names.
    `minority` is at least one and fewer than half; `majority` more than
    half. The roles are those of the first topic's `partition` (drawn by
    rng when not given): `leader`; `follower`, one of its in-sync
    followers; `leader-and-follower`, both, as a correlated crash of the
    leader and a replica that could take over; `controller`, the node of the
    active controller; `coordinator`, the coordinator of one of the
    workload's groups. A role nobody holds right now (no leader, no
    answer) falls back to a random node, so the fault still happens; the
    history records the nodes hit."""
    nodes = list(cluster.nodes)
    if not isinstance(spec, str):
        return [cluster.node(name) for name in spec]
    n = len(nodes)
    if spec == "one":
        return [rng.choice(nodes)]
    if spec == "minority":
        return rng.sample(nodes, max(1, (n - 1) // 2))
    if spec == "majority":
        return rng.sample(nodes, n // 2 + 1)
    if spec == "all":
        return nodes
    if spec in ("leader", "follower", "leader-and-follower"):
        if partition is None:
            partition = rng.randrange(max(1, cluster.partitions))
        leader = cluster.leader(partition=partition)
        others = sorted((m for m in cluster.in_sync(partition=partition) or []
                         if leader is None or m.name != leader.name), key=lambda m: m.name)
        follower = rng.choice(others) if others else None
        chosen = {"leader": [leader], "follower": [follower],
                  "leader-and-follower": [leader, follower]}[spec]
        return [m for m in chosen if m is not None] or [rng.choice(nodes)]
    if spec == "controller":
        controller = cluster.controller()
        return [controller] if controller is not None else [rng.choice(nodes)]
    if spec == "coordinator":
        coordinator = cluster.coordinator(rng.choice(cluster.groups)) if cluster.groups \
            else None
        return [coordinator] if coordinator is not None else [rng.choice(nodes)]
    raise ValueError(f"targets={spec!r}: choose one of {', '.join(TARGETS)} or a list of "
                     f"node names")


def names(nodes: Sequence[Node]) -> list[str]:
    return sorted(node.name for node in nodes)


@runtime_checkable
class Fault(Protocol):
    """One fault, from start to stop. `start_f`/`stop_f` are its verbs in
    the history (docs/history.md, nemesis operations)."""
    start_f: str
    stop_f: str

    def asked(self) -> dict:
        """What was asked: the invocation's value."""

    def start(self, cluster: Cluster, rng: random.Random) -> dict:
        """Apply the fault; what was done (raise FaultError if it could not be)."""

    def stop(self, cluster: Cluster) -> dict:
        """Undo exactly this fault; what was done."""
