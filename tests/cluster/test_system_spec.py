"""System specs (`--db command`): parsing with errors that name the file
and key, placeholders filled per node, and a broker that never becomes
ready failing with its node's log tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.command_db import CommandDB
from cluster.kafka import spec_path
from cluster.system_spec import SpecError, load_spec, parse_spec
from tests.cluster.conftest import make_backend

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "systems"


@pytest.mark.parametrize("path", [EXAMPLES / "reference.toml", EXAMPLES / "redpanda.toml",
                                  spec_path(), spec_path(quorum=True)],
                         ids=["reference", "redpanda", "kafka", "kafka-quorum"])
def test_the_example_and_shipped_specs_load(path):
    spec = load_spec(path)
    assert spec.port == 9092 and spec.broker in [d.name for d in spec.daemons]


def minimal(**extra) -> dict:
    return {"name": "x", "port": 9092, "broker": "b",
            "daemon": [{"name": "b", "argv": ["run", "{address}:{port}"]}], **extra}


@pytest.mark.parametrize("body, message", [
    ({"name": "x", "port": 9092, "broker": "b"}, "daemon: missing"),
    (minimal(port=0), "port: 0 is not a TCP port"),
    (minimal(broker="nope"), "broker: 'nope' is not one of the daemons"),
    (minimal(daemon=[{"name": "b", "argv": "run it"}]), r"daemon\[0\].argv: a list of strings"),
    (minimal(daemon=[{"name": "b", "argv": ["run", "{host}"]}]),
     r"unknown placeholder \{host\}"),
    (minimal(daemon=[{"name": "b", "argv": ["x"], "stop_signal": "SIGNOPE"}]),
     "is not a signal name"),
    (minimal(file=[{"path": "../etc/passwd", "text": ""}]), "a path relative to"),
    (minimal(colour="blue"), "colour: not a spec key"),
    (minimal(daemon=[{"name": "b", "argv": ["x"], "on": "some"}]),
     r"daemon\[0\].on: 'some': one of 'all', 'first', 'brokers', 'controllers'"),
    (minimal(daemon=[{"name": "b", "argv": ["x"]}, {"name": "c", "argv": ["y"],
                                                     "on": "controllers"}]),
     "controllers: daemons or files are on \"controllers\", but the spec has none"),
    (minimal(controllers=3, daemon=[{"name": "b", "argv": ["x"], "on": "controllers"}]),
     "broker: 'b' runs on the controller nodes"),
    (minimal(controllers=-1), r"controllers: -1: the number of controller nodes"),
    (minimal(distribution="redpanda"), "distribution: 'redpanda': kchaos brings only 'kafka'"),
    (minimal(daemon=[{"name": "b", "argv": ["{java}", "-cp", "{dist}/*"]}]),
     r"unknown placeholder \{java\}.*needs distribution = \"kafka\""),
])
def test_bad_specs_are_named(body, message):
    with pytest.raises(SpecError, match=message):
        parse_spec(body, "my.toml")


def test_missing_and_malformed_files(tmp_path):
    with pytest.raises(SpecError, match="no such system spec"):
        load_spec(tmp_path / "none.toml")
    (tmp_path / "bad.toml").write_text("name = ")
    with pytest.raises(SpecError, match="bad.toml: not valid TOML"):
        load_spec(tmp_path / "bad.toml")


def test_placeholders_are_filled_per_node(tmp_path):
    spec = parse_spec(minimal(peer="{node_id}@{address}:9093"))
    with make_backend("loopback", tmp_path / "nodes", node_count=2) as backend:
        db = CommandDB(spec)
        db.bind(backend.nodes)
        values = db.values(backend.nodes[1])
        assert values["node_id"] == 2 and values["port"] == 9092
        assert values["peers"] == "1@127.0.0.11:9093,2@127.0.0.12:9093"
        assert values["data_dir"] == str(backend.nodes[1].workdir / "data")


def test_controllers_have_nodes_of_their_own_and_form_the_quorum(tmp_path):
    """Brokers on the first nodes, the spec's controllers on the last ones;
    {peers} lists only the controllers; every daemon of a node is killed."""
    spec = parse_spec(minimal(
        controllers=2, peer="{node_id}@{address}:9093",
        daemon=[{"name": "b", "argv": ["sleep", "600"], "on": "brokers"},
                {"name": "c", "argv": ["sleep", "600"], "on": "controllers"},
                {"name": "agent", "argv": ["sleep", "600"]}],
        file=[{"path": "b.properties", "on": "brokers", "text": "roles=broker {config}"},
              {"path": "c.properties", "on": "controllers", "text": "voters={peers}"}]))
    with make_backend("loopback", tmp_path / "nodes", node_count=4) as backend:
        db = CommandDB(spec, config=["a=1", "b=2"])
        db.bind(backend.nodes)
        n1, n2, n3, n4 = backend.nodes
        assert [n.name for n in db.broker_nodes()] == ["n1", "n2"]
        assert db.daemons_on(n1) == ["b", "agent"] and db.daemons_on(n3) == ["c", "agent"]
        assert db.values(n1)["peers"] == "3@127.0.0.13:9093,4@127.0.0.14:9093"
        assert db.values(n1)["replication_factor"] == 2
        assert db.values(n1)["min_insync_replicas"] == 2
        for node in backend.nodes:
            db.setup(node)
        assert n1.get("b.properties") == b"roles=broker a=1\nb=2"
        assert not (n1.workdir / "c.properties").exists()
        assert n4.get("c.properties") == b"voters=3@127.0.0.13:9093,4@127.0.0.14:9093"
        assert db.alive(n3)
        db.kill(n3)
        assert not n3.is_running("c") and not n3.is_running("agent") and not db.alive(n3)
        db.start(n3)
        assert db.alive(n3)
        for node in backend.nodes:
            db.teardown(node)
    with pytest.raises(ValueError, match="runs 2 controller nodes and needs a broker node"):
        CommandDB(spec).bind(backend.nodes[:2])


def test_a_broker_that_never_gets_ready_fails_with_its_log_tail(tmp_path):
    spec = parse_spec(minimal(daemon=[
        {"name": "b", "argv": ["sh", "-c", "echo 'listening on {address}:{port} soon'; "
                                           "sleep 600"]}]))
    with make_backend("loopback", tmp_path / "nodes", node_count=1) as backend:
        db = CommandDB(spec)
        with pytest.raises(TimeoutError, match=r"(?s)not ready after 2 s: brokers not "
                           r"listening yet on port 9092.*--- n1:.*b\.log\n"
                           r"listening on 127\.0\.0\.11:9092 soon"):
            db.start_all(backend.nodes, timeout=2)
        spec = parse_spec(minimal(daemon=[{"name": "b", "argv": ["sh", "-c", "echo boom; "
                                                                             "exit 3"]}]))
        db = CommandDB(spec)
        with pytest.raises(RuntimeError, match=r"(?s)the b on n1 exited.*boom"):
            db.start_all(backend.nodes, timeout=20)
        for node in backend.nodes:
            db.teardown(node)


def test_brokers_that_choose_their_own_ids_are_found_by_address(tmp_path):
    """The reference broker told ids 101..103, not 1..N: readiness and the
    role lookups match brokers to nodes by the address each advertises."""
    from cluster.readiness import broker_hosts, partition_state
    from tests.cluster.test_db import create_topic
    reference = load_spec(EXAMPLES / "reference.toml")
    body = {"name": "offset ids", "port": 9092, "broker": "broker", "daemon": [
        {"name": d.name, "on": d.on, "argv": [a.replace("{node_id}", "10{node_id}")
                                              for a in d.argv]}
        for d in reference.daemons]}
    spec = parse_spec(body)
    with make_backend("loopback", tmp_path / "nodes", node_count=3) as backend:
        db = CommandDB(spec)
        try:
            db.start_all(backend.nodes, timeout=60)
            create_topic(db, "t")
            hosts = broker_hosts(db.bootstrap_servers())
            assert sorted(hosts) == [101, 102, 103]
            leader, isr = partition_state(db.bootstrap_servers(), "t", 0)
            assert db.primary("t", 0).address == hosts[leader]
            assert sorted(n.address for n in db.in_sync("t", 0)) == sorted(hosts[i] for i in isr)
        finally:
            for node in backend.nodes:
                db.teardown(node)


def test_heal_starts_a_broker_again_that_died_after_its_first_restart(tmp_path):
    """As a Kafka restarted after disk errors halts on its first flush (the
    kernel reports the write-back error the fault caused to the next fsync):
    heal-all starts it once more, the cluster is ready, and each death is
    told once. The broker here is the reference broker behind a wrapper
    that exits once when told to (a `die-next` file in its node's folder)."""
    from nemesis.core import Cluster
    from nemesis.heal import heal_all
    reference = load_spec(EXAMPLES / "reference.toml")
    once = 'if [ -e die-next ]; then rm die-next; exit 1; fi; exec "$0" "$@"'
    body = {"name": "dies once", "port": 9092, "broker": "broker", "daemon": [
        {"name": d.name, "on": d.on,
         "argv": (["sh", "-c", once] if d.name == "broker" else []) + list(d.argv)}
        for d in reference.daemons]}
    with make_backend("loopback", tmp_path / "nodes", node_count=3) as backend:
        db = CommandDB(parse_spec(body))
        try:
            db.start_all(backend.nodes, timeout=60)
            n2 = backend.nodes[1]
            n2.run(["kill", "-9", str(n2.pid("broker"))])
            (n2.workdir / "die-next").write_text("")
            problems = heal_all(Cluster(backend.nodes, db, db.bootstrap_servers(), [], 1),
                                ready_timeout=30)
            assert problems == [] and n2.is_running("broker")
            assert not (n2.workdir / "die-next").exists()       # it did die once more
            assert [(node, daemon) for node, daemon, _ in db.deaths()] == [
                ("n2", "broker"), ("n2", "broker")]
        finally:
            for node in backend.nodes:
                db.teardown(node)
