"""An attached cluster's process faults (`--broker-process`) are verified,
not assumed: a pattern that matches nothing fails the fault, a pause is a
process in the stopped state, a resume one out of it, a kill one gone. The
broker is a real reference broker on loopback, started outside kchaos."""

from __future__ import annotations

import pytest

from cluster.attached_db import AttachedDB
from cluster.broker_process import BrokerProcess
from cluster.local import LocalNode


@pytest.fixture
def theirs(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    node = LocalNode("n1", "127.0.0.1", tmp_path)
    yield broker, node
    broker.process.kill()
    broker.process.wait()


def state(node, pid: int) -> str:
    return node.run(["ps", "-o", "stat=", "-p", str(pid)], check=False).stdout.strip()


def test_a_pattern_that_matches_nothing_fails_pause_and_kill(theirs):
    broker, node = theirs
    db = AttachedDB(f"127.0.0.1:{broker.port}", [node],
                    broker_process="reference_broker --node-id 99")
    for fault in (db.pause, db.kill):
        with pytest.raises(RuntimeError, match=r"n1: no process matches --broker-process "
                                               r"'reference_broker --node-id 99'"):
            fault(node)
    db.resume(node)                 # heal-all resumes every node: nothing paused is fine
    assert state(node, broker.process.pid).startswith(("S", "R"))


def test_pause_resume_and_kill_are_seen_to_happen(theirs):
    broker, node = theirs
    db = AttachedDB(f"127.0.0.1:{broker.port}", [node],
                    broker_process=f"reference_broker .*--listen 127.0.0.1:{broker.port}")
    db.pause(node)
    assert state(node, broker.process.pid).startswith("T")
    db.resume(node)
    assert not state(node, broker.process.pid).startswith("T")
    db.kill(node)
    assert broker.process.wait(10) == -9 and not db.alive(node)
    with pytest.raises(RuntimeError, match="no process matches"):
        db.kill(node)
