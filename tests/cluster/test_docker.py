"""The docker backend on a real engine: the node image, a 3-node reference
cluster on containers that a real client uses from this host, what the
nemeses do inside containers (iptables partitions, SIGSTOP, SIGKILL, the
FUSE disk gate), cleanup by label, the hand-run compose cluster, and the
one line that says the engine is not there. The Node protocol suite runs
on docker nodes too (test_local.py, kind "docker").

One backend with a running cluster serves the module; the node image is
built once per source digest, so reruns reuse it.
"""

from __future__ import annotations

import random
import subprocess

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.db import ReferenceDB
from cluster.docker import (DEFAULT_SUBNET, DockerBackend, DockerSetupError, DockerUnavailable,
                            remove_leftovers)
from cluster.docker_engine import LABEL, PYTHON_LABEL, RUN_LABEL, connect
from cluster.docker_image import (DOCKER_DIR, NODE_PYTHON, OFFLINE_BASE, REPOSITORY,
                                  source_digest)
from nemesis.core import Cluster
from nemesis.disk import fault
from nemesis.firewall import CHAIN
from nemesis.net import PartitionFault
from nemesis.net import heal as heal_network
from tests.cluster.conftest import wait_until
from tests.cluster.test_db import QUIET, SETTINGS, TIMEOUT, create_topic, round_trip
from tests.docker_support import compose_cluster, docker_backend, needs_docker

# Connects to host:port from inside a node: "ok", or "cut" when nothing answers.
PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=1.5).close()
    print("ok")
except OSError:
    print("cut")
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Three docker nodes running the reference cluster, as a nemesis Cluster."""
    backend = docker_backend(tmp_path_factory.mktemp("docker") / "nodes", node_count=3)
    db = ReferenceDB(config=SETTINGS)
    backend.setup()
    try:
        db.start_all(backend.nodes, timeout=TIMEOUT)
        yield Cluster(backend.nodes, db, db.bootstrap_servers(), topics=["t"]), backend
    finally:
        for node in backend.nodes:
            db.teardown(node)
        backend.teardown()


def reaches(source, target, port: int = 9092) -> bool:
    answer = source.run([source.python, "-c", PROBE, target.address, str(port)], timeout=20)
    return answer.stdout.strip() == "ok"


# -- the image ---------------------------------------------------------------

@needs_docker
def test_node_image_holds_the_broker_and_the_gate_and_no_spark(cluster):
    _, backend = cluster
    node = backend.nodes[0]
    assert node.python == NODE_PYTHON
    for module in ("reference_broker", "nemesis.disk"):
        assert "usage: python -m" in node.run([node.python, "-m", module, "--help"]).stdout
    missing = node.run([node.python, "-c", "import pyspark"], check=False)
    assert "No module named 'pyspark'" in missing.stderr
    for tool in ("iptables", "fusermount3", "setsid", "ss", "pgrep", "sshd"):
        assert node.run(["sh", "-c", f"command -v {tool}"], check=False).returncode == 0, tool
    image = connect().images.get(f"{REPOSITORY}:{source_digest()}")
    assert image.labels[LABEL] == "1" and image.labels[PYTHON_LABEL] == NODE_PYTHON
    # One name for the offline base: the script's default is the Python's.
    assert f'IMAGE="${{1:-{OFFLINE_BASE}}}"' in (DOCKER_DIR / "build-offline-base.sh").read_text()


# -- a reference cluster on containers -----------------------------------------

@needs_docker
def test_reference_cluster_serves_a_client_on_this_host(cluster):
    nemesis_cluster, backend = cluster
    db = nemesis_cluster.db
    assert [n.address for n in backend.nodes] == [
        str(backend.subnet.network_address + i) for i in (11, 12, 13)]
    assert all(n.is_running("broker") for n in backend.nodes)
    assert backend.nodes[0].is_running("controller")
    # Nodes answer to their names on the network too.
    assert backend.nodes[0].run(["getent", "hosts", "n2"]).stdout.split() == [
        backend.nodes[1].address, "n2"]
    create_topic(db, "t")
    round_trip(db.bootstrap_servers(), "t")


@needs_docker
def test_partition_cuts_traffic_between_containers_until_healed(cluster):
    nemesis_cluster, backend = cluster
    n1, n2, n3 = backend.nodes
    assert reaches(n2, n1) and reaches(n1, n2)
    partition = PartitionFault("halves")        # [n1] against [n2, n3]
    try:
        started = partition.start(nemesis_cluster, random.Random(1))
        assert started["grudge"] == {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}
        assert not reaches(n2, n1) and not reaches(n1, n3)
        assert reaches(n2, n3)
        # The rules live in the containers: this host's firewall has no chain
        # of ours, and clients here still reach the isolated node.
        assert f"-A {CHAIN} -s {n2.address}/32" in n1.run(["iptables", "-S", CHAIN]).stdout
        host = subprocess.run(["iptables", "-S"], capture_output=True, text=True).stdout
        assert CHAIN not in host
        assert AdminClient({"bootstrap.servers": f"{n1.address}:9092", **QUIET}).list_topics(
            timeout=10).brokers
        partition.stop(nemesis_cluster)
        assert reaches(n2, n1) and reaches(n1, n3)
    finally:
        assert heal_network(nemesis_cluster) == []
    assert CHAIN not in n1.run(["iptables", "-S"]).stdout
    nemesis_cluster.db.wait_ready(TIMEOUT)


@needs_docker
def test_pause_kill_and_restart_through_reference_db(cluster, tmp_path):
    nemesis_cluster, backend = cluster
    db, n2, n3 = nemesis_cluster.db, backend.nodes[1], backend.nodes[2]
    only_n2 = {"bootstrap.servers": f"{n2.address}:{db.port}", **QUIET}
    db.pause(n2)
    try:
        assert "T" in n2.run(["ps", "-o", "stat=", "-p", str(n2.pid("broker"))]).stdout
        with pytest.raises(KafkaException):
            AdminClient(only_n2).list_topics(timeout=1.0)
    finally:
        db.resume(n2)
    assert AdminClient(only_n2).list_topics(timeout=10.0).brokers

    create_topic(db, "restart")
    round_trip(db.bootstrap_servers(), "restart", count=5)
    db.kill(n3)
    assert not n3.is_running("broker") and db.deaths() == []
    db.start(n3)
    db.wait_ready(TIMEOUT)
    assert "restart-0" in n3.run(["ls", "data"]).stdout
    create_topic(db, "after-restart")
    round_trip(db.bootstrap_servers(), "after-restart", count=5)
    db.collect(n3, tmp_path / "n3")
    assert "node 3 registered" in (tmp_path / "n3" / "broker.log").read_text()


@needs_docker
def test_disk_gate_mounts_in_a_container_and_a_stall_blocks_writes(cluster):
    _, backend = cluster
    node = backend.nodes[2]
    fault.mount(node, directory="gate", writeback_delay=0)
    try:
        assert fault.gate_mounts(node) == [str(node.workdir / "gate")]
        node.run(["sh", "-c", "echo before > gate/f"], timeout=10)
        assert fault.command(node, "stall")["stalled"] is True
        node.start_daemon("writer", ["sh", "-c", "echo stalled > gate/g"])
        wait_until(lambda: fault.command(node, "status")["blocked_ops"],
                   "the write waiting at the gate")
        assert node.is_running("writer")
        fault.command(node, "unstall")
        wait_until(lambda: not node.is_running("writer"), "the write done after unstall")
        assert node.stop_daemon("writer") == 0
        node.run(["sh", "-c", "echo after > gate/h"], timeout=10)
        assert [node.get(f"gate/{name}") for name in "fgh"] == [b"before\n", b"stalled\n",
                                                                b"after\n"]
    finally:
        fault.unmount(node, directory="gate")
    assert fault.gate_mounts(node) == []
    # Written through to the backing directory, which is on this host.
    assert (node.workdir / "gate.backing" / "h").read_bytes() == b"after\n"


# -- cleanup -------------------------------------------------------------------

def labelled(run: str) -> list[str]:
    client = connect()
    selector = {"label": f"{RUN_LABEL}={run}"}
    return ([f"container {c.name}" for c in client.containers.list(all=True, filters=selector)]
            + [f"network {n.name}" for n in client.networks.list(filters=selector)])


@needs_docker
def test_leftovers_of_a_crashed_run_are_found_by_label_and_removed(tmp_path):
    crashed = docker_backend(tmp_path / "a", node_count=2)
    crashed.setup()                 # and never torn down: the run "crashed"
    again = DockerBackend(1, tmp_path / "b", subnet=str(crashed.subnet), prefix=crashed.prefix)
    try:
        again.setup()               # the same prefix: the crashed run's objects go first
        assert sorted(labelled(again.prefix)) == [f"container {again.prefix}-n1",
                                                  f"network {again.prefix}-net"]
        assert again.nodes[0].run(["hostname"]).stdout.strip() == "n1"
        logs = again.collect_logs(tmp_path / "logs")
        assert logs == [tmp_path / "logs" / "n1" / "container.log"]
    finally:
        removed = remove_leftovers(again.prefix)
    assert sorted(removed) == [f"container {again.prefix}-n1", f"network {again.prefix}-net"]
    assert labelled(again.prefix) == []
    again.teardown()                # nothing left: fine, and twice
    again.teardown()


@needs_docker
def test_a_subnet_on_a_host_interface_is_refused_and_nothing_is_left(cluster, tmp_path):
    _, backend = cluster
    clash = docker_backend(tmp_path, node_count=1, subnet=str(backend.subnet))
    with pytest.raises(DockerSetupError, match=rf"subnet='{backend.subnet}' overlaps .* on "
                                               rf"interface {backend.bridge}"):
        clash.setup()
    assert labelled(clash.prefix) == []


def test_an_unreachable_engine_is_one_line_saying_how_to_start_it(monkeypatch, tmp_path):
    socket = tmp_path / "no-docker.sock"
    monkeypatch.setenv("DOCKER_HOST", f"unix://{socket}")
    with pytest.raises(DockerUnavailable) as unreachable:
        connect()
    message = str(unreachable.value)
    assert message.startswith(f"cannot reach the Docker daemon at unix://{socket}: start it "
                              f"(systemctl start docker, or dockerd &")
    assert "or set DOCKER_HOST" in message and "\n" not in message
    backend = DockerBackend(1, tmp_path / "nodes")
    with pytest.raises(DockerUnavailable, match="cannot reach the Docker daemon"):
        backend.setup()
    backend.teardown()              # no engine, nothing of ours: nothing to do


def test_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="prefix='much-too-long-prefix'"):
        DockerBackend(2, tmp_path, prefix="much-too-long-prefix")
    with pytest.raises(ValueError, match="subnet='198.19.0.0/29' holds no 2 node"):
        DockerBackend(2, tmp_path, subnet="198.19.0.0/29")
    with pytest.raises(ValueError, match="subnet='nonsense'"):
        DockerBackend(2, tmp_path, subnet="nonsense")
    with pytest.raises(ValueError, match="node_count=0"):
        DockerBackend(0, tmp_path)
    backend = DockerBackend(2, "relative")
    assert backend.subnet.compressed == DEFAULT_SUBNET
    assert [n.address for n in backend.nodes] == ["198.18.0.11", "198.18.0.12"]
    assert backend.prefix == "kchaos-dk"
    assert all(n.workdir.is_absolute() and n.own_network for n in backend.nodes)


# -- docker/compose.yaml --------------------------------------------------------

@needs_docker
def test_compose_cluster_serves_a_client_and_goes_away(tmp_path):
    with compose_cluster() as compose:
        assert sorted(labelled("compose")) == [
            "container kchaos-compose-n1", "container kchaos-compose-n2",
            "container kchaos-compose-n3", "network kchaos-compose"]
        admin = AdminClient({"bootstrap.servers": compose.bootstrap, **QUIET})
        admin.create_topics([NewTopic("compose", 1, 3)])["compose"].result(TIMEOUT)
        round_trip(compose.bootstrap, "compose")
        # The published port: a first contact on loopback, then the brokers' own addresses.
        assert sorted(AdminClient({"bootstrap.servers": "127.0.0.1:19092", **QUIET})
                      .list_topics(timeout=10).brokers) == [1, 2, 3]
    assert labelled("compose") == []
