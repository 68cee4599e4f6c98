"""Backends for the cluster tests: every test that takes `kind` runs on the
namespace backend (root only) and on the loopback one, and on the docker
backend when a Docker engine answers.

Each backend gets a prefix and a subnet of its own, so parallel test runs
(and a leftover of a crashed one) do not collide.
"""

from __future__ import annotations

import ipaddress
import os
import random
import secrets
import subprocess
import time
from pathlib import Path

import pytest

from cluster.local import LocalBackend
from tests.docker_support import DOCKER_MARKS, docker_backend
from tests.ssh_support import SSH_MARKS, SshCluster

IS_ROOT = os.geteuid() == 0
KINDS = [
    pytest.param("netns", marks=[pytest.mark.root, pytest.mark.skipif(
        not IS_ROOT, reason="network namespaces need root (ip netns add)")]),
    "loopback",
]


def free_subnet() -> str:
    """A /24 of 198.18.0.0/15 that no interface here has an address in."""
    used = [ipaddress.IPv4Interface(line.split()[3]).network for line in subprocess.run(
        ["ip", "-o", "-4", "addr", "show"], capture_output=True, text=True,
        check=True).stdout.splitlines()]
    # Under pytest-xdist each worker draws from its own share (gw0 the even
    # /24s above 198.18.31.0, gw1 the odd ones), so two workers never pick
    # the same one at once; the first 32 are the fixed subnets of the
    # end-to-end tests (198.18.0.0/24 the default, 198.18.9.0/24, ...).
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    subnets = list(ipaddress.IPv4Network("198.18.0.0/15").subnets(new_prefix=24))[32:]
    candidates = [net for net in subnets[worker::workers]
                  if not any(net.overlaps(u) for u in used)]
    return str(random.choice(candidates))


def make_backend(kind: str, root_dir: Path, node_count: int = 2) -> LocalBackend:
    if kind == "docker":
        return docker_backend(root_dir, node_count)
    if kind == "ssh":
        return SshCluster(root_dir, node_count)
    if kind == "netns":
        return LocalBackend(node_count, root_dir, subnet=free_subnet(), use_namespaces=True,
                            prefix=f"kct-{secrets.token_hex(3)}")
    return LocalBackend(node_count, root_dir, use_namespaces=False,
                        prefix=f"kct-{secrets.token_hex(3)}")


def leftovers(backend: LocalBackend, marker: str) -> list[str]:
    """Namespaces and links with the backend's prefix, and processes whose
    command line holds marker."""
    found = []
    if IS_ROOT:
        for argv in (["ip", "netns", "list"], ["ip", "-o", "link", "show"]):
            out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
            found += [line for line in out.splitlines() if backend.prefix in line]
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                found.append(f"pid {proc.name}: {cmdline}")
    return found


def wait_until(condition, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout} s: {what}")


# Not in KINDS: test_db.py's suite reaches into namespaces (LocalNode(netns=)).
NODE_KINDS = [*KINDS, pytest.param("docker", marks=DOCKER_MARKS)]
# Hosts over SSH (namespaces running a real sshd). Not in NODE_KINDS: its
# workdirs are paths on the hosts (PurePosixPath), which test_local.py's
# suite also reads as local paths; test_ssh.py runs the rest of that suite.
SSH_KIND = pytest.param("ssh", marks=SSH_MARKS)


@pytest.fixture(params=NODE_KINDS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def backend(kind, tmp_path):
    with make_backend(kind, tmp_path / "nodes") as made:
        yield made
