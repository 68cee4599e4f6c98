"""System specs (`--db command`): parsing with errors that name the file
and key, placeholders filled per node, and a broker that never becomes
ready failing with its node's log tail."""

from __future__ import annotations

from pathlib import Path

import pytest

from cluster.command_db import CommandDB
from cluster.system_spec import SpecError, load_spec, parse_spec
from tests.cluster.conftest import make_backend

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "systems"


@pytest.mark.parametrize("name", ["reference", "kafka-kraft", "redpanda"])
def test_the_example_specs_load(name):
    spec = load_spec(EXAMPLES / f"{name}.toml")
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
