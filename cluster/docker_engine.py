"""Reaching the Docker engine, and the labels that mark what kchaos made in it.

Every network, container and image kchaos creates carries `io.kchaos=1`;
networks and containers also carry `io.kchaos.run=<run>` (a backend's
prefix, or `compose` for docker/compose.yaml), so a crashed run's leftovers
can be found and removed by label alone (`remove_leftovers`). The docker
CLI honours the same `DOCKER_HOST` as the SDK, so commands on nodes (`docker
exec`) and API calls always reach one engine.
"""

from __future__ import annotations

import logging
import os
import shutil
from cluster.node import SetupError

log = logging.getLogger("cluster")

LABEL = "io.kchaos"                 # "1" on everything kchaos creates
RUN_LABEL = "io.kchaos.run"         # the run (a backend's prefix) it belongs to
NODE_LABEL = "io.kchaos.node"       # on a container: the node's name (n1, ...)
SOURCE_LABEL = "io.kchaos.source"   # on the node image: the digest of its sources
BASE_LABEL = "io.kchaos.base"       # on the node image: the base it was built on
PYTHON_LABEL = "io.kchaos.python"   # on the node image (docker/Dockerfile): node.python
DEFAULT_SOCKET = "unix:///var/run/docker.sock"


class DockerUnavailable(SetupError, RuntimeError):
    """The Docker engine (or the SDK, or the CLI) is not there to use."""


class CleanupError(RuntimeError):
    """Something kchaos made cannot be removed."""


def engine_url() -> str:
    return os.environ.get("DOCKER_HOST") or DEFAULT_SOCKET


def connect(timeout: float = 120.0):
    """A docker SDK client of the engine DOCKER_HOST names (default the local
    socket) that has answered a ping; DockerUnavailable with one line saying
    how to start it otherwise."""
    try:
        import docker
    except ImportError:
        raise DockerUnavailable("the docker backend needs the Python package `docker`: "
                                "pip install docker (or pip install -e . in kchaos)") from None
    url = engine_url()
    try:
        client = docker.from_env(timeout=int(timeout))
        client.ping()
    except docker.errors.DockerException as e:
        raise DockerUnavailable(
            f"cannot reach the Docker daemon at {url}: start it (systemctl start docker, "
            f"or dockerd &; as root `make docker-deps` installs and starts it) or set "
            f"DOCKER_HOST ({_first_line(e)})") from None
    return client


def docker_cli() -> str:
    """Path of the docker CLI, which runs commands on nodes (`docker exec -i`:
    stdin and a clean exit status, which the SDK's exec API lacks)."""
    cli = shutil.which("docker")
    if cli is None:
        raise DockerUnavailable("the docker CLI is not on PATH: apt-get install docker.io "
                                "(or docker-ce-cli)")
    return cli


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def remove_leftovers(label_value: str | None = None, *, client=None) -> list[str]:
    """Remove every container and network labelled as kchaos's: of run
    label_value (its `io.kchaos.run`), or of every run when None. The names
    removed ("container NAME", "network NAME"). Images stay: they are a cache
    that later runs reuse (`docker image prune --filter label=io.kchaos=1`)."""
    import docker

    client = client or connect()
    selector = f"{RUN_LABEL}={label_value}" if label_value is not None else f"{LABEL}=1"
    removed = []
    for container in client.containers.list(all=True, filters={"label": selector}):
        try:
            container.remove(force=True, v=True)
            removed.append(f"container {container.name}")
        except docker.errors.NotFound:
            pass    # removed by someone else meanwhile: gone is what we want
    for network in client.networks.list(filters={"label": selector}):
        try:
            network.remove()
            removed.append(f"network {network.name}")
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as e:
            # A container that is not kchaos's still uses it.
            raise CleanupError(f"cannot remove network {network.name}: "
                                    f"{e.explanation or e}: see `docker network inspect "
                                    f"{network.name}` for the containers on it, "
                                    f"and remove or disconnect them") from None
    if removed:
        log.info("removed %s", ", ".join(removed))
    return removed
