"""The `docker` backend: nodes are containers of the kchaos node image.

`DockerBackend.setup()` makes one bridge network of its own (`<prefix>-net`,
bridge `<prefix>-br0`, a subnet of 198.18.0.0/15, `internal`: nodes reach
each other and this host, nothing beyond) and one container per node
(`<prefix>-n1`, ...) on it, at the subnet's .11, .12, ... The test process
stays on the host and reaches the nodes at those addresses through the
bridge, so clients see the real addresses, and a partition is iptables in a
container's own network namespace (`node.own_network`).

A container's main process only keeps it up (`sleep infinity` under
docker-init, which reaps the daemons' orphans). Commands run through
`docker exec`; daemons are `RemoteDaemons` (pid files on the node). Each
node's working directory `<root_dir>/<name>` is a host directory
bind-mounted at the same path, so its logs and data stay in the run
directory after the containers are gone, as on the local backend.

Containers get NET_ADMIN (iptables), SYS_ADMIN and /dev/fuse (the disk
gate's FUSE mount, in the container's own mount namespace). Every object
carries the labels of cluster/docker_engine.py; `teardown()` and
`remove_leftovers()` find them by label.
"""

from __future__ import annotations

import errno
import logging
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path, PurePath

from cluster.addressing import (DEFAULT_SUBNET, check_prefix, node_address, node_subnet,
                                overlapping, prefix_for)
from cluster.container_root import ContainerRoot
from cluster.docker_engine import (LABEL, NODE_LABEL, RUN_LABEL, DockerUnavailable, connect,
                                   docker_cli, remove_leftovers)
from cluster.docker_image import NODE_PYTHON, ensure_image
from cluster.node import CommandError, SetupError, check_argv
from cluster.remote import RemoteDaemons

__all__ = ["DEFAULT_SUBNET", "DockerBackend", "DockerNode", "DockerSetupError",
           "DockerUnavailable", "remove_leftovers"]

log = logging.getLogger("cluster")

# Seconds docker exec may take beyond a command's own timeout (the CLI's
# start and the API's round trips) before we stop waiting for it.
EXEC_GRACE = 15.0
# $1 scratch, $2 target: the file appears whole or not at all.
_PUT = 'mkdir -p "$(dirname "$2")" && cat > "$1" && mv -f "$1" "$2"'


class DockerSetupError(SetupError, RuntimeError):
    """Creating the network or the containers failed."""


class DockerNode(RemoteDaemons):
    """A node that is the container `container`, reached with `docker exec`."""

    def __init__(self, name: str, address: str, container: str, workdir: PurePath, *,
                 python: str | None = NODE_PYTHON):
        self.name = name
        self.address = address
        self.container = container
        # DockerBackend bind-mounts a host directory at the same path and
        # passes a Path: it names one directory here and in the container.
        # Elsewhere (a container kchaos did not make) it is the container's only.
        self.workdir = workdir
        self.python = python
        self.own_network = True             # a container's network namespace is its own
        self._root = ContainerRoot(container)

    def __repr__(self) -> str:
        return f"DockerNode({self.name!r}, {self.address}, container {self.container})"

    def _path(self, path: str | PurePath) -> PurePath:
        return self.workdir / path

    def exec(self, argv: Sequence[str], *, timeout: float | None = 60.0,
             input: bytes | None = None) -> tuple[int, bytes, bytes]:
        """Run argv in the container in workdir: (status, stdout, stderr) as
        bytes. With a timeout, coreutils' `timeout` ends the command inside
        the container too (a killed `docker exec` would leave it running)."""
        argv = check_argv(argv)
        command = [docker_cli(), "exec", *(["-i"] if input is not None else []),
                   "-w", str(self.workdir), self.container]
        if timeout is not None:
            command += ["timeout", "--kill-after=2", f"{timeout:.3f}"]
        started = time.monotonic()
        try:
            done = subprocess.run(command + argv, input=input, capture_output=True,
                                  timeout=None if timeout is None else timeout + EXEC_GRACE)
        except subprocess.TimeoutExpired as e:
            raise subprocess.TimeoutExpired(argv, timeout, e.output, e.stderr) from None
        status, err = done.returncode, done.stderr
        # 124: `timeout` ended it (137 once it had to SIGKILL); a command
        # that exits 124 itself in less time is not a timeout.
        if (timeout is not None and status in (124, 137)
                and time.monotonic() - started >= timeout):
            raise subprocess.TimeoutExpired(argv, timeout, done.stdout, err)
        if status in (126, 127) and (b"failed to run command" in err
                                     or b"executable file not found" in err):
            raise FileNotFoundError(errno.ENOENT, f"on {self.name} ({self.container}): "
                                    f"{err.decode(errors='replace').strip()}", argv[0])
        return status, done.stdout, err

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float | None = 60.0,
            input: bytes | None = None) -> subprocess.CompletedProcess:
        argv = check_argv(argv)
        status, out, err = self.exec(argv, timeout=timeout, input=input)
        out_text, err_text = out.decode(errors="replace"), err.decode(errors="replace")
        if check and status != 0:
            raise CommandError(self.name, status, argv, out_text, err_text)
        return subprocess.CompletedProcess(argv, status, out_text, err_text)

    def put(self, path: str | PurePath, data: bytes) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data={data!r:.60} ({type(data).__name__}): put takes bytes; "
                            f"encode text first, e.g. text.encode()")
        target = self._path(path)
        scratch = target.with_name(f".{target.name}.kchaos-put")
        self.run(["sh", "-c", _PUT, "kchaos-put", str(scratch), str(target)],
                 input=bytes(data))

    def get(self, path: str | PurePath) -> bytes:
        """Through the host's view of the container when there is one
        (cluster/container_root.py), else with `docker exec cat`."""
        target = str(self._path(path))
        data = self._root.read(target)
        if data is not None:
            return data
        status, out, err = self.exec(["cat", "--", target])
        if status == 0:
            return out
        message = err.decode(errors="replace").strip()
        for words, error in (("No such file", FileNotFoundError),
                             ("Is a directory", IsADirectoryError),
                             ("No such process", ProcessLookupError),
                             ("Permission denied", PermissionError)):
            if words in message:
                raise error(f"on {self.name}: {message}")
        raise CommandError(self.name, status, ["cat", "--", target], "", message)


class DockerBackend:
    """N container nodes n1..nN; `setup()` creates them (the node image
    first, when the engine lacks it), `teardown()` removes them, leftovers
    of a crashed run with the same prefix included, and is safe to call in
    any state. Runs at the same time need different prefixes and subnets."""

    # Each node has a network namespace of its own (LocalBackend's word).
    namespaced = True

    def __init__(self, node_count: int, root_dir: str | Path, subnet: str = DEFAULT_SUBNET, *,
                 image: str | None = None, base_image: str | None = None,
                 prefix: str | None = None):
        self.subnet = node_subnet(subnet, node_count)
        # One run per subnet, as on the local backend: the subnet names the
        # network and the containers (prefix_for), and setup removes what a
        # crashed run with the same names left.
        prefix = prefix or prefix_for(subnet) + "-dk"
        check_prefix(prefix, "-br0", "the network, its bridge and the containers")
        self.root_dir = Path(root_dir).absolute()
        self.prefix = prefix
        self.network = f"{prefix}-net"
        self.bridge = f"{prefix}-br0"
        self.gateway = str(self.subnet.network_address + 1)
        self.image = image                  # None: the node image of these sources
        self.base_image = base_image
        self.nodes = [DockerNode(f"n{i}", node_address(self.subnet, i),
                                 f"{prefix}-n{i}", self.root_dir / f"n{i}")
                      for i in range(1, node_count + 1)]
        self._client = None

    def __enter__(self) -> "DockerBackend":
        self.setup()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def _labels(self) -> dict[str, str]:
        return {LABEL: "1", RUN_LABEL: self.prefix}

    def setup(self) -> None:
        self._client = connect()
        remove_leftovers(self.prefix, client=self._client)
        image = self.image or ensure_image(self._client, base_image=self.base_image)
        for node in self.nodes:
            # A crashed run's pid files would name processes of containers
            # that are gone; these containers have no daemon yet.
            shutil.rmtree(node.workdir / ".daemons", ignore_errors=True)
            Path(node.workdir).mkdir(parents=True, exist_ok=True)
        try:
            self._check_subnet_free()
            self._create_network()
            for node in self.nodes:
                self._create_container(node, image)
            for node in self.nodes:
                self._wait_ready(node)
        except BaseException:
            remove_leftovers(self.prefix, client=self._client)
            raise

    def reattach(self) -> list[DockerNode]:
        """The nodes whose containers still run, for a process other than
        the run's (kchaos heal, clean); nothing is created."""
        import docker

        self._client = self._client or connect()
        found = []
        for node in self.nodes:
            try:
                if self._client.api.inspect_container(node.container)["State"]["Running"]:
                    found.append(node)
            except docker.errors.NotFound:
                continue
        return found

    def teardown(self) -> None:
        """Remove our containers (their daemons with them) and network."""
        if self._client is None:
            try:
                self._client = connect()
            except DockerUnavailable:
                return      # nothing of ours can exist where no engine answers
        remove_leftovers(self.prefix, client=self._client)

    def diagnose(self) -> str | None:
        return None

    def collect_logs(self, dest_dir: str | Path) -> list[Path]:
        """Each container's own log (`docker logs`) as `<dest_dir>/<node>/
        container.log`; the files written. Daemon logs need no copy: they
        are in the nodes' working directories on this host."""
        import docker

        client = self._client or connect()
        written = []
        for node in self.nodes:
            try:
                output = client.api.logs(node.container, stdout=True, stderr=True)
            except docker.errors.NotFound:
                continue
            target = Path(dest_dir) / node.name / "container.log"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(output)
            written.append(target)
        return written

    # -- making it ---------------------------------------------------------

    def _check_subnet_free(self) -> None:
        clash = overlapping(self.subnet)
        if clash:
            raise DockerSetupError(f"subnet={str(self.subnet)!r} overlaps {clash}: pass another "
                                   f"subnet (e.g. '198.19.1.0/24') or remove it")

    def _create_network(self) -> None:
        import docker

        ipam = docker.types.IPAMConfig(pool_configs=[docker.types.IPAMPool(
            subnet=str(self.subnet), gateway=self.gateway)])
        try:
            self._client.networks.create(
                self.network, driver="bridge", ipam=ipam, internal=True,
                labels=self._labels(),
                options={"com.docker.network.bridge.name": self.bridge})
        except docker.errors.APIError as e:
            raise DockerSetupError(
                f"creating network {self.network} on subnet={str(self.subnet)!r}: "
                f"{e.explanation or e}: pass another subnet, or remove the network that "
                f"holds it (docker network ls; kchaos's own: remove_leftovers())") from None

    def _create_container(self, node: DockerNode, image: str) -> None:
        import docker

        api = self._client.api
        workdir = str(node.workdir)
        host_config = api.create_host_config(
            cap_add=["NET_ADMIN", "SYS_ADMIN"], devices=["/dev/fuse:/dev/fuse:rwm"],
            # FUSE mounts are refused by docker's AppArmor profile where
            # AppArmor is on; elsewhere the option is ignored.
            security_opt=["apparmor:unconfined"], init=True,
            binds={workdir: {"bind": workdir, "mode": "rw"}})
        networking = api.create_networking_config({self.network: api.create_endpoint_config(
            ipv4_address=node.address, aliases=[node.name])})
        try:
            api.create_container(image, command=["sleep", "infinity"], name=node.container,
                                 hostname=node.name, working_dir=workdir,
                                 labels={**self._labels(), NODE_LABEL: node.name},
                                 host_config=host_config, networking_config=networking)
            api.start(node.container)
        except docker.errors.APIError as e:
            raise DockerSetupError(f"creating container {node.container} for {node.name} "
                                   f"from {image}: {e.explanation or e}") from None

    def _wait_ready(self, node: DockerNode, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            status, _, err = node.exec(["true"], timeout=10.0)
            if status == 0:
                return
            if time.monotonic() > deadline:
                raise DockerSetupError(f"container {node.container} ({node.name}) does not "
                                       f"run commands after {timeout} s: "
                                       f"{err.decode(errors='replace').strip()}")
            time.sleep(0.1)
