"""Backends for the cluster tests: every test that takes `kind` runs on the
namespace backend (root only) and on the loopback one.

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
    candidates = [net for net in ipaddress.IPv4Network("198.18.0.0/15").subnets(new_prefix=24)
                  if not any(net.overlaps(u) for u in used)]
    return str(random.choice(candidates[1:]))


def make_backend(kind: str, root_dir: Path, node_count: int = 2) -> LocalBackend:
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


@pytest.fixture(params=KINDS)
def kind(request) -> str:
    return request.param


@pytest.fixture
def backend(kind, tmp_path):
    with make_backend(kind, tmp_path / "nodes") as made:
        yield made
