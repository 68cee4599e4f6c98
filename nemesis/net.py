"""Network faults: partitions (grudges) and packet loss between nodes, and
the network part of heal-all.

The one idea: a fault is a grudge — `{node: [nodes it drops packets from]}`
— and a grudge is DROP rules in the receiving node's own firewall chain
(nemesis/firewall.py: INPUT only, matched by source address). A partition
is described by who still hears whom, as a networkx graph; its complement
is the grudge. Packet loss is the same rules with a probability (iptables'
`statistic` match: tc netem needs the sch_netem kernel module, which not
every kernel has).

Clients run in the root namespace and reach nodes from the bridge address,
which no grudge names: a partition splits the cluster, never the clients
from it. Network faults need nodes with network namespaces of their own
(`node.own_network`); on the host network they are refused.

Partition kinds (`PartitionFault(kind)`), n nodes in cluster order:

- `halves`: the first n//2 nodes against the rest.
- `random-halves`: the same after a seeded shuffle.
- `isolate-one`: one random node against the rest.
- `isolate-leader`: the node leading a partition of the first topic (or,
  with target="controller", the active controller) against the rest; a
  random node, said so in the description, when no leader is known.
- `majorities-ring` (Jepsen's): nodes on a shuffled ring each hear their
  neighbours up to k hops either way, the smallest k whose 2k+1 nodes make
  a majority: every node sees a majority and no two the same one. On 3
  nodes the ring is a triangle, which cuts nothing; one edge of it is cut,
  leaving the line a–b–c (still a majority each, all views different, the
  middle one sees everyone: the 3-node bridge).
- `bridge`: the halves of a seeded shuffle, joined by one node (the first
  of the second half) that hears, and is heard by, both.
- `one-way`: a random node (`deaf` in the description) drops everything
  from the other nodes while they still receive what it sends. UDP shows
  the asymmetry; TCP needs both directions, so its connections to the
  deaf node fail either way.
"""

from __future__ import annotations

import itertools
import logging
import random
from collections import defaultdict
from collections.abc import Sequence

import networkx as nx

from cluster.node import Node
from nemesis.core import TARGETS, Cluster, FaultError, choose_targets, names
from nemesis.firewall import (CHAIN, FirewallMissing, add_drops, check_own_network,
                              remove_chain, remove_tagged)

log = logging.getLogger("nemesis")

KINDS = ("halves", "random-halves", "isolate-one", "isolate-leader", "majorities-ring",
         "bridge", "one-way")
# Who leads: the leader of a partition, or the active controller.
LEADER_TARGETS = ("leader", "controller")

# Fault ids for the rules' comments: unique among the faults of this process,
# the only ones that can be active in its namespaces at once.
_serial = itertools.count(1)


# -- grudges: who hears whom, and its complement --------------------------

def grudge(connectivity: nx.Graph) -> dict[str, list[str]]:
    """{node: [nodes it must drop packets from]}: everything connectivity
    does not hear. Undirected edges hear both ways; a directed edge u → v
    means v hears u. Nodes that drop nothing are left out."""
    heard = connectivity if connectivity.is_directed() else connectivity.to_directed()
    cut = nx.complement(heard)
    return {node: sorted(cut.predecessors(node)) for node in sorted(cut)
            if cut.in_degree(node)}


def _components(*groups: Sequence[str]) -> nx.Graph:
    """Each group hears itself and nothing else."""
    return nx.union_all([nx.complete_graph(list(group)) for group in groups])


def halves(order: Sequence[str]) -> nx.Graph:
    """The first len//2 nodes and the rest, each hearing only its own half."""
    middle = len(order) // 2
    return _components(order[:middle], order[middle:])


def isolate(order: Sequence[str], isolated: str) -> nx.Graph:
    """isolated alone; the others hear one another."""
    return _components([isolated], [name for name in order if name != isolated])


def majorities_ring(ring: Sequence[str]) -> nx.Graph:
    """Each node hears its neighbours on the ring up to `reach` hops either
    way, reach the smallest whose 2*reach + 1 nodes are a majority; on 3
    nodes the ring's last edge is cut (see the module docstring)."""
    n = len(ring)
    reach = (n // 2 + 1) // 2
    graph = nx.relabel_nodes(nx.circulant_graph(n, range(1, reach + 1)), dict(enumerate(ring)))
    if 2 * reach + 1 >= n:
        graph.remove_edge(ring[-1], ring[0])
    return graph


def bridge(order: Sequence[str]) -> nx.Graph:
    """Halves as in `halves`, but the first node of the second half hears,
    and is heard by, both."""
    middle = len(order) // 2
    left, right = list(order[:middle]), list(order[middle:])
    return nx.compose(nx.complete_graph(left + right[:1]), nx.complete_graph(right))


def one_way(order: Sequence[str], deaf: str) -> nx.DiGraph:
    """Everyone hears everyone, except that deaf hears no one."""
    graph = nx.complete_graph(list(order), create_using=nx.DiGraph)
    graph.remove_edges_from((other, deaf) for other in order if other != deaf)
    return graph


# -- installing and removing one fault's rules ----------------------------

def _install(cluster: Cluster, tag: str, matches: dict[str, list[list[str]]]) -> None:
    """Add each node's DROP rules; on a failure, take back what went in."""
    done = []
    for name, node_matches in matches.items():
        try:
            add_drops(cluster.node(name), tag, node_matches)
        except FaultError as e:
            _, problems = _remove(cluster, tag, done)
            undo = (f"; taking back the rules on {done} failed too: {problems}" if problems
                    else f"; the rules installed on {done} were taken back" if done else "")
            raise FaultError(f"{e}{undo}") from None
        done.append(name)


def _remove(cluster: Cluster, tag: str, node_names: Sequence[str]
            ) -> tuple[dict[str, int], list[str]]:
    """Delete the rules tagged tag on the nodes: ({node: rules removed},
    problems). One node's failure does not stop the others."""
    removed, problems = {}, []
    for name in node_names:
        try:
            removed[name] = len(remove_tagged(cluster.node(name), tag))
        except FaultError as e:
            problems.append(str(e))
    return removed, problems


def _stopped(tag: str, removed: dict[str, int], problems: list[str]) -> dict[str, int]:
    if problems:
        raise FaultError(f"rules tagged {tag} are left: {'; '.join(problems)} "
                         f"(heal-all removes the whole {CHAIN} chain)")
    return removed


class PartitionFault:
    """A partition of kind `kind` (KINDS, module docstring). `partition` and
    `target` choose whom `isolate-leader` isolates.

    start describes the grudge installed, `nodes` being those that hold one
    (whose firewall got rules), plus the kind's choices (`isolated`, `ring`,
    `bridge`, `deaf`, ...); stop the same grudge and the rules it removed
    per node."""
    start_f, stop_f = "start-partition", "stop-partition"

    def __init__(self, kind: str, *, partition: int | None = None, target: str = "leader"):
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r}: choose one of {', '.join(KINDS)}")
        if target not in LEADER_TARGETS:
            raise ValueError(f"target={target!r}: isolate-leader isolates the 'leader' of a "
                             f"partition or the 'controller'")
        if partition is not None and (isinstance(partition, bool)
                                      or not isinstance(partition, int) or partition < 0):
            raise ValueError(f"partition={partition!r} ({type(partition).__name__}): pass a "
                             f"partition number (0, 1, ...) or None for a random one")
        self.kind, self.partition, self.target = kind, partition, target
        self.tag = f"partition-{next(_serial)}"
        self.grudge: dict[str, list[str]] = {}

    def asked(self) -> dict:
        asked = {"kind": self.kind}
        if self.kind == "isolate-leader":
            asked["target"] = self.target
            if self.target == "leader" and self.partition is not None:
                asked["partition"] = self.partition
        return asked

    def start(self, cluster: Cluster, rng: random.Random) -> dict:
        check_own_network(cluster.nodes)
        least = 3 if self.kind in ("majorities-ring", "bridge") else 2
        if len(cluster.nodes) < least:
            raise FaultError(f"kind={self.kind!r} needs at least {least} nodes; the cluster "
                             f"has {len(cluster.nodes)}")
        connectivity, details = self._connectivity(cluster, rng)
        planned = grudge(connectivity)
        _install(cluster, self.tag, {
            name: [["-s", cluster.node(source).address] for source in sources]
            for name, sources in planned.items()})
        self.grudge = planned
        return {"kind": self.kind, "grudge": planned, "nodes": sorted(planned), **details}

    def _connectivity(self, cluster: Cluster, rng: random.Random) -> tuple[nx.Graph, dict]:
        order = [node.name for node in cluster.nodes]
        if self.kind == "halves":
            return halves(order), {}
        if self.kind == "random-halves":
            shuffled = rng.sample(order, len(order))
            return halves(shuffled), {"order": shuffled}
        if self.kind == "isolate-one":
            isolated = rng.choice(order)
            return isolate(order, isolated), {"isolated": isolated}
        if self.kind == "isolate-leader":
            leader, details = self._leader(cluster, rng)
            return isolate(order, leader.name), {**details, "isolated": leader.name}
        if self.kind == "majorities-ring":
            ring = rng.sample(order, len(order))
            return majorities_ring(ring), {"ring": ring}
        if self.kind == "bridge":
            shuffled = rng.sample(order, len(order))
            return bridge(shuffled), {"bridge": shuffled[len(order) // 2]}
        deaf = rng.choice(order)
        return one_way(order, deaf), {"deaf": deaf}

    def _leader(self, cluster: Cluster, rng: random.Random) -> tuple[Node, dict]:
        if self.target == "controller":
            found, details, what = cluster.controller(), {"target": "controller"}, "controller"
        else:
            partition = (self.partition if self.partition is not None
                         else rng.randrange(max(1, cluster.partitions)))
            found = cluster.leader(partition=partition)
            details = {"target": "leader", "partition": partition}
            what = f"leader of partition {partition}"
        if found is None:
            found = rng.choice(cluster.nodes)
            details["note"] = f"no {what} known: isolated a random node"
        return found, details

    def stop(self, cluster: Cluster) -> dict:
        removed = _stopped(self.tag, *_remove(cluster, self.tag, list(self.grudge)))
        healed, self.grudge = self.grudge, {}
        return {"kind": self.kind, "grudge": healed, "nodes": sorted(healed), "rules": removed}


class PacketLossFault:
    """Packets on the target nodes' links to every other node are dropped
    with `probability`, each direction on its own: the receiving end drops
    what the sending end sent. Links between two targets are lossy too
    (once per direction, not twice); client traffic is not.

    `targets` is one of TARGETS or a list of node names; the description
    names the targets (`nodes`) and every node at the other end of a lossy
    link (`peers`)."""
    start_f, stop_f = "packet-loss", "stop-packet-loss"

    def __init__(self, targets: str | Sequence[str] = "one", *, probability: float = 0.2):
        if isinstance(targets, str):
            if targets not in TARGETS:
                raise ValueError(f"targets={targets!r}: choose one of {', '.join(TARGETS)} or "
                                 f"a list of node names")
        elif not all(isinstance(name, str) for name in targets):
            raise ValueError(f"targets={targets!r}: a list of node names (strings)")
        if (isinstance(probability, bool) or not isinstance(probability, (int, float))
                or not 0 < probability <= 1):
            raise ValueError(f"probability={probability!r}: the share of packets dropped, "
                             f"above 0 and at most 1 (e.g. 0.2)")
        self.targets = targets if isinstance(targets, str) else list(targets)
        self.probability = probability
        self.tag = f"packet-loss-{next(_serial)}"
        self.nodes: list[str] = []
        self.peers: list[str] = []
        self.senders: dict[str, list[str]] = {}     # receiving node → nodes it drops from

    def asked(self) -> dict:
        return {"targets": self.targets, "probability": self.probability}

    def start(self, cluster: Cluster, rng: random.Random) -> dict:
        check_own_network(cluster.nodes)
        if len(cluster.nodes) < 2:
            raise FaultError("packet loss between nodes needs at least 2 nodes; the cluster "
                             "has 1")
        chosen = choose_targets(cluster, self.targets, rng)
        links = {pair for node in chosen for other in cluster.nodes if other is not node
                 for pair in ((node.name, other.name), (other.name, node.name))}
        senders = defaultdict(list)
        for receiver, source in sorted((receiver, source) for source, receiver in links):
            senders[receiver].append(source)
        lossy = ["-m", "statistic", "--mode", "random", "--probability", str(self.probability)]
        _install(cluster, self.tag, {
            receiver: [["-s", cluster.node(source).address, *lossy] for source in sources]
            for receiver, sources in senders.items()})
        self.senders = dict(senders)
        self.nodes = names(chosen)
        self.peers = sorted({other.name for node in chosen for other in cluster.nodes
                             if other is not node})
        return {"nodes": self.nodes, "probability": self.probability, "peers": self.peers}

    def stop(self, cluster: Cluster) -> dict:
        removed = _stopped(self.tag, *_remove(cluster, self.tag, list(self.senders)))
        done = {"nodes": self.nodes, "probability": self.probability, "peers": self.peers,
                "rules": removed}
        self.senders, self.nodes, self.peers = {}, [], []
        return done


# -- heal ------------------------------------------------------------------

def heal(cluster: Cluster) -> list[str]:
    """heal_nodes on the cluster's nodes."""
    return heal_nodes(cluster.nodes)


def heal_nodes(nodes: Sequence[Node]) -> list[str]:
    """Remove our chain and its jumps on every node with a network of its
    own, whatever faults it holds; the problems, one string per node that
    failed (the others are healed all the same). Nodes on the host network
    never got rules; a node where iptables cannot run holds none either."""
    problems = []
    for node in nodes:
        if getattr(node, "own_network", False) is not True:
            continue
        try:
            rules = remove_chain(node)
        except FirewallMissing:
            continue
        except Exception as e:  # noqa: BLE001 — one node's failure must not leave the rest cut
            problems.append(f"{node.name}: removing the {CHAIN} chain failed: "
                            f"{type(e).__name__}: {e}")
            continue
        if rules:
            log.info("heal: %d rule(s) of the %s chain removed on %s", rules, CHAIN, node.name)
    return problems
