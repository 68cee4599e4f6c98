"""`--db command`: any Kafka-compatible system, run on the nodes the way its
system spec (cluster/system_spec.py) says, and hurt there like the
reference broker: kill and pause signal the spec's broker daemon (its
whole process group, so a wrapper script's child is hit too), partitions
are the nodes' own firewalls, disk faults gate the spec's data directory.

Readiness is asked with the Kafka protocol on each node's address: the
port accepts connections and Metadata lists the node ids 1..N with a
leader for every partition — so the spec must give each node the node id
`{node_id}` (Kafka's node.id, Redpanda's node_id).
"""

from __future__ import annotations

import signal
from pathlib import PurePath

from cluster.daemon_db import DaemonDB
from cluster.node import Node
from cluster.system_spec import SystemSpec, fill


class CommandDB(DaemonDB):
    def __init__(self, spec: SystemSpec):
        super().__init__()
        self.spec = spec
        self.ready_timeout = spec.ready_timeout
        self.port = spec.port
        self.broker_daemon = spec.broker

    def daemons_on(self, node: Node) -> list[str]:
        first = bool(self.nodes) and node.name == self.nodes[0].name
        return [d.name for d in self.spec.daemons if d.on == "all" or first]

    def log_files(self, node: Node) -> list[PurePath]:
        return [node.workdir / f"{name}.log" for name in self.daemons_on(node)]

    def data_dirs(self, node: Node) -> list[str]:
        return [self.spec.data_dir]

    def controller_node(self) -> Node | None:
        """A spec does not say where the controller is: unknown."""
        return None

    def values(self, node: Node) -> dict:
        """The placeholders' values on node (cluster/system_spec.py)."""
        self._check_bound("values")
        common = {"port": self.spec.port, "first_address": self.nodes[0].address}
        peers = ",".join(fill(self.spec.peer, {**common, **self._own(n)}) for n in self.nodes)
        return {**common, **self._own(node), "peers": peers}

    def _own(self, node: Node) -> dict:
        return {"node_id": self.node_id(node), "node_name": node.name, "address": node.address,
                "workdir": str(node.workdir), "data_dir": str(node.workdir / self.spec.data_dir),
                "python": node.python or "python3"}

    # -- one node ----------------------------------------------------------

    def setup(self, node: Node) -> None:
        """From empty data: stop what runs, empty the data directory (a disk
        gate mounted there stays), write the spec's files, run each
        daemon's setup commands, start the daemons."""
        self._check_bound("setup")
        self.teardown(node)
        data = str(node.workdir / self.spec.data_dir)
        if node.run(["mountpoint", "-q", data], check=False).returncode == 0:
            node.run(["find", data, "-mindepth", "1", "-delete"])
        else:
            node.run(["rm", "-rf", data])
            node.run(["mkdir", "-p", data])
        node.run(["rm", "-f", *map(str, self.log_files(node))])
        values = self.values(node)
        for f in self.spec.files:
            node.put(node.workdir / f.path, fill(f.text, values).encode())
        for daemon in self.spec.daemons:
            if daemon.name in self.daemons_on(node):
                for argv in daemon.setup:
                    node.run([fill(a, values) for a in argv], timeout=120.0)
        for name in self.daemons_on(node):
            if name != self.broker_daemon:
                self._start_daemon(node, name)
        self.start(node)

    def start(self, node: Node) -> None:
        if node.is_running(self.broker_daemon):
            return
        self._start_daemon(node, self.broker_daemon)

    def _start_daemon(self, node: Node, name: str) -> None:
        daemon = self.spec.daemon(name)
        values = self.values(node)
        node.start_daemon(name, [fill(a, values) for a in daemon.argv],
                          env={k: fill(v, values) for k, v in daemon.env.items()} or None,
                          log=node.workdir / f"{name}.log")
        self._expected.add((node.name, name))

    def stop(self, node: Node) -> None:
        """Stop the broker the spec's way (its signal, then SIGKILL after
        its timeout)."""
        daemon = self.spec.daemon(self.broker_daemon)
        self._expected.discard((node.name, daemon.name))
        node.stop_daemon(daemon.name, sig=daemon.stop_signal, timeout=daemon.stop_timeout)

    def kill(self, node: Node) -> None:
        self._expected.discard((node.name, self.broker_daemon))
        node.stop_daemon(self.broker_daemon, sig=signal.SIGKILL)

    def pause(self, node: Node) -> None:
        node.signal(self.broker_daemon, signal.SIGSTOP)

    def resume(self, node: Node) -> None:
        node.signal(self.broker_daemon, signal.SIGCONT)
