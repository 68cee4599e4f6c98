"""The disk faults on a real reference broker: losing unsynced writes with
and without fsync, a stall timing a produce out, and a follower that
outlives a spell of EIO. Root and /dev/fuse only; every gate is unmounted in
`finally`."""

from __future__ import annotations

import os
import random
import time

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting FUSE needs root"),
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse"),
]
pytest.importorskip("mfusepy", reason="the disk gate needs mfusepy and libfuse3")

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

from cluster.db import ReferenceDB  # noqa: E402
from nemesis.core import Cluster  # noqa: E402
from nemesis.disk.fault import DiskFault, heal, mount, unmount_all  # noqa: E402
from tests.cluster.conftest import make_backend, wait_until  # noqa: E402

BROKER_SETTINGS = ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
                   "offsets.topic.num.partitions=1", "default.replication.factor=1"]
QUIET = {"log_level": 2}


@pytest.fixture(scope="module")
def broker_node(tmp_path_factory):
    """One node (its own network namespace) with a gate under its data
    directory, writeback delay 60 s: nothing is written back unasked."""
    backend = make_backend("netns", tmp_path_factory.mktemp("disk-broker") / "nodes", 1)
    backend.setup()
    try:
        mount(backend.nodes[0], writeback_delay=60)
        yield backend.nodes[0]
    finally:
        backend.nodes[0].stop_all()     # SIGKILLs the gate too: its dead mount is
        problems = unmount_all(backend.nodes)   # detached in the host's mount namespace
        backend.teardown()
        assert problems == []


def start_broker(node, config=()) -> tuple[ReferenceDB, Cluster]:
    db = ReferenceDB(config=[*BROKER_SETTINGS, *config])
    db.start_all([node], timeout=30)
    admin = AdminClient({"bootstrap.servers": db.bootstrap_servers(), **QUIET})
    admin.create_topics([NewTopic("t", 1, 1)])["t"].result(20)
    db.wait_ready(20)
    return db, Cluster([node], db, db.bootstrap_servers(), ["t"], 1)


def produce(bootstrap: str, count: int, timeout_ms: int = 20000) -> list:
    """Send count records with acks=1; the delivery errors (None: acked)."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0,
                         "message.timeout.ms": timeout_ms, **QUIET})
    errors = []
    for i in range(count):
        producer.produce("t", f"v{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: errors.append(err))
    producer.flush(timeout_ms / 1000 + 10)
    return errors


def end_offset(bootstrap: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "end", **QUIET})
    try:
        return consumer.get_watermark_offsets(TopicPartition("t", 0), timeout=10)[1]
    finally:
        consumer.close()


@pytest.mark.parametrize("flush", [False, True], ids=["no-fsync", "flush-every-message"])
def test_lose_unsynced_on_a_broker(broker_node, flush):
    """Acknowledged with acks=1 but never fsynced (the broker's default,
    like Kafka's): gone after a crash plus power loss. With
    log.flush.interval.messages=1 every record was fsynced: nothing lost."""
    db, cluster = start_broker(broker_node, ["log.flush.interval.messages=1"] if flush else [])
    try:
        assert produce(cluster.bootstrap, 200) == [None] * 200
        assert end_offset(cluster.bootstrap) == 200
        fault = DiskFault("lose-unsynced", targets="all")
        started = fault.start(cluster, random.Random(1))
        assert started["nodes"] == [broker_node.name] and not db.alive(broker_node)
        assert fault.stop(cluster) == {"mode": "lose-unsynced", "nodes": [broker_node.name]}
        db.wait_ready(30)
        if flush:
            assert end_offset(cluster.bootstrap) == 200
        else:
            assert started["dropped_bytes"] > 0
            assert end_offset(cluster.bootstrap) < 200
    finally:
        db.teardown(broker_node)


def test_stall_times_out_a_produce_until_stopped(broker_node):
    db, cluster = start_broker(broker_node)
    fault = DiskFault("stall", targets="one")
    try:
        assert fault.start(cluster, random.Random(1))["nodes"] == [broker_node.name]
        errors = produce(cluster.bootstrap, 1, timeout_ms=2000)
        assert len(errors) == 1 and errors[0] is not None, errors
        fault.stop(cluster)
        db.wait_ready(30)
        assert produce(cluster.bootstrap, 1) == [None]
    finally:
        heal(cluster)
        db.teardown(broker_node)


def test_a_follower_whose_disk_failed_for_a_while_catches_up_and_rejoins(tmp_path):
    """EIO on a follower's appends (disk-errors) is not the end of its
    replication: its fetcher backs off and fetches again, so once the
    errors stop it catches up and rejoins the ISR, and acks=all with
    min.insync.replicas=2 works again. (Before: the fetcher's task died on
    the first EIO and the partition's high watermark stood still for good.)
    Its high watermark checkpoints go on too."""
    backend = make_backend("netns", tmp_path / "nodes", 2)
    backend.setup()
    db = None
    try:
        for node in backend.nodes:
            mount(node)
        db = ReferenceDB(config=[*BROKER_SETTINGS, "replica.lag.time.max.ms=2000",
                                 "min.insync.replicas=2",
                                 "replica.high.watermark.checkpoint.interval.ms=200"])
        db.start_all(backend.nodes, timeout=30)
        admin = AdminClient({"bootstrap.servers": db.bootstrap_servers(), **QUIET})
        admin.create_topics([NewTopic("t", 1, 2)])["t"].result(20)
        db.wait_ready(20)
        names = lambda: sorted(n.name for n in db.in_sync("t", 0) or [])  # noqa: E731
        wait_until(lambda: names() == ["n1", "n2"], "both replicas in the ISR", 20)
        leader = db.primary("t", 0)
        follower = next(n for n in backend.nodes if n.name != leader.name)

        def broker_log() -> str:
            return (follower.workdir / "broker.log").read_text()

        cluster = Cluster(backend.nodes, db, db.bootstrap_servers(), ["t"], 1)
        fault = DiskFault("errors", targets=[follower.name])
        fault.start(cluster, random.Random(1))
        try:
            # acks=1: the leader's disk is fine; the follower's appends of them fail.
            assert produce(db.bootstrap_servers(), 20) == [None] * 20
            wait_until(lambda: "disk error applying a fetch" in broker_log(), "a failed append "
                       "on the follower", 20)
            time.sleep(1.0)         # five checkpoint intervals: they fail too
        finally:
            fault.stop(cluster)
        stopped = time.time()
        checkpoint = follower.workdir / "data" / "replication-offset-checkpoint"
        wait_until(lambda: checkpoint.exists() and checkpoint.stat().st_mtime > stopped,
                   "a checkpoint after the errors", 10)
        producer = Producer({"bootstrap.servers": db.bootstrap_servers(), "acks": "all",
                             "message.timeout.ms": 10000, **QUIET})
        errors = []
        producer.produce("t", b"after", partition=0, on_delivery=lambda e, m: errors.append(e))
        producer.flush(20)
        assert errors == [None]                 # the follower has all 21: it fetched again
        assert end_offset(db.bootstrap_servers()) == 21 and names() == ["n1", "n2"]
        assert "high watermark checkpoint failed" in broker_log()
    finally:
        if db is not None:
            for node in backend.nodes:
                db.teardown(node)
        problems = unmount_all(backend.nodes)
        backend.teardown()
        assert problems == []
