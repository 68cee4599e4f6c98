"""Network faults, checked with real traffic between network namespaces
(traffic.py): TCP shows who is cut off from whom, UDP shows one-way cuts
and loss. The grudge shapes themselves are pure functions, tested without
root (test_grudges.py).
"""

from __future__ import annotations

import json
import random

import pytest

from cluster.local import LocalNode
from nemesis.core import Cluster, FaultError
from nemesis.net import (PacketLossFault, PartitionFault, grudge, halves, heal, heal_nodes,
                         isolate, majorities_ring)
from tests.cluster.conftest import IS_ROOT, make_backend
from tests.nemesis.traffic import (client_reaches, connectivity, everyone, expected,
                                   listening_namespaces, nonce, received, send, send_from_root)


@pytest.fixture(scope="module")
def backend3(tmp_path_factory):
    if not IS_ROOT:
        pytest.skip("network namespaces need root")
    yield from listening_namespaces(tmp_path_factory, 3)


@pytest.fixture(scope="module")
def backend5(tmp_path_factory):
    if not IS_ROOT:
        pytest.skip("network namespaces need root")
    yield from listening_namespaces(tmp_path_factory, 5)


def _healed_after(backend):
    cluster = Cluster(list(backend.nodes), db=None)
    yield cluster
    assert heal(cluster) == []
    assert not any("KCHAOS" in firewall(node) for node in backend.nodes)


@pytest.fixture
def three(backend3):
    yield from _healed_after(backend3)


@pytest.fixture
def five(backend5):
    yield from _healed_after(backend5)


def firewall(node) -> str:
    return node.run(["iptables", "-w", "-S"]).stdout


@pytest.mark.root
@pytest.mark.parametrize("size", [3, 5])
@pytest.mark.parametrize("kind", ["halves", "isolate-one"])
def test_partition_cuts_exactly_the_grudge_and_never_clients(kind, size, request):
    cluster = request.getfixturevalue("three" if size == 3 else "five")
    names = [n.name for n in cluster.nodes]
    fault = PartitionFault(kind)
    done = fault.start(cluster, random.Random(size))
    if kind == "halves":
        assert done["grudge"] == grudge(halves(names))
    else:
        assert done["grudge"] == grudge(isolate(names, done["isolated"]))
    assert done["nodes"] == sorted(done["grudge"])
    assert connectivity(cluster.nodes) == expected(done["grudge"], names)
    assert client_reaches(cluster.nodes) == set(names)
    stopped = fault.stop(cluster)
    assert stopped["grudge"] == done["grudge"]
    assert stopped["rules"] == {name: len(sources) for name, sources in done["grudge"].items()}
    assert connectivity(cluster.nodes) == everyone(names)


@pytest.mark.root
def test_majorities_ring_and_bridge_are_enforced_on_5(five):
    names = [n.name for n in five.nodes]
    ring = PartitionFault("majorities-ring")
    done = ring.start(five, random.Random(1))
    assert done["grudge"] == grudge(majorities_ring(done["ring"]))
    seen = connectivity(five.nodes)
    assert seen == expected(done["grudge"], names)
    assert all(len(view) == 2 for view in seen.values())           # +itself: 3 of 5
    assert len({frozenset({name, *view}) for name, view in seen.items()}) == 5
    ring.stop(five)

    joined = PartitionFault("bridge")
    done = joined.start(five, random.Random(2))
    seen = connectivity(five.nodes)
    assert seen == expected(done["grudge"], names)
    assert seen[done["bridge"]] == set(names) - {done["bridge"]}
    assert sorted(len(view) for view in seen.values()) == [2, 2, 2, 2, 4]
    assert client_reaches(five.nodes) == set(names)
    joined.stop(five)
    assert connectivity(five.nodes) == everyone(names)


@pytest.mark.root
def test_one_way_the_deaf_node_sends_but_hears_nothing(three):
    fault = PartitionFault("one-way")
    done = fault.start(three, random.Random(3))
    deaf = three.node(done["deaf"])
    others = [node for node in three.nodes if node is not deaf]
    assert done["grudge"] == {deaf.name: sorted(node.name for node in others)}
    for other in others:
        tag = nonce(f"to-deaf-{other.name}")
        send(other, deaf, tag, 20)
        assert received(deaf, tag, 20) == 0
        tag = nonce(f"from-deaf-{other.name}")
        send(deaf, other, tag, 20)
        assert received(other, tag, 20) == 20
    tag = nonce("client")
    send_from_root(deaf, tag, 20)
    assert received(deaf, tag, 20) == 20
    # TCP needs both directions: the deaf node is cut off either way.
    assert connectivity(three.nodes)[deaf.name] == set()
    fault.stop(three)


class Leads:
    """A DB adapter that knows only who leads (the `Primary` capability:
    the leader and the controller), to choose isolate-leader's target."""

    def __init__(self, leader=None, controller=None):
        self.leader, self.controller = leader, controller
        self.asked = []

    def primary(self, topic, partition):
        self.asked.append((topic, partition))
        return self.leader

    def controller_node(self):
        return self.controller

    def in_sync(self, topic, partition):
        return None

    def group_coordinator(self, group):
        return None


@pytest.mark.root
def test_isolate_leader_isolates_the_leader_or_the_controller(three):
    n1, n2, n3 = three.nodes
    names = [n.name for n in three.nodes]
    db = Leads(leader=n2, controller=n3)
    cluster = Cluster(three.nodes, db=db, topics=["t"], partitions=3)
    fault = PartitionFault("isolate-leader", partition=1)
    assert fault.asked() == {"kind": "isolate-leader", "target": "leader", "partition": 1}
    done = fault.start(cluster, random.Random(4))
    assert db.asked == [("t", 1)]
    assert done["isolated"] == "n2" and "note" not in done
    assert done["grudge"] == grudge(isolate(names, "n2"))
    assert connectivity(three.nodes) == {"n1": {"n3"}, "n2": set(), "n3": {"n1"}}
    fault.stop(cluster)

    fault = PartitionFault("isolate-leader", target="controller")
    done = fault.start(cluster, random.Random(4))
    assert done["isolated"] == "n3" and done["target"] == "controller"
    assert connectivity(three.nodes) == {"n1": {"n2"}, "n2": {"n1"}, "n3": set()}
    fault.stop(cluster)


@pytest.mark.root
def test_isolate_leader_without_a_leader_isolates_a_random_node_and_says_so(three):
    names = [n.name for n in three.nodes]
    cluster = Cluster(three.nodes, db=Leads(), topics=["t"], partitions=2)
    done = PartitionFault("isolate-leader").start(cluster, random.Random(5))
    assert done["partition"] in (0, 1)
    assert "no leader of partition" in done["note"]
    assert done["grudge"] == grudge(isolate(names, done["isolated"]))


@pytest.mark.root
def test_same_seed_same_grudge(five):
    for kind in ("random-halves", "isolate-one"):
        grudges = []
        for seed in (7, 7, 8, 9, 10):
            fault = PartitionFault(kind)
            grudges.append(fault.start(five, random.Random(seed))["grudge"])
            fault.stop(five)
        assert grudges[0] == grudges[1]
        assert len({json.dumps(g, sort_keys=True) for g in grudges}) > 1


def ours(listing: str) -> str:
    """A firewall listing without kchaos's chain and jump."""
    return "\n".join(line for line in listing.splitlines() if "KCHAOS" not in line)


@pytest.mark.root
def test_stop_removes_only_its_own_rules_and_heal_removes_all_but_foreign_ones(three):
    names = [n.name for n in three.nodes]
    n1 = three.nodes[0]
    n1.run(["iptables", "-w", "-A", "INPUT", "-s", "203.0.113.9/32", "-j", "ACCEPT"])
    n1.run(["iptables", "-w", "-N", "FOREIGN"])
    try:
        baseline = firewall(n1)
        partition = PartitionFault("halves")                        # n1 | n2 n3
        loss = PacketLossFault(["n2"], probability=1.0)             # n2 cut from every node
        partition.start(three, random.Random(0))
        assert loss.start(three, random.Random(0)) == {
            "nodes": ["n2"], "probability": 1.0, "peers": ["n1", "n3"]}
        assert firewall(n1).index("-A INPUT -j KCHAOS") < firewall(n1).index("203.0.113.9")
        assert connectivity(three.nodes) == {"n1": set(), "n2": set(), "n3": set()}

        stopped = partition.stop(three)
        assert stopped["rules"] == {"n1": 2, "n2": 1, "n3": 1}
        tags = {line.split("--comment ")[1].split()[0] for node in three.nodes
                for line in firewall(node).splitlines() if "--comment" in line}
        assert tags == {loss.tag}
        assert connectivity(three.nodes) == {"n1": {"n3"}, "n2": set(), "n3": {"n1"}}
        assert ours(firewall(n1)) == ours(baseline)

        assert heal(three) == []
        assert connectivity(three.nodes) == everyone(names)
        assert firewall(n1) == baseline
        assert heal(three) == []
        assert firewall(n1) == baseline
        # A stop after heal-all finds nothing left to remove.
        assert loss.stop(three)["rules"] == {"n1": 0, "n2": 0, "n3": 0}
    finally:
        n1.run(["iptables", "-w", "-D", "INPUT", "-s", "203.0.113.9/32", "-j", "ACCEPT"])
        n1.run(["iptables", "-w", "-X", "FOREIGN"])


def broken_node(name: str, netns: str, tmp_path) -> LocalNode:
    """A node in a real namespace whose commands cannot start (its working
    directory is a file)."""
    not_a_dir = tmp_path / f"{name}-workdir"
    not_a_dir.write_text("")
    return LocalNode(name, "198.18.255.1", not_a_dir, netns=netns)


@pytest.mark.root
def test_a_failed_start_takes_back_what_it_installed(three, tmp_path):
    n1, n2, n3 = three.nodes
    # Nodes are installed in name order: n1 and n2 succeed, then the last fails.
    cluster = Cluster([n1, n2, broken_node("zz", n3.netns, tmp_path)], db=None)
    with pytest.raises(FaultError, match=r"on zz: .* could not start.*taken back"):
        PartitionFault("halves").start(cluster, random.Random(0))
    assert not any("--comment" in firewall(node) for node in three.nodes)


@pytest.mark.root
def test_heal_goes_on_past_a_failing_node(three, tmp_path):
    PartitionFault("halves").start(three, random.Random(0))
    # A node whose commands cannot start, and one whose namespace is gone.
    broken = broken_node("broken", three.nodes[0].netns, tmp_path)
    gone = LocalNode("gone", "198.18.255.2", tmp_path, netns=f"{three.nodes[0].netns}-gone")
    problems = heal_nodes([broken, gone, *three.nodes])
    assert len(problems) == 1 and problems[0].startswith("broken: ")
    assert not any("KCHAOS" in firewall(node) for node in three.nodes)


def test_nodes_on_the_host_network_are_refused_and_untouched(tmp_path):
    backend = make_backend("loopback", tmp_path / "nodes", 2)
    backend.setup()
    try:
        ran = []
        for node in backend.nodes:
            node.run = lambda argv, **kwargs: ran.append(argv)
        cluster = Cluster(backend.nodes, db=None)
        for fault in (PartitionFault("halves"), PacketLossFault("one")):
            with pytest.raises(FaultError, match="network faults need network namespaces"):
                fault.start(cluster, random.Random(0))
        assert heal(cluster) == []
        assert ran == []
    finally:
        backend.teardown()


@pytest.mark.root
def test_packet_loss_drops_a_share_both_ways_on_the_targets_links_only(three):
    n1, n2, n3 = three.nodes
    fault = PacketLossFault(["n1"], probability=0.3)
    done = fault.start(three, random.Random(0))
    assert done == {"nodes": ["n1"], "probability": 0.3, "peers": ["n2", "n3"]}
    shares = {}
    for source, target in ((n1, n2), (n2, n1)):
        tag = nonce(f"{source.name}-{target.name}")
        send(source, target, tag, 2000)
        shares[source.name, target.name] = received(target, tag, 2000) / 2000
    # Binomial(2000, 0.7): mean 0.7, standard deviation about 0.01.
    assert all(0.55 <= share <= 0.85 for share in shares.values()), shares
    for source, target in ((n2, n3), (n3, n2)):
        tag = nonce(f"{source.name}-{target.name}")
        send(source, target, tag, 200)
        assert received(target, tag, 200) == 200
    tag = nonce("client")
    send_from_root(n1, tag, 200)
    assert received(n1, tag, 200) == 200
    assert fault.stop(three)["rules"] == {"n1": 2, "n2": 1, "n3": 1}
    tag = nonce("healed")
    send(n2, n1, tag, 200)
    assert received(n1, tag, 200) == 200
