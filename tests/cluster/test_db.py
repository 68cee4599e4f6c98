"""DB adapters on real nodes: the reference broker as a 3-node cluster on
each backend (ready, a real client's round trip, pause/resume, kill/start,
collected logs, nothing left after teardown), and an external cluster that
kchaos reaches but does not manage.

Broker timeouts are shortened (session 3 s) so a restart settles quickly;
every wait is bounded.
"""

from __future__ import annotations

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.broker_process import free_port
from cluster.db import DB, ExternalDB, Kill, LogFiles, NotSupported, Pause, ReferenceDB
from cluster.local import LocalNode
from cluster.local_cluster import LocalCluster
from cluster.node import PortInUse
from tests.cluster.conftest import IS_ROOT, KINDS, leftovers, make_backend

SETTINGS = ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
            "offsets.topic.num.partitions=1", "default.replication.factor=3"]
TIMEOUT = 60.0
QUIET = {"log_level": 2}  # librdkafka's connection-refused noise while brokers move


def round_trip(bootstrap: str, topic: str, count: int = 10) -> list[bytes]:
    """Produce count values with acks=all, then read the partition from the start."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "message.timeout.ms": 30000, **QUIET})
    values = [f"{topic}-{i}".encode() for i in range(count)]
    for value in values:
        producer.produce(topic, value, partition=0)
    assert producer.flush(40) == 0, "messages still in flight after 40 s"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False, **QUIET})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = []
    try:
        for _ in range(100):
            message = consumer.poll(0.3)
            if message is not None and message.error() is None:
                got.append(message.value())
            if len(got) >= count:
                break
    finally:
        consumer.close()
    assert got == values
    return got


def create_topic(db: ReferenceDB, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": db.bootstrap_servers(), **QUIET})
    for future in admin.create_topics([NewTopic(topic, 1, 3)]).values():
        future.result(TIMEOUT)
    db.wait_ready(TIMEOUT)


@pytest.fixture(scope="module", params=KINDS)
def reference(request, tmp_path_factory):
    """A started 3-node reference cluster; the backend, the DB, a marker
    that every daemon's command line holds (its root directory)."""
    root = tmp_path_factory.mktemp(f"reference-{request.param}")
    backend = make_backend(request.param, root / "nodes", node_count=3)
    if backend.namespaced:
        db = ReferenceDB(config=SETTINGS)
    else:
        db = ReferenceDB(config=SETTINGS, port=free_port("127.0.0.11"),
                         controller_port=free_port("127.0.0.11"))
    backend.setup()
    try:
        db.start_all(backend.nodes, timeout=TIMEOUT)
        yield backend, db, str(root)
    finally:
        for node in backend.nodes:
            db.teardown(node)
        backend.teardown()


def test_cluster_is_ready_and_clients_round_trip(reference):
    backend, db, _ = reference
    assert isinstance(db, DB) and isinstance(db, Kill) and isinstance(db, Pause)
    assert isinstance(db, LogFiles)
    assert db.bootstrap_servers() == ",".join(f"{n.address}:{db.port}" for n in backend.nodes)
    assert all(n.is_running("broker") for n in backend.nodes)
    assert backend.nodes[0].is_running("controller")
    assert not any(n.is_running("controller") for n in backend.nodes[1:])
    create_topic(db, "round-trip")
    round_trip(db.bootstrap_servers(), "round-trip")
    with pytest.raises(TimeoutError, match=r"(?s)not ready after 0 s.*--- n1:.*controller.log"
                                           r".*--- n3:.*broker.log"):
        db.wait_ready(0)


def test_paused_broker_answers_nothing_until_resumed(reference):
    backend, db, _ = reference
    n2 = backend.nodes[1]
    only_n2 = {"bootstrap.servers": f"{n2.address}:{db.port}", **QUIET}
    db.pause(n2)
    try:
        assert n2.is_running("broker")
        with pytest.raises(KafkaException):
            AdminClient(only_n2).list_topics(timeout=1.0)
    finally:
        db.resume(n2)
    assert AdminClient(only_n2).list_topics(timeout=10.0).brokers
    db.wait_ready(TIMEOUT)


def test_killed_broker_starts_again_on_its_data(reference):
    backend, db, _ = reference
    n3 = backend.nodes[2]
    create_topic(db, "restart")
    round_trip(db.bootstrap_servers(), "restart", count=5)
    db.kill(n3)
    assert not n3.is_running("broker")
    db.wait_ready(TIMEOUT)  # two brokers are a ready cluster too
    db.start(n3)
    db.start(n3)  # already running: nothing happens
    db.wait_ready(TIMEOUT)
    assert "restart-0" in n3.run(["ls", "data"]).stdout
    meta = AdminClient({"bootstrap.servers": db.bootstrap_servers(), **QUIET}).list_topics(
        timeout=10)
    assert sorted(meta.brokers) == [1, 2, 3]
    create_topic(db, "after-restart")
    round_trip(db.bootstrap_servers(), "after-restart", count=5)


def test_collect_copies_logs_and_lists_data(reference, tmp_path):
    backend, db, _ = reference
    n1 = backend.nodes[0]
    create_topic(db, "collected")
    round_trip(db.bootstrap_servers(), "collected", count=3)
    dest = tmp_path / "run" / "nodes" / "n1"
    db.collect(n1, dest)
    assert sorted(p.name for p in dest.iterdir()) == [
        "broker.log", "controller.log", "data-listing.txt"]
    assert "node 1 registered" in (dest / "broker.log").read_text()
    assert "controller 0 open" in (dest / "controller.log").read_text()
    listing = dict(line.split("\t") for line in (dest / "data-listing.txt").read_text()
                   .splitlines())
    log_files = [path for path in listing if path.startswith("data/collected-0/")]
    assert log_files and any(int(listing[p]) > 0 for p in log_files)
    assert any(path.startswith("controller/") for path in listing)
    assert db.log_files(backend.nodes[1]) == [backend.nodes[1].workdir / "broker.log"]


def test_a_taken_port_is_named_with_its_owner(reference):
    backend, db, _ = reference
    n2 = backend.nodes[1]
    # Another run's view of n2 (same address and namespace, no daemons of
    # its own): the running broker holds the port, and the error says so.
    again = LocalNode("n2", n2.address, n2.workdir, netns=n2.netns)
    other = ReferenceDB(port=db.port, controller_port=db.controller_port)
    other.bind([backend.nodes[0], again])
    owner = rf"pid {n2.pid('broker')} \(.*reference_broker" if IS_ROOT else "an unknown process"
    with pytest.raises(PortInUse, match=rf"{n2.address}:{db.port} on n2 is already in use by "
                                        rf"{owner}"):
        other.start(again)


def test_teardown_leaves_no_process_even_a_paused_one(reference):
    backend, db, marker = reference
    db.pause(backend.nodes[1])
    for node in backend.nodes:
        db.teardown(node)
    assert not any(n.is_running("broker") or n.is_running("controller") for n in backend.nodes)
    backend.teardown()
    assert leftovers(backend, marker) == []


# -- without a cluster ---------------------------------------------------------

def test_external_db_is_reached_but_not_managed(tmp_path):
    with LocalCluster(tmp_path / "external", 1, config=["offsets.topic.num.partitions=1"]) as ext:
        db = ExternalDB(ext.bootstrap)
        assert isinstance(db, DB)
        assert db.bootstrap_servers() == ext.bootstrap
        round_trip(db.bootstrap_servers(), "external", count=3)
        node = LocalNode("n1", "127.0.0.11", tmp_path / "n1")
        db.setup(node)
        db.collect(node, tmp_path / "collected")
        db.teardown(node)
        assert not (tmp_path / "collected").exists()
        for hurt in (db.kill, db.pause, db.resume, db.start):
            with pytest.raises(NotSupported, match="the external DB cannot .* nodes: kchaos "
                                                   "does not manage that cluster"):
                hurt(node)
        assert ext.brokers[1].running()
    assert issubclass(NotSupported, NotImplementedError)


def test_adapter_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="bootstrap=''"):
        ExternalDB("")
    with pytest.raises(ValueError, match="port=9092 and controller_port=9092"):
        ReferenceDB(port=9092, controller_port=9092)
    db = ReferenceDB()
    with pytest.raises(ValueError, match="ReferenceDB.setup: the DB does not know its nodes"):
        db.setup(LocalNode("n1", "127.0.0.11", tmp_path))
    with pytest.raises(ValueError, match="nodes=\\[\\]"):
        db.bind([])


def test_a_crashed_daemon_fails_wait_ready_at_once(tmp_path):
    backend = make_backend("loopback", tmp_path / "nodes", node_count=1)
    db = ReferenceDB(bugs=["no-such-bug"], port=free_port("127.0.0.11"),
                     controller_port=free_port("127.0.0.11"))
    with backend:
        db.bind(backend.nodes)
        db.setup(backend.nodes[0])
        with pytest.raises(RuntimeError, match="(?s)the broker on n1 exited.*no-such-bug"):
            db.wait_ready(TIMEOUT)
        db.teardown(backend.nodes[0])  # a dead broker tears down fine
