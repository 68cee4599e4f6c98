"""Apache Kafka on real nodes (`--db kafka`, cluster/kafka): KRaft combined
mode (the newest release) and a controller quorum of its own (3.9.1), each
ready, a real client's round trip, the active controller found by
DescribeQuorum and moved by a kill, pause and resume; a node that never
becomes ready shows Kafka's own log."""

from __future__ import annotations

import pytest

from cluster.command_db import CommandDB
from cluster.kafka import spec_path
from cluster.kafka.dist import DEFAULT_VERSION, TESTED_VERSIONS
from cluster.node import CommandError
from cluster.system_spec import load_spec
from tests.cluster.conftest import IS_ROOT, make_backend, wait_until
from tests.cluster.test_db import TIMEOUT, create_topic, round_trip

pytestmark = [pytest.mark.root, pytest.mark.skipif(not IS_ROOT, reason="namespaces need root")]


def kafka(*, quorum: bool = False, config=(), version: str = DEFAULT_VERSION) -> CommandDB:
    return CommandDB(load_spec(spec_path(quorum=quorum)), config=list(config),
                     kafka_version=version)


# The older release runs the quorum apart (both modes on both would double
# the time for little more).
@pytest.mark.slow
@pytest.mark.parametrize("quorum, nodes, version", [
    (False, 3, DEFAULT_VERSION), (True, 6, TESTED_VERSIONS[1])],
    ids=[f"combined-{DEFAULT_VERSION}", f"controller-quorum-{TESTED_VERSIONS[1]}"])
def test_kafka_serves_and_its_active_controller_moves_when_killed(tmp_path, quorum, nodes,
                                                                   version):
    with make_backend("netns", tmp_path / "nodes", node_count=nodes) as backend:
        db = kafka(quorum=quorum, version=version)
        try:
            db.start_all(backend.nodes)
            brokers = db.broker_nodes()
            assert [n.name for n in brokers] == ["n1", "n2", "n3"]
            create_topic(db, "t")
            round_trip(db.bootstrap_servers(), "t")
            voters = db.controller_nodes() or backend.nodes
            first = wait_until(db.controller_node, "an active controller", TIMEOUT)
            assert first.name in [n.name for n in voters]
            db.kill(first)
            assert not db.alive(first)
            wait_until(lambda: (db.controller_node() or first).name != first.name,
                       "another controller elected", TIMEOUT)
            db.start(first)
            db.wait_ready(TIMEOUT)
            db.pause(brokers[0])
            db.resume(brokers[0])
            round_trip(db.bootstrap_servers(), "t", count=5)
            assert db.deaths() == []
        finally:
            for node in backend.nodes:
                db.teardown(node)
        for node in backend.nodes:
            log = (node.workdir / f"{db.daemons_on(node)[0]}.log").read_text()
            assert f"Kafka version: {version}" in log


def test_a_kafka_that_never_starts_shows_its_own_log(tmp_path):
    """Kafka's storage tool refuses the setting first: its own error, with
    the node, is the message."""
    with make_backend("netns", tmp_path / "nodes", node_count=1) as backend:
        db = kafka(config=["num.network.threads=zero"])
        with pytest.raises(CommandError, match=r"(?s)on n1: .*StorageTool format.*"
                                               r"Invalid value zero for configuration "
                                               r"num\.network\.threads"):
            db.start_all(backend.nodes, timeout=60)
        for node in backend.nodes:
            db.teardown(node)
