"""Containers kchaos did not make, as nodes: `--docker-containers c1,c2,...`
(a user's compose project, say), for `--db external` with faults
(cluster/attached_db.py).

Each container is a `DockerNode` at its address on its first network, with
a scratch working directory inside it and no Python of ours. The engine
controls the container itself (the `Container` capability of
cluster/attached_db.py): pause is `docker pause` (the cgroup freezer stops
every process, a broker under an init as well), kill is `docker kill`
(SIGKILL to the container's PID 1, which a signal from inside the container
cannot reach) and start is `docker start`; the container's writable layer
and volumes keep the broker's data across the kill. Nothing is created or
removed: the cluster is the user's.
"""

from __future__ import annotations

from pathlib import Path, PurePosixPath

from cluster.docker import DockerNode
from cluster.docker_engine import connect

WORKDIR = PurePosixPath("/tmp/kchaos")


class AttachedContainer(DockerNode):
    def __init__(self, name: str, address: str, container: str, client):
        super().__init__(name, address, container, WORKDIR, python=None)
        self._client = client

    def __repr__(self) -> str:
        return f"AttachedContainer({self.name!r}, {self.address}, container {self.container})"

    def _state(self) -> dict:
        return self._client.api.inspect_container(self.container)["State"]

    def container_running(self) -> bool:
        return bool(self._state().get("Running"))

    def pause_container(self) -> None:
        if not self._state().get("Paused"):
            self._client.api.pause(self.container)

    def unpause_container(self) -> None:
        if self._state().get("Paused"):
            self._client.api.unpause(self.container)

    def kill_container(self) -> None:
        self.unpause_container()        # a frozen container cannot take SIGKILL promptly
        if self.container_running():
            self._client.api.kill(self.container, signal="SIGKILL")

    def start_container(self) -> None:
        self._client.api.start(self.container)


class AttachedContainers:
    """Nodes n1..nN for the named, running containers, in node-id order."""

    namespaced = True

    def __init__(self, containers: list[str]):
        if not containers or len(set(containers)) != len(containers):
            raise ValueError(f"containers={containers!r}: name each of the cluster's "
                             f"containers once, in node-id order")
        self.containers = list(containers)
        self.nodes: list[AttachedContainer] = []

    def setup(self) -> None:
        import docker
        client = connect()
        nodes = []
        for i, container in enumerate(self.containers, start=1):
            try:
                info = client.api.inspect_container(container)
            except docker.errors.NotFound:
                raise ValueError(f"--docker-containers: no container {container!r} on this "
                                 f"Docker engine (docker ps lists the running ones)") from None
            if not info["State"].get("Running"):
                raise ValueError(f"--docker-containers: container {container!r} is not running: "
                                 f"start the cluster first")
            addresses = [n.get("IPAddress") for n in
                         info["NetworkSettings"]["Networks"].values() if n.get("IPAddress")]
            if not addresses:
                raise ValueError(f"--docker-containers: container {container!r} has no IP "
                                 f"address on a network (network_mode host or none?): kchaos "
                                 f"partitions nodes by their addresses")
            nodes.append(AttachedContainer(f"n{i}", addresses[0], container, client))
        for node in nodes:
            node.workdir = PurePosixPath("/")   # commands run in the workdir: make it first
            node.run(["mkdir", "-p", str(WORKDIR)])
            node.workdir = WORKDIR
        self.nodes = nodes

    def reattach(self) -> list[AttachedContainer]:
        self.setup()
        return self.nodes

    def teardown(self) -> None:
        """The user's containers keep running; only a pause of ours is undone."""
        for node in self.nodes:
            try:
                node.unpause_container()
            except Exception:  # noqa: BLE001 — a container removed meanwhile
                pass

    def diagnose(self) -> str | None:
        return None

    def collect_logs(self, dest_dir: str | Path) -> None:
        for node in self.nodes:
            target = Path(dest_dir) / node.name / "container.log"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(node._client.api.logs(node.container, stdout=True, stderr=True))
