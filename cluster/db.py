"""DB adapters: how the system under test gets onto nodes and is hurt there.

`DB` is what every adapter does (setup, teardown, where clients connect);
killing, pausing and log files are optional capabilities in protocols of
their own, as in Jepsen's `db.clj`, so a nemesis asks for exactly what it
needs. Two adapters:

- `ReferenceDB` runs the project's reference broker on `Node`s: the
  controller (node id 0, `--process-roles controller`) on the first node,
  a broker (node ids 1..N) on every node — or, with `controller_node`, the
  controller alone on the last node and the brokers on the others. It
  installs nothing: nodes share this machine's Python.
- `ExternalDB` is a cluster kchaos does not manage; it only knows where
  clients connect.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Protocol, runtime_checkable

from cluster.daemon_db import DaemonDB
from cluster.node import Node, PortInUse, port_owner

BROKER = "broker"
CONTROLLER = "controller"
CONTROLLER_ID = 0


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

    def group_coordinator(self, group: str) -> Node | None:
        """The node coordinating a consumer group now (None: no answer)."""


@runtime_checkable
class Ready(Protocol):
    def wait_ready(self, timeout: float) -> None:
        """Until the cluster serves again (TimeoutError saying what is missing)."""


@runtime_checkable
class LogFiles(Protocol):
    def log_files(self, node: Node) -> list[PurePath]:
        """Paths on node worth keeping in the run directory."""


class NotSupported(NotImplementedError):
    """The DB adapter cannot do this to its cluster."""


class ReferenceDB(DaemonDB):
    """The reference broker on the nodes given to `start_all` (or `bind`).

    Node `<workdir>` holds `data/` and `broker.log`; the first node also
    `controller/` and `controller.log`. Daemons are named "broker" and
    "controller" on their nodes. With controller_node the last node runs
    only the controller, so a fault can take it apart from every broker
    (with the controller beside n1, `halves` is always "n1 versus the rest").
    """

    def __init__(self, *, bugs: Sequence[str] = (), config: Sequence[str] = (),
                 port: int = 9092, controller_port: int = 9093, log_level: str = "INFO",
                 python: str | None = None, controller_node: bool = False):
        if port == controller_port:
            raise ValueError(f"port={port!r} and controller_port={controller_port!r}: the "
                             f"first node runs both daemons, so they need different ports")
        super().__init__()
        self.bugs = list(bugs)
        self.config = list(config)
        self.port = port
        self.controller_port = controller_port
        self.log_level = log_level
        self.python = python            # None: each node's own (Node.python)
        self.separate_controller = controller_node

    def bind(self, nodes: Sequence[Node]) -> None:
        if self.separate_controller and len(nodes) < 2:
            raise ValueError(f"nodes={[n.name for n in nodes]}: a controller on a node of its "
                             f"own needs a node for a broker besides")
        super().bind(nodes)

    def controller_node(self) -> Node | None:
        """The node the single controller runs on: the first, or the last
        when it has a node of its own."""
        if not self.nodes:
            return None
        return self.nodes[-1] if self.separate_controller else self.nodes[0]

    def daemons_on(self, node: Node) -> list[str]:
        if not self._is_controller_node(node):
            return [BROKER]
        return [CONTROLLER] if self.separate_controller else [BROKER, CONTROLLER]

    def log_files(self, node: Node) -> list[PurePath]:
        return [node.workdir / f"{daemon}.log" for daemon in self.daemons_on(node)]

    def data_dirs(self, node: Node) -> list[str]:
        return ["data", "controller"]

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
        self.start(node)

    # Kill and pause hit the node, every daemon on it: on the controller's
    # node the controller too, so the controller is a fault target like any
    # broker (a restarted one replays its metadata.log; brokers wait for it).

    def start(self, node: Node) -> None:
        self._look_at(node)
        if self._is_controller_node(node) and not node.is_running(CONTROLLER):
            self._check_port_free(node, self.controller_port)
            node.start_daemon(CONTROLLER, self._controller_argv(node),
                              log=node.workdir / "controller.log")
            self._expected.add((node.name, CONTROLLER))
        if BROKER not in self.daemons_on(node) or node.is_running(BROKER):
            return
        self._check_port_free(node, self.port)
        node.start_daemon(BROKER, self._broker_argv(node), log=node.workdir / "broker.log")
        self._expected.add((node.name, BROKER))

    # -- inside ------------------------------------------------------------

    def _is_controller_node(self, node: Node) -> bool:
        self._check_bound("setup")
        return node.name == self.controller_node().name

    def _controller_argv(self, node: Node) -> list[str]:
        return [self._python(node), "-m", "reference_broker", "--node-id", str(CONTROLLER_ID),
                "--listen", f"{node.address}:{self.controller_port}",
                "--data-dir", str(node.workdir / "controller"),
                "--process-roles", "controller", "--log-level", self.log_level,
                *_repeat("--config", self.config)]

    def _broker_argv(self, node: Node) -> list[str]:
        controller = f"{self.controller_node().address}:{self.controller_port}"
        return [self._python(node), "-m", "reference_broker",
                "--node-id", str(self.node_id(node)),
                "--listen", f"{node.address}:{self.port}",
                "--data-dir", str(node.workdir / "data"),
                "--controller", controller, "--log-level", self.log_level,
                *_repeat("--config", self.config), *_repeat("--bug", self.bugs)]

    def _python(self, node: Node) -> str:
        python = self.python or node.python
        if not python:
            raise ValueError(f"{node.name}: the reference broker needs kchaos installed on the "
                             f"node, and this node has no Python with kchaos")
        return python

    @staticmethod
    def _check_port_free(node: Node, port: int) -> None:
        owner = port_owner(node, node.address, port)
        if owner is not None:
            raise PortInUse(f"{node.address}:{port} on {node.name} is already in use by "
                            f"{owner}: stop it, or pass another port= / controller_port= "
                            f"to ReferenceDB")

    def _held(self, node: Node, daemon: str) -> str:
        """Why a daemon may have failed to listen: someone else has its port."""
        port = self.controller_port if daemon == CONTROLLER else self.port
        owner = port_owner(node, node.address, port)
        return f" ({node.address}:{port} is held by {owner})" if owner else ""


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
