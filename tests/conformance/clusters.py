"""The four clusters the suite compares: the reference broker and Apache
Kafka, on one node and on three, each on loopback addresses of its own
(127.0.<octet>.x: every 127/8 address is the loopback interface, so no
namespace, root or bridge is needed and the fixed ports 9092/9093 of both
systems never collide).

Both run with the same settings where a comparison needs them; otherwise
each keeps its own defaults (Kafka's from the shipped spec,
cluster/kafka/kafka.toml, which already sets group.initial.rebalance.delay.ms=0).
The scenarios' records are stamped an hour or two ago (strategies.T0), so
Kafka's 7-day time retention, which this broker never acts on, never
deletes them.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
import socket
from dataclasses import dataclass, field
from pathlib import Path

from cluster.command_db import CommandDB
from cluster.db import ReferenceDB
from cluster.kafka import spec_path
from cluster.local import LocalNode
from cluster.system_spec import load_spec

KAFKA_VERSION = "4.4.0"
PORT = 9092
READY_TIMEOUT = 180.0
# The reference broker's default is 3000 ms; Kafka's spec sets 0 (as Kafka's
# own sample server.properties does): a first JoinGroup is not held.
REFERENCE_CONFIG = ["group.initial.rebalance.delay.ms=0"]


@dataclass
class Cluster:
    """A running cluster: its kind ("reference" or "kafka"), nodes (node id
    i + 1 is nodes[i]) and the DB adapter that started it."""
    kind: str
    nodes: list[LocalNode]
    db: object
    addresses: dict[int, tuple[str, int]] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.addresses)

    def stop(self) -> None:
        for node in self.nodes:
            node.stop_all()


def octet() -> int:
    """A third octet for this run's 127.0.x.0/24 (per process, so two runs
    at once do not collide), whose ports are free."""
    for candidate in [100 + (os.getpid() + i) % 150 for i in range(150)]:
        if not any(_listening(f"127.0.{candidate}.{last}", port)
                   for last in (11, 21, 22, 23, 31, 41, 42, 43) for port in (9092, 9093)):
            return candidate
    raise RuntimeError("no free 127.0.x.0/24 for the conformance clusters")


def _listening(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) == 0


def _nodes(root: Path, name: str, base: str, count: int) -> list[LocalNode]:
    """count nodes `<name>-n1`.. on base.1, base.2, ... (base: "127.0.X.2")."""
    prefix, last = base.rsplit(".", 1)
    return [LocalNode(f"{name}-n{i}", f"{prefix}.{int(last) + i - 1}", root / f"{name}-n{i}")
            for i in range(1, count + 1)]


def start(kind: str, root: Path, size: int, first_address: str) -> Cluster:
    nodes = _nodes(root, f"{kind}{size}", first_address, size)
    for node in nodes:
        node.workdir.mkdir(parents=True, exist_ok=True)
    if kind == "reference":
        db = ReferenceDB(config=REFERENCE_CONFIG, port=PORT)
    else:
        db = CommandDB(load_spec(spec_path()), kafka_version=KAFKA_VERSION)
    cluster = Cluster(kind, nodes, db,
                      {i + 1: (n.address, PORT) for i, n in enumerate(nodes)})
    try:
        db.bind(nodes)
        # Each node's setup at once (Kafka's is a JVM formatting storage,
        # seconds each), then one wait until the cluster serves.
        with ThreadPoolExecutor(len(nodes)) as pool:
            list(pool.map(db.setup, nodes))
        db.wait_ready(READY_TIMEOUT)
    except BaseException:
        cluster.stop()
        raise
    return cluster
