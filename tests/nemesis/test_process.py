"""Process faults on a real 3-node reference cluster: a paused broker does
not answer, a killed one is gone and comes back, the nemesis records what
it did (and what it could not do), and heal-all brings back whatever is
paused or dead. Target choice is checked on its own.

The cluster runs on loopback addresses (process faults need no
namespaces); broker timeouts are short so it settles quickly.
"""

from __future__ import annotations

import json
import random
import socket

import pytest

from cluster.db import ReferenceDB
from cluster.readiness import metadata_problem
from history_analysis.history.writer import HistoryWriter
from nemesis.core import Cluster, choose_targets
from nemesis.heal import heal_all
from nemesis.process import KillFault, PauseFault
from nemesis.runner import Nemesis
from tests.cluster.conftest import make_backend, wait_until

SETTINGS = ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
            "offsets.topic.num.partitions=1"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    backend = make_backend("loopback", tmp_path_factory.mktemp("process"), 3)
    backend.setup()
    db = ReferenceDB(config=SETTINGS)
    try:
        db.start_all(backend.nodes, timeout=60)
        yield Cluster(list(backend.nodes), db, db.bootstrap_servers())
    finally:
        for node in backend.nodes:
            db.teardown(node)
        backend.teardown()


def answers(cluster: Cluster, node, timeout: float = 2.0) -> bool:
    """Whether the broker on node answers a Metadata request by itself."""
    own = f"{node.address}:{cluster.db.port}"
    return metadata_problem(own, {cluster.db.node_id(node)}, timeout) is None


def refuses(node, port: int) -> bool:
    try:
        socket.create_connection((node.address, port), timeout=1).close()
        return False
    except ConnectionRefusedError:
        return True


def history_of(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_paused_broker_does_not_answer_until_resumed(cluster):
    fault = PauseFault(["n2"])
    done = fault.start(cluster, random.Random(1))
    n2 = cluster.node("n2")
    try:
        assert done == {"targets": ["n2"], "nodes": ["n2"]}
        assert cluster.db.alive(n2)                  # it runs, frozen
        assert not answers(cluster, n2)
        assert answers(cluster, cluster.node("n1"))
    finally:
        assert fault.stop(cluster) == {"nodes": ["n2"]}
    assert wait_until(lambda: answers(cluster, n2), "n2 answers again", 10)


def test_a_killed_broker_is_gone_and_restarts_on_its_data(cluster):
    fault = KillFault(["n3"])
    n3 = cluster.node("n3")
    fault.start(cluster, random.Random(1))
    assert not cluster.db.alive(n3)
    assert refuses(n3, cluster.db.port)
    fault.stop(cluster)
    assert cluster.db.alive(n3)
    cluster.db.wait_ready(30)
    assert answers(cluster, n3)


def test_the_nemesis_records_what_it_did_and_what_failed(cluster, tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        nemesis = Nemesis(cluster, history, seed=3)
        pause = PauseFault("minority")
        done = nemesis.start(pause)
        assert nemesis.active == [pause]
        nemesis.stop(pause)
        assert nemesis.start(KillFault(["n9"])) is None       # no such node
        assert nemesis.active == []
    events = history_of(path)
    assert [(e["process"], e["type"], e["f"]) for e in events] == [
        (-1, "invoke", "pause"), (-1, "info", "pause"), (-1, "invoke", "resume"),
        (-1, "info", "resume"), (-1, "invoke", "kill"), (-1, "fail", "kill")]
    assert events[0]["value"] == {"targets": "minority"}
    assert events[1]["value"] == done and len(done["nodes"]) == 1
    assert "n9" in events[5]["error"] and "not one of" in events[5]["error"]
    assert [e["f"] for e in nemesis.realised] == ["pause", "resume", "kill"]


def test_heal_all_resumes_the_paused_and_restarts_the_dead(cluster, tmp_path):
    n1, n2 = cluster.node("n1"), cluster.node("n2")
    cluster.db.pause(n1)
    cluster.db.kill(n2)
    with HistoryWriter(tmp_path / "history.jsonl") as history:
        nemesis = Nemesis(cluster, history)
        nemesis.active.append(PauseFault(["n1"]))       # as if a script left it running
        assert nemesis.heal() == []
    assert cluster.db.alive(n2)
    assert answers(cluster, n1) and answers(cluster, n2)
    events = history_of(tmp_path / "history.jsonl")
    assert [e["f"] for e in events] == ["resume", "resume", "heal", "heal"]
    assert events[-1]["value"] == {"problems": []}
    assert heal_all(cluster) == []                      # idempotent


def test_heal_all_reports_what_it_cannot_heal(cluster):
    class Broken:
        nodes = cluster.nodes

        def pause(self, node):
            pass

        def resume(self, node):
            raise OSError(f"cannot reach {node.name}")

    problems = heal_all(Cluster(cluster.nodes, Broken()))
    assert problems == [f"n{i}: cannot reach n{i}" for i in (1, 2, 3)]


class FixedLeader:
    """A DB adapter (the `Primary` capability) whose only answer is who leads."""

    def __init__(self, leader):
        self.leader = leader

    def primary(self, topic, partition):
        return self.leader

    def in_sync(self, topic, partition):
        return None

    def controller_node(self):
        return None

    def group_coordinator(self, group):
        return None


@pytest.mark.parametrize("count, spec, size", [
    (3, "one", 1), (3, "minority", 1), (3, "majority", 2), (3, "all", 3),
    (5, "minority", 2), (5, "majority", 3), (4, "minority", 1), (4, "majority", 3)])
def test_target_sizes(tmp_path, count, spec, size):
    nodes = make_backend("loopback", tmp_path, count).nodes
    chosen = choose_targets(Cluster(nodes, object()), spec, random.Random(0))
    assert len(chosen) == len({n.name for n in chosen}) == size


def test_leader_targets_follow_metadata_or_fall_back(tmp_path):
    nodes = make_backend("loopback", tmp_path, 3).nodes
    rng = random.Random(0)
    with_leader = Cluster(nodes, FixedLeader(nodes[2]), topics=["t"], partitions=4)
    assert choose_targets(with_leader, "leader", rng) == [nodes[2]]
    without = Cluster(nodes, FixedLeader(None), topics=["t"])
    assert choose_targets(without, "leader", rng)[0] in nodes
    with pytest.raises(ValueError, match="targets='most'"):
        choose_targets(without, "most", rng)
    assert choose_targets(without, ["n2", "n1"], rng) == [nodes[1], nodes[0]]


class FixedRoles(FixedLeader):
    """A DB adapter that says who holds each role, or that nobody does:
    the fallbacks cannot be arranged on a real cluster at will."""

    def __init__(self, leader, in_sync, controller, coordinator):
        super().__init__(leader)
        self.isr, self.controller, self.coordinator = in_sync, controller, coordinator

    def in_sync(self, topic, partition):
        return self.isr

    def controller_node(self):
        return self.controller

    def group_coordinator(self, group):
        return self.coordinator


def test_role_targets_follow_the_cluster_or_fall_back(tmp_path):
    n1, n2, n3 = make_backend("loopback", tmp_path, 3).nodes
    rng = random.Random(0)
    roles = Cluster([n1, n2, n3], FixedRoles(n2, [n1, n2, n3], n1, n3), topics=["t"],
                    groups=["g"])
    assert choose_targets(roles, "follower", rng)[0] in (n1, n3)
    leader, follower = choose_targets(roles, "leader-and-follower", rng)
    assert leader == n2 and follower in (n1, n3)
    assert choose_targets(roles, "controller", rng) == [n1]
    assert choose_targets(roles, "coordinator", rng) == [n3]
    # Alone in its ISR the leader has no follower: a random node instead;
    # nobody leads, nobody answers, no group: random nodes, one each.
    alone = Cluster([n1, n2, n3], FixedRoles(n2, [n2], None, None), topics=["t"])
    assert choose_targets(alone, "leader-and-follower", rng) == [n2]
    for spec in ("follower", "controller", "coordinator"):
        assert len(choose_targets(alone, spec, rng)) == 1


def test_roles_come_from_the_running_cluster(cluster):
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("roles", 1, 3)])["roles"].result(30)
    roles = Cluster(cluster.nodes, cluster.db, cluster.bootstrap, topics=["roles"],
                    groups=["kchaos-roles"])
    wait_until(lambda: len(roles.in_sync() or []) == 3, "roles-0's ISR whole", 30)
    rng = random.Random(1)
    [leader] = choose_targets(roles, "leader", rng)
    [follower] = choose_targets(roles, "follower", rng)
    assert leader == roles.leader() and follower in roles.in_sync() and follower != leader
    assert choose_targets(roles, "controller", rng) == [cluster.nodes[0]]
    # One __consumer_offsets partition: its leader coordinates every group.
    wait_until(lambda: roles.coordinator("kchaos-roles") is not None, "a coordinator", 30)
    assert choose_targets(roles, "coordinator", rng) == \
        [roles.leader("__consumer_offsets", 0)]


def test_a_kill_of_the_controller_node_takes_the_controller_and_heal_brings_it_back(cluster):
    n1 = cluster.nodes[0]
    kill = KillFault(["n1"])
    kill.start(cluster, random.Random(0))
    assert not n1.is_running("controller") and not n1.is_running("broker")
    assert refuses(n1, cluster.db.controller_port)
    assert heal_all(cluster) == []
    assert n1.is_running("controller") and n1.is_running("broker")
    for node in cluster.nodes:
        wait_until(lambda node=node: answers(cluster, node), f"{node.name} answers", 60)
