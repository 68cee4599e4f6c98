"""A docker node reads its files through the host's view of the container
(cluster/container_root.py) and never gets another namespace's answer: a
path with a link along it, a restarted container, and an engine that is not
local all go back to `docker exec`, which is checked to give the same bytes.
"""

from __future__ import annotations

import subprocess

import pytest

from cluster.container_root import ContainerRoot
from cluster.node import process_state
from tests.docker_support import docker_backend, needs_docker


@pytest.fixture(scope="module")
def node(tmp_path_factory):
    backend = docker_backend(tmp_path_factory.mktemp("root") / "nodes", node_count=1)
    backend.setup()
    try:
        yield backend.nodes[0]
    finally:
        backend.teardown()


def in_container(node, path: str) -> bytes:
    return node.run(["cat", "--", path]).stdout.encode()


def no_exec(node, monkeypatch):
    def refused(*args, **kwargs):
        raise AssertionError(f"docker exec {args} while reading through the host")
    monkeypatch.setattr(node, "exec", refused)


def start_time(stat: bytes) -> str:
    return stat.decode().rpartition(") ")[2].split()[19]


@needs_docker
def test_files_and_processes_are_read_without_docker_exec(node, monkeypatch):
    node.run(["sh", "-c", "mkdir -p /srv/k && echo inside > /srv/k/f"])
    node.start_daemon("sleeper", ["sleep", "300"])
    try:
        pid = node.pid("sleeper")
        expected = {path: in_container(node, path)
                    for path in ("/srv/k/f", "/etc/hostname", f"/proc/{pid}/cmdline")}
        with monkeypatch.context() as patched:
            no_exec(node, patched)
            assert {path: node.get(path) for path in expected} == expected
            assert node.is_running("sleeper") and process_state(node, pid) == "S"
            with pytest.raises(FileNotFoundError):
                node.get("/srv/k/none")
        # The container's hostname, not this host's: the view is the container's.
        assert expected["/etc/hostname"].strip() != subprocess.run(
            ["hostname"], capture_output=True).stdout.strip()
    finally:
        node.stop_daemon("sleeper", timeout=5)
    assert not node.is_running("sleeper")


@needs_docker
def test_a_path_through_a_link_is_read_in_the_container(node):
    # An absolute link would resolve against this host's root from outside.
    node.run(["ln", "-sfn", "/etc/hostname", "/srv/link"])
    assert ContainerRoot(node.container).read("/srv/link") is None
    assert node.get("/srv/link") == in_container(node, "/etc/hostname")
    assert ContainerRoot(node.container).read("/proc/self/stat") is None


@needs_docker
def test_a_restarted_container_is_seen_anew(node):
    before = node.get("/proc/1/stat")
    subprocess.run(["docker", "restart", "-t", "0", node.container], check=True,
                   capture_output=True)
    after = node.get("/proc/1/stat")
    assert start_time(after) != start_time(before)
    assert start_time(after) == start_time(in_container(node, "/proc/1/stat"))


@needs_docker
def test_an_engine_elsewhere_is_asked_not_looked_into(node, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    assert ContainerRoot(node.container).read("/etc/hostname") is None
