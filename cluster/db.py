"""DB adapters: how the system under test gets onto nodes and is hurt there.

`DB` is what every adapter does (setup, teardown, where clients connect);
killing, pausing and log files are optional capabilities in protocols of
their own, as in Jepsen's `db.clj`, so a nemesis asks for exactly what it
needs. Two adapters:

- `ReferenceDB` runs the project's reference broker on `Node`s: the
  controller (node id 0, `--process-roles controller`) on the first node,
  a broker (node ids 1..N) on every node. It installs nothing: nodes share
  this machine's Python.
- `ExternalDB` is a cluster kchaos does not manage; it only knows where
  clients connect.
"""

from __future__ import annotations

import signal
import socket
import sys
import time
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Protocol, runtime_checkable

from cluster.node import Node, PortInUse, port_owner
from cluster.readiness import metadata_problem

BROKER = "broker"
CONTROLLER = "controller"
CONTROLLER_ID = 0
LOG_TAIL_LINES = 15


@runtime_checkable
class DB(Protocol):
    def setup(self, node: Node) -> None:
        """Install and start the DB on node, from empty data."""

    def teardown(self, node: Node) -> None:
        """Stop everything the DB runs on node (data stays for collecting)."""

    def bootstrap_servers(self) -> str:
        """`host:port,...` for Kafka clients."""


@runtime_checkable
class Kill(Protocol):
    def start(self, node: Node) -> None:
        """Start the DB on node again on its data (nothing if it runs)."""

    def kill(self, node: Node) -> None:
        """Crash the DB on node (SIGKILL) and wait until it is gone."""

    def alive(self, node: Node) -> bool:
        """Whether the DB runs on node (a paused one does)."""


@runtime_checkable
class Pause(Protocol):
    def pause(self, node: Node) -> None:
        """Freeze the DB on node (SIGSTOP)."""

    def resume(self, node: Node) -> None:
        """Thaw it (SIGCONT)."""


@runtime_checkable
class Primary(Protocol):
    def primary(self, topic: str, partition: int) -> Node | None:
        """The node leading topic-partition now (None: no leader known)."""

    def in_sync(self, topic: str, partition: int) -> list[Node] | None:
        """The nodes in topic-partition's ISR now (None: nobody answers)."""

    def controller_node(self) -> Node | None:
        """The node hosting the active controller."""


@runtime_checkable
class LogFiles(Protocol):
    def log_files(self, node: Node) -> list[PurePath]:
        """Paths on node worth keeping in the run directory."""


class NotSupported(NotImplementedError):
    """The DB adapter cannot do this to its cluster."""


class ReferenceDB:
    """The reference broker on the nodes given to `start_all` (or `bind`).

    Node `<workdir>` holds `data/` and `broker.log`; the first node also
    `controller/` and `controller.log`. Daemons are named "broker" and
    "controller" on their nodes.
    """

    def __init__(self, *, bugs: Sequence[str] = (), config: Sequence[str] = (),
                 port: int = 9092, controller_port: int = 9093, log_level: str = "INFO",
                 python: str = sys.executable):
        if port == controller_port:
            raise ValueError(f"port={port!r} and controller_port={controller_port!r}: the "
                             f"first node runs both daemons, so they need different ports")
        self.bugs = list(bugs)
        self.config = list(config)
        self.port = port
        self.controller_port = controller_port
        self.log_level = log_level
        self.python = python
        self.nodes: list[Node] = []
        self._expected: set[tuple[str, str]] = set()  # (node, daemon) that should run

    # -- the cluster -------------------------------------------------------

    def bind(self, nodes: Sequence[Node]) -> None:
        """The cluster's nodes, in order: the first hosts the controller and
        node i (from 0) the broker with node id i + 1."""
        if not nodes:
            raise ValueError("nodes=[]: the reference DB needs at least one node")
        self.nodes = list(nodes)

    def start_all(self, nodes: Sequence[Node], *, timeout: float = 60.0) -> None:
        """Bind nodes, set each up and wait until the cluster is ready."""
        self.bind(nodes)
        for node in self.nodes:
            self.setup(node)
        self.wait_ready(timeout)

    def bootstrap_servers(self) -> str:
        self._check_bound("bootstrap_servers")
        return ",".join(f"{node.address}:{self.port}" for node in self.nodes)

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Until every running broker is registered and unfenced (Metadata
        lists it) and every partition has a leader. A daemon that exits
        unasked fails at once; a timeout shows each node's log tail."""
        self._check_bound("wait_ready")
        deadline = time.monotonic() + timeout
        problem = "no metadata yet"
        while time.monotonic() < deadline:
            self._check_alive()
            running = [n for n in self.nodes if n.is_running(BROKER)]
            # A broker listens only once the controller has unfenced it; a
            # restarted one is still listed under its old registration.
            closed = [n.name for n in running if not _accepts(n.address, self.port)]
            if closed:
                problem = f"brokers not listening yet: {closed}"
                time.sleep(0.1)
                continue
            bootstrap = ",".join(f"{n.address}:{self.port}" for n in running)
            problem = metadata_problem(bootstrap, {self.node_id(n) for n in running},
                                       min(5.0, max(0.5, deadline - time.monotonic())))
            if problem is None:
                return
            time.sleep(0.2)
        raise TimeoutError(f"reference cluster not ready after {timeout} s: {problem}\n"
                           + "\n".join(self._log_tail(n) for n in self.nodes))

    def node_id(self, node: Node) -> int:
        for i, bound in enumerate(self.nodes):
            if bound.name == node.name:
                return i + 1
        raise ValueError(f"node={node.name!r} is not one of this DB's nodes "
                         f"{[n.name for n in self.nodes]}")

    def crashed(self) -> list[str]:
        """Names of the nodes whose broker should run (started, not killed
        through this adapter) and does not."""
        return [n.name for n in self.nodes
                if (n.name, BROKER) in self._expected and not n.is_running(BROKER)]

    def primary(self, topic: str, partition: int) -> Node | None:
        """The leader of topic-partition as Metadata from the running
        brokers says; None when it has none or no broker answers."""
        state = self._partition_state(topic, partition)
        return None if state is None or state[0] is None else self._by_id(state[0])

    def in_sync(self, topic: str, partition: int) -> list[Node] | None:
        """The nodes in topic-partition's ISR by Metadata (None: no answer)."""
        state = self._partition_state(topic, partition)
        return None if state is None else [n for n in map(self._by_id, state[1]) if n]

    def _partition_state(self, topic: str, partition: int):
        from cluster.readiness import partition_state
        running = [n for n in self.nodes if n.is_running(BROKER)]
        if not running:
            return None
        return partition_state(",".join(f"{n.address}:{self.port}" for n in running),
                               topic, partition)

    def _by_id(self, node_id: int) -> Node | None:
        return self.nodes[node_id - 1] if 1 <= node_id <= len(self.nodes) else None

    def controller_node(self) -> Node | None:
        """The first node: the single controller runs there."""
        return self.nodes[0] if self.nodes else None

    # -- one node ----------------------------------------------------------

    def setup(self, node: Node) -> None:
        self._check_bound("setup")
        self.teardown(node)
        data = str(node.workdir / "data")
        # A disk gate (nemesis/disk) may be mounted on data: empty it, keep the mount.
        if node.run(["mountpoint", "-q", data], check=False).returncode == 0:
            node.run(["find", data, "-mindepth", "1", "-delete"])
        else:
            node.run(["rm", "-rf", data])
        node.run(["rm", "-rf", str(node.workdir / "controller"),
                  str(node.workdir / "broker.log"), str(node.workdir / "controller.log")])
        if self._is_controller_node(node):
            self._check_port_free(node, self.controller_port)
            node.start_daemon(CONTROLLER, self._controller_argv(node),
                              log=node.workdir / "controller.log")
            self._expected.add((node.name, CONTROLLER))
        self.start(node)

    def start(self, node: Node) -> None:
        if node.is_running(BROKER):
            return
        self._check_port_free(node, self.port)
        node.start_daemon(BROKER, self._broker_argv(node), log=node.workdir / "broker.log")
        self._expected.add((node.name, BROKER))

    def kill(self, node: Node) -> None:
        self._expected.discard((node.name, BROKER))
        node.stop_daemon(BROKER, sig=signal.SIGKILL)

    def alive(self, node: Node) -> bool:
        return node.is_running(BROKER)

    def pause(self, node: Node) -> None:
        node.signal(BROKER, signal.SIGSTOP)

    def resume(self, node: Node) -> None:
        node.signal(BROKER, signal.SIGCONT)

    def teardown(self, node: Node) -> None:
        # stop_daemon continues a paused process before the SIGKILL.
        self._expected -= {(node.name, BROKER), (node.name, CONTROLLER)}
        node.stop_daemon(BROKER, sig=signal.SIGKILL)
        node.stop_daemon(CONTROLLER, sig=signal.SIGKILL)

    def log_files(self, node: Node) -> list[PurePath]:
        names = ["broker.log"] + (["controller.log"] if self._is_controller_node(node) else [])
        return [node.workdir / name for name in names]

    def collect(self, node: Node, dest_dir: str | Path) -> None:
        """Copy node's logs into dest_dir (the run directory's
        `nodes/<name>/`) with `data-listing.txt`: each file under its data
        directories, relative path and size in bytes."""
        dest = Path(dest_dir)
        dest.mkdir(parents=True, exist_ok=True)
        for path in self.log_files(node):
            try:
                (dest / path.name).write_bytes(node.get(path))
            except FileNotFoundError:
                continue
        listing = []
        for sub in ("data", "controller"):
            found = node.run(["find", str(node.workdir / sub), "-type", "f",
                              "-printf", r"%P\t%s\n"], check=False)
            listing += [f"{sub}/{line}" for line in found.stdout.splitlines()]
        (dest / "data-listing.txt").write_text("".join(f"{line}\n" for line in sorted(listing)))

    # -- inside ------------------------------------------------------------

    def _is_controller_node(self, node: Node) -> bool:
        self._check_bound("setup")
        return node.name == self.nodes[0].name

    def _controller_argv(self, node: Node) -> list[str]:
        return [self.python, "-m", "reference_broker", "--node-id", str(CONTROLLER_ID),
                "--listen", f"{node.address}:{self.controller_port}",
                "--data-dir", str(node.workdir / "controller"),
                "--process-roles", "controller", "--log-level", self.log_level,
                *_repeat("--config", self.config)]

    def _broker_argv(self, node: Node) -> list[str]:
        controller = f"{self.nodes[0].address}:{self.controller_port}"
        return [self.python, "-m", "reference_broker", "--node-id", str(self.node_id(node)),
                "--listen", f"{node.address}:{self.port}",
                "--data-dir", str(node.workdir / "data"),
                "--controller", controller, "--log-level", self.log_level,
                *_repeat("--config", self.config), *_repeat("--bug", self.bugs)]

    def _check_bound(self, method: str) -> None:
        if not self.nodes:
            raise ValueError(f"ReferenceDB.{method}: the DB does not know its nodes yet; "
                             f"call start_all(nodes) or bind(nodes) first (the first node "
                             f"hosts the controller)")

    @staticmethod
    def _check_port_free(node: Node, port: int) -> None:
        owner = port_owner(node, node.address, port)
        if owner is not None:
            raise PortInUse(f"{node.address}:{port} on {node.name} is already in use by "
                            f"{owner}: stop it, or pass another port= / controller_port= "
                            f"to ReferenceDB")

    def _check_alive(self) -> None:
        """A daemon that should run and does not has crashed."""
        dead = [(n, daemon) for n in self.nodes for daemon in (CONTROLLER, BROKER)
                if (n.name, daemon) in self._expected and not n.is_running(daemon)]
        if dead:
            raise RuntimeError("reference cluster: "
                               + "; ".join(f"the {d} on {n.name} exited{self._held(n, d)}"
                                           for n, d in dead)
                               + "\n" + "\n".join(self._log_tail(n) for n, _ in dead))

    def _held(self, node: Node, daemon: str) -> str:
        """Why a daemon may have failed to listen: someone else has its port."""
        port = self.controller_port if daemon == CONTROLLER else self.port
        owner = port_owner(node, node.address, port)
        return f" ({node.address}:{port} is held by {owner})" if owner else ""

    def _log_tail(self, node: Node) -> str:
        tails = []
        for path in self.log_files(node):
            try:
                lines = node.get(path).decode(errors="replace").splitlines()
            except FileNotFoundError:
                lines = ["(no log)"]
            tails.append(f"--- {node.name}:{path}\n" + "\n".join(lines[-LOG_TAIL_LINES:]))
        return "\n".join(tails)


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def _repeat(option: str, values: Sequence[str]) -> list[str]:
    return [arg for value in values for arg in (option, value)]


class ExternalDB:
    """A cluster kchaos does not manage, reached at bootstrap: nothing to set
    up or collect, and it cannot be killed or paused from here."""

    def __init__(self, bootstrap: str):
        if not isinstance(bootstrap, str) or not bootstrap.strip():
            raise ValueError(f"bootstrap={bootstrap!r}: pass the cluster's bootstrap "
                             f"servers, e.g. 'kafka1:9092,kafka2:9092'")
        self.bootstrap = bootstrap

    def bootstrap_servers(self) -> str:
        return self.bootstrap

    def setup(self, node: Node) -> None:
        pass

    def teardown(self, node: Node) -> None:
        pass

    def collect(self, node: Node, dest_dir: str | Path) -> None:
        pass

    def start(self, node: Node) -> None:
        self._unsupported("start")

    def kill(self, node: Node) -> None:
        self._unsupported("kill")

    def pause(self, node: Node) -> None:
        self._unsupported("pause")

    def resume(self, node: Node) -> None:
        self._unsupported("resume")

    @staticmethod
    def _unsupported(what: str) -> None:
        raise NotSupported(f"the external DB cannot {what} nodes: kchaos does not manage "
                           f"that cluster; drop kill and pause faults from the nemesis, or "
                           f"let kchaos run the DB")
