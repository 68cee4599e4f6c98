"""What a DB adapter that runs its system as daemons on `Node`s shares,
whichever system: the nodes in order (node i has node id i + 1), which
daemons should run, readiness and leadership asked with the Kafka protocol
(cluster/readiness.py), crash detection, log tails and collecting logs.

Subclasses (`ReferenceDB`, `CommandDB`) say which daemons a node runs
(`daemons_on`), where their logs and data are (`log_files`, `data_dirs`),
the broker daemon's name (`broker_daemon`) and the client port (`port`).
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path, PurePath

from cluster.node import Node, until_frozen
from cluster.readiness import (broker_hosts, group_coordinator_id, metadata_problem,
                               partition_state, same_host)

LOG_TAIL_LINES = 15
READY_TIMEOUT = 60.0    # seconds a cluster may take to be ready, unless told


class DaemonDB:
    port: int
    broker_daemon: str = "broker"
    ready_timeout: float = READY_TIMEOUT     # seconds start_all waits for a ready cluster

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self._expected: set[tuple[str, str]] = set()  # (node, daemon) that should run
        self._dead: list[tuple[str, str, float]] = []  # (node, daemon, monotonic) not told yet
        self._watching = threading.Lock()
        self._advertised: dict[int, Node] = {}   # broker id -> node, by advertised host

    # -- what subclasses say -------------------------------------------------

    def daemons_on(self, node: Node) -> list[str]:
        raise NotImplementedError

    def log_files(self, node: Node) -> list[PurePath]:
        raise NotImplementedError

    def data_dirs(self, node: Node) -> list[str]:
        """Directories under the node's workdir listed in data-listing.txt."""
        return ["data"]

    # -- the cluster -----------------------------------------------------------

    def bind(self, nodes: Sequence[Node]) -> None:
        """The cluster's nodes, in order: node i (from 0) has node id i + 1."""
        if not nodes:
            raise ValueError(f"nodes=[]: {type(self).__name__} needs at least one node")
        self.nodes = list(nodes)

    def start_all(self, nodes: Sequence[Node], *, timeout: float | None = None) -> None:
        """Bind nodes, set each up and wait until the cluster is ready
        (timeout: the DB's ready_timeout)."""
        self.bind(nodes)
        for node in self.setup_order():
            self.setup(node)
        self.wait_ready(self.ready_timeout if timeout is None else timeout)

    def setup(self, node: Node) -> None:
        raise NotImplementedError

    def setup_order(self) -> list[Node]:
        """The order start_all sets the nodes up in."""
        return self.nodes

    def broker_nodes(self) -> list[Node]:
        """The nodes a broker runs on (node i from 0 is broker i + 1)."""
        return [n for n in self.nodes if self.broker_daemon in self.daemons_on(n)]

    def bootstrap_servers(self) -> str:
        self._check_bound("bootstrap_servers")
        return ",".join(f"{node.address}:{self.port}" for node in self.broker_nodes())

    def running_brokers(self) -> list[Node]:
        """The broker nodes whose broker runs now (a paused one runs)."""
        return [n for n in self.broker_nodes() if n.is_running(self.broker_daemon)]

    def node_id(self, node: Node) -> int:
        for i, bound in enumerate(self.nodes):
            if bound.name == node.name:
                return i + 1
        raise ValueError(f"node={node.name!r} is not one of this DB's nodes "
                         f"{[n.name for n in self.nodes]}")

    def wait_ready(self, timeout: float = READY_TIMEOUT) -> None:
        """Until every running broker listens, Metadata lists it, and every
        partition has a leader. A daemon that exits unasked fails at once; a
        timeout says what was checked and shows each node's log tail."""
        self._check_bound("wait_ready")
        deadline = time.monotonic() + timeout
        problem = "no metadata yet"
        while time.monotonic() < deadline:
            self._check_alive()
            running = self.running_brokers()
            # A broker may listen only once it is registered; a restarted one
            # is still listed under its old registration.
            closed = [n.name for n in running if not _accepts(n.address, self.port)]
            if closed:
                problem = (f"brokers not listening yet on port {self.port} (a TCP connect "
                           f"from here): {closed}")
                time.sleep(0.1)
                continue
            bootstrap = ",".join(f"{n.address}:{self.port}" for n in running)
            # By address: a broker may choose its own node id.
            problem = metadata_problem(bootstrap, set(),
                                       min(5.0, max(0.5, deadline - time.monotonic())),
                                       addresses={n.address for n in running})
            if problem is None:
                return
            problem = f"Metadata from {bootstrap}: {problem}"
            time.sleep(0.2)
        raise TimeoutError(f"{type(self).__name__}: cluster not ready after {timeout} s: "
                           f"{problem}\n" + "\n".join(self._log_tail(n) for n in self.nodes))

    def deaths(self) -> list[tuple[str, str, float]]:
        """(node, daemon, time.monotonic() it was seen) for each daemon that
        should run (started, not killed or stopped through this adapter)
        and does not, each once: it is expected again only when started
        again. A start or a kill through the adapter looks at the node
        first, so neither erases a death that came before it."""
        for node in self.nodes:
            self._look_at(node)
        with self._watching:
            found, self._dead = self._dead, []
        return found

    def _look_at(self, node: Node) -> None:
        """Note the daemons of node that should run and do not (deaths())."""
        for daemon in self.daemons_on(node):
            if (node.name, daemon) not in self._expected or node.is_running(daemon):
                continue
            with self._watching:
                if (node.name, daemon) in self._expected:
                    self._expected.discard((node.name, daemon))
                    self._dead.append((node.name, daemon, time.monotonic()))

    def primary(self, topic: str, partition: int) -> Node | None:
        """The leader of topic-partition as Metadata from the running
        brokers says; None when it has none or no broker answers."""
        state = self._partition_state(topic, partition)
        return None if state is None or state[0] is None else self._by_id(state[0])

    def in_sync(self, topic: str, partition: int) -> list[Node] | None:
        """The nodes in topic-partition's ISR by Metadata (None: no answer)."""
        state = self._partition_state(topic, partition)
        return None if state is None else [n for n in map(self._by_id, state[1]) if n]

    def group_coordinator(self, group: str) -> Node | None:
        """The node coordinating group (FindCoordinator; None: no answer)."""
        running = self.running_brokers()
        found = group_coordinator_id(",".join(f"{n.address}:{self.port}" for n in running),
                                     group) if running else None
        return None if found is None else self._by_id(found)

    def _partition_state(self, topic: str, partition: int):
        running = self.running_brokers()
        if not running:
            return None
        return partition_state(",".join(f"{n.address}:{self.port}" for n in running),
                               topic, partition)

    # Whether node i (from 0) has node id i + 1 because kchaos told it so.
    ids_by_position: bool = True

    def _by_id(self, node_id: int) -> Node | None:
        """The node of a broker id: the one at the address the broker
        advertises (Metadata), so brokers that choose their own ids are
        found; by position only where kchaos gave the ids (a controller
        apart from the brokers is in no Metadata)."""
        node = self._advertised.get(node_id)
        if node is None:
            running = self.running_brokers()
            hosts = broker_hosts(",".join(f"{n.address}:{self.port}" for n in running)) \
                if running else None
            for broker_id, host in (hosts or {}).items():
                found = next((n for n in self.nodes if same_host(n.address, host)), None)
                if found is not None:
                    self._advertised[broker_id] = found
            node = self._advertised.get(node_id)
        if node is None and self.ids_by_position and 1 <= node_id <= len(self.nodes):
            return self.nodes[node_id - 1]
        return node

    # -- one node ----------------------------------------------------------------

    # Kill and pause hit the node, every daemon on it, as a crash or a freeze
    # of the machine: a controller beside a broker is a fault target too.

    def alive(self, node: Node) -> bool:
        """Every daemon of the node runs (heal-all starts what does not)."""
        return all(node.is_running(daemon) for daemon in self.daemons_on(node))

    def kill(self, node: Node, *, daemon: str | None = None) -> None:
        """Every daemon of node, or only `daemon` (a validation recipe
        kills the broker and keeps the controller beside it)."""
        self._look_at(node)
        for name in [daemon] if daemon else self.daemons_on(node):
            self._expected.discard((node.name, name))
            node.stop_daemon(name, sig=signal.SIGKILL)

    def pause(self, node: Node, *, daemon: str | None = None) -> None:
        names = [daemon] if daemon else self.daemons_on(node)
        for name in names:
            node.signal(name, signal.SIGSTOP)
        for name in names:
            until_frozen(node, _running_pid(node, name), True, f"the {name}")

    def resume(self, node: Node) -> None:
        # In reverse: the reference broker's controller before its broker.
        for name in reversed(self.daemons_on(node)):
            node.signal(name, signal.SIGCONT)
        for name in self.daemons_on(node):
            until_frozen(node, _running_pid(node, name), False, f"the {name}")

    def teardown(self, node: Node) -> None:
        """SIGKILL every daemon of ours on node (stop_daemon continues a
        paused one first); data stays for collecting."""
        for daemon in self.daemons_on(node):
            self._expected.discard((node.name, daemon))
            node.stop_daemon(daemon, sig=9)

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
        for sub in self.data_dirs(node):
            found = node.run(["find", str(node.workdir / sub), "-type", "f",
                              "-printf", r"%P\t%s\n"], check=False)
            listing += [f"{sub}/{line}" for line in found.stdout.splitlines()]
        (dest / "data-listing.txt").write_text("".join(f"{line}\n" for line in sorted(listing)))

    # -- inside --------------------------------------------------------------------

    def _check_bound(self, method: str) -> None:
        if not self.nodes:
            raise ValueError(f"{type(self).__name__}.{method}: the DB does not know its nodes "
                             f"yet; call start_all(nodes) or bind(nodes) first")

    def _check_alive(self) -> None:
        """A daemon that should run and does not has crashed."""
        dead = [(n, daemon) for n in self.nodes for daemon in self.daemons_on(n)
                if (n.name, daemon) in self._expected and not n.is_running(daemon)]
        if dead:
            raise RuntimeError(f"{type(self).__name__}: "
                               + "; ".join(f"the {d} on {n.name} exited{self._held(n, d)}"
                                           for n, d in dead)
                               + "\n" + "\n".join(self._log_tail(n) for n, _ in dead))

    def _held(self, node: Node, daemon: str) -> str:
        """Why a daemon may have failed to listen (a subclass may know)."""
        return ""

    def _log_tail(self, node: Node) -> str:
        tails = []
        for path in self.log_files(node):
            try:
                lines = node.get(path).decode(errors="replace").splitlines()
            except FileNotFoundError:
                lines = ["(no log)"]
            tails.append(f"--- {node.name}:{path}\n" + "\n".join(lines[-LOG_TAIL_LINES:]))
        return "\n".join(tails)


def _running_pid(node: Node, daemon: str):
    """pids() for until_frozen: the daemon's, while it runs."""
    def pids() -> list[int]:
        pid = node.pid(daemon)
        return [pid] if pid is not None and node.is_running(daemon) else []
    return pids


def _accepts(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False
