"""`--db command` (and `--db kafka`, the same with a spec kchaos ships): any
Kafka-compatible system, run on the nodes the way its system spec
(cluster/system_spec.py) says, and hurt there like the reference broker:
kill and pause signal every daemon of the node (each daemon's whole process
group, so a wrapper script's child is hit too), partitions are the nodes'
own firewalls, disk faults gate the spec's data directory.

Readiness is asked with the Kafka protocol on each broker node's address:
the port accepts connections and Metadata lists a broker advertised at
each node's address, with a leader for every partition. Brokers are
matched to nodes by that address, so a broker may choose its own node id;
a spec that gives them (`{node_id}`: Kafka's node.id) also lets kchaos find
nodes that are in no Metadata, such as controllers apart from the brokers.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from cluster.daemon_db import DaemonDB
from cluster.node import Node
from cluster.system_spec import SystemSpec, fill, templates

# Internal topics (offsets, transactions) get this many replicas, or one per
# broker when there are fewer: Kafka cannot create them with more.
INTERNAL_REPLICATION = 3


class CommandDB(DaemonDB):
    def __init__(self, spec: SystemSpec, *, config: Sequence[str] = (),
                 kafka_version: str | None = None):
        super().__init__()
        self.spec = spec
        self.config = list(config)
        self.ready_timeout = spec.ready_timeout
        self.port = spec.port
        self.broker_daemon = spec.broker
        self.kafka_version = kafka_version
        # Node ids are kchaos's only where the spec gives them ({node_id}).
        self.ids_by_position = any("{node_id}" in template for _, template in templates(spec))
        self._lib = None            # the distribution's directory here, once fetched
        self._dist: dict[str, str] = {}     # node name -> its {dist}

    def bind(self, nodes: Sequence[Node]) -> None:
        if len(nodes) <= self.spec.controllers:
            raise ValueError(f"nodes={[n.name for n in nodes]}: {self.spec.source} runs "
                             f"{self.spec.controllers} controller nodes and needs a broker "
                             f"node besides")
        super().bind(nodes)

    def controller_nodes(self) -> list[Node]:
        """The nodes of their own that run the controllers (none: every node
        runs what the spec puts on "all")."""
        return self.nodes[len(self.nodes) - self.spec.controllers:] if self.spec.controllers \
            else []

    def setup_order(self) -> list[Node]:
        """The controllers first: a broker waits for them only so long
        (Kafka: initial.broker.registration.timeout.ms, then it exits)."""
        controllers = self.controller_nodes()
        return controllers + [n for n in self.nodes if n not in controllers]

    def _on(self, node_set: str, node: Node) -> bool:
        if node_set == "all":
            return True
        if node_set == "first":
            return node.name == self.nodes[0].name
        controller = any(n.name == node.name for n in self.controller_nodes())
        return controller if node_set == "controllers" else not controller

    def daemons_on(self, node: Node) -> list[str]:
        self._check_bound("daemons_on")
        return [d.name for d in self.spec.daemons if self._on(d.on, node)]

    def log_files(self, node: Node) -> list[PurePath]:
        return [node.workdir / f"{name}.log" for name in self.daemons_on(node)]

    def data_dirs(self, node: Node) -> list[str]:
        return [self.spec.data_dir]

    def controller_node(self) -> Node | None:
        """The node of the active controller, as DescribeQuorum from the
        running brokers says (cluster/kafka/quorum.py): a KRaft system's;
        None where nobody answers it."""
        from cluster.kafka.quorum import active_controller
        running = self.running_brokers()
        found = active_controller(",".join(f"{n.address}:{self.port}" for n in running),
                                  timeout=3.0) if running else None
        return None if found is None else self._by_id(found)

    def values(self, node: Node) -> dict:
        """The placeholders' values on node (cluster/system_spec.py)."""
        self._check_bound("values")
        brokers = len(self.nodes) - self.spec.controllers
        common = {"port": self.spec.port, "first_address": self.nodes[0].address,
                  "replication_factor": min(INTERNAL_REPLICATION, brokers),
                  "min_insync_replicas": min(INTERNAL_REPLICATION - 1, brokers),
                  "config": "\n".join(self.config)}
        quorum = self.controller_nodes() or self.nodes
        peers = ",".join(fill(self.spec.peer, {**common, **self._own(n)}) for n in quorum)
        return {**common, **self._own(node), "peers": peers, **self._distribution(node)}

    def _own(self, node: Node) -> dict:
        return {"node_id": self.node_id(node), "node_name": node.name, "address": node.address,
                "workdir": str(node.workdir), "data_dir": str(node.workdir / self.spec.data_dir),
                "python": node.python or "python3"}

    def _distribution(self, node: Node) -> dict:
        """{dist} and {java} of a spec whose system kchaos brings: Apache
        Kafka's jars at kafka_version (cluster/kafka/dist.py)."""
        if self.spec.distribution is None:
            return {}
        from cluster.kafka import dist
        if self._lib is None:
            self._lib = dist.ensure(self.kafka_version or dist.DEFAULT_VERSION)
        if node.name not in self._dist:
            self._dist[node.name] = dist.install(node, self._lib)
        return {"dist": self._dist[node.name], "java": dist.java_on(node)}

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
            if self._on(f.on, node):
                node.put(node.workdir / f.path, fill(f.text, values).encode())
        for daemon in self.spec.daemons:
            if daemon.name in self.daemons_on(node):
                for argv in daemon.setup:
                    node.run([fill(a, values) for a in argv], timeout=120.0)
        self.start(node)

    def start(self, node: Node) -> None:
        """Start each daemon of node that does not run (the broker last)."""
        self._look_at(node)
        names = self.daemons_on(node)
        for name in sorted(names, key=lambda name: name == self.broker_daemon):
            if not node.is_running(name):
                self._start_daemon(node, name)

    def _start_daemon(self, node: Node, name: str) -> None:
        daemon = self.spec.daemon(name)
        values = self.values(node)
        node.start_daemon(name, [fill(a, values) for a in daemon.argv],
                          env={k: fill(v, values) for k, v in daemon.env.items()} or None,
                          log=node.workdir / f"{name}.log")
        self._expected.add((node.name, name))

    def stop(self, node: Node) -> None:
        """Stop every daemon of node the spec's way (its signal, then
        SIGKILL after its timeout)."""
        self._look_at(node)
        for name in self.daemons_on(node):
            daemon = self.spec.daemon(name)
            self._expected.discard((node.name, name))
            node.stop_daemon(name, sig=daemon.stop_signal, timeout=daemon.stop_timeout)
