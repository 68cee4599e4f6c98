"""What tests need around Docker: whether an engine answers (tests marked
`docker` skip with its one-line reason when none does), docker backends
with a prefix and a subnet of their own, and the hand-run compose cluster of
docker/compose.yaml, started and torn down (`compose_cluster`)."""

from __future__ import annotations

import contextlib
import functools
import os
import secrets
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from cluster.docker import DockerBackend
from cluster.docker_engine import DockerUnavailable, connect, remove_leftovers
from cluster.docker_image import ensure_image
from cluster.wheelhouse import PROJECT
from cluster.readiness import metadata_problem

COMPOSE_FILE = PROJECT / "docker" / "compose.yaml"
# What docker/compose.yaml says: its nodes, their addresses and ports, and
# its run label (io.kchaos.run), which remove_leftovers takes.
COMPOSE_NODES = {"n1": "198.19.1.11", "n2": "198.19.1.12", "n3": "198.19.1.13"}
COMPOSE_PORT = 9092
COMPOSE_RUN = "compose"
READY_TIMEOUT = 60.0


@functools.cache
def docker_problem() -> str | None:
    """Why Docker cannot be used here (one line), or None."""
    try:
        connect(timeout=10).close()
    except DockerUnavailable as e:
        return str(e)
    return None


DOCKER_MARKS = [pytest.mark.docker,
                pytest.mark.skipif(docker_problem() is not None,
                                   reason=docker_problem() or "Docker is available")]


def needs_docker(test):
    """Mark test `docker`, skipped with the one-line reason when no engine answers."""
    for mark in reversed(DOCKER_MARKS):
        test = mark(test)
    return test


def docker_backend(root_dir: Path, node_count: int = 2, subnet: str | None = None,
                   **options) -> DockerBackend:
    """A backend whose prefix (`kct-<hex>`) and subnet no other test run uses."""
    if subnet is None:
        from tests.cluster.conftest import free_subnet
        subnet = free_subnet()
    return DockerBackend(node_count, root_dir, subnet=subnet,
                         prefix=f"kct-{secrets.token_hex(3)}", **options)


# -- docker/compose.yaml ------------------------------------------------------

def compose_command() -> list[str] | None:
    """`docker compose` (v2) when the CLI has it, else `docker-compose` (v1),
    else None."""
    if shutil.which("docker") and subprocess.run(
            ["docker", "compose", "version"], capture_output=True).returncode == 0:
        return ["docker", "compose"]
    return ["docker-compose"] if shutil.which("docker-compose") else None


@dataclass
class ComposeCluster:
    """A running docker/compose.yaml: where clients connect, and the
    containers (node name -> container name) to attach to."""
    bootstrap: str
    containers: dict[str, str]
    addresses: dict[str, str]
    command: list[str]


def _compose(command: list[str], *args: str, image: str, timeout: float = 180.0) -> str:
    argv = [*command, "-f", str(COMPOSE_FILE), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "KCHAOS_IMAGE": image})
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {done.returncode}: "
                           f"{(done.stderr or done.stdout).strip()[-3000:]}")
    return done.stdout


@contextlib.contextmanager
def compose_cluster(command: list[str] | None = None) -> Iterator[ComposeCluster]:
    """Start docker/compose.yaml (the node image built first when missing),
    wait until all three brokers are registered, yield it, tear it down
    (`down -v`, and whatever it left by label)."""
    command = command or compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed "
                    "(apt-get install docker-compose)")
    image = ensure_image()
    client = connect()
    remove_leftovers(COMPOSE_RUN, client=client)    # a crashed run's containers
    try:
        _compose(command, "up", "-d", image=image)
        containers = {name: f"kchaos-compose-{name}" for name in COMPOSE_NODES}
        bootstrap = ",".join(f"{address}:{COMPOSE_PORT}" for address in COMPOSE_NODES.values())
        deadline = time.monotonic() + READY_TIMEOUT
        problem = "not asked yet"
        while time.monotonic() < deadline:
            problem = metadata_problem(bootstrap, {1, 2, 3}, 5.0)
            if problem is None:
                break
            time.sleep(0.5)
        else:
            logs = _compose(command, "logs", "--tail", "15", image=image)
            raise TimeoutError(f"the compose cluster is not ready after {READY_TIMEOUT} s: "
                               f"{problem}\n{logs}")
        yield ComposeCluster(bootstrap, containers, dict(COMPOSE_NODES), command)
    finally:
        try:
            _compose(command, "down", "-v", "--timeout", "1", image=image)
        finally:
            remove_leftovers(COMPOSE_RUN, client=client)
