"""What a recipe script sees of the cluster — partition 0's leader, ISR and
high watermark, by cluster metadata and ListOffsets — and the one fault
of their own the recipes use, `BrokerLinkCut`.

A whole-node fault cannot keep a follower in the ISR while it stops
replicating: the single controller runs on n1, and a paused, killed or
partitioned broker stops heartbeating, is fenced and leaves every ISR.
`BrokerLinkCut` cuts only the brokers' own port between two nodes: the
follower stays in the ISR until replica.lag.time.max.ms while the leader
appends what nobody else holds.

Partition 0's replicas, in election order, are the brokers by id rotated
to start at its first leader (StripedReplicaPlacer): `order` names the
roles from that leader.
"""

from __future__ import annotations

import itertools
from collections import defaultdict

from nemesis.core import FaultError
from nemesis.firewall import add_drops, check_own_network, remove_tagged


class BrokerLinkCut:
    """The brokers' links between `node` and each of `peers` cut, both ways:
    DROP rules on the broker port (nemesis/firewall.py) for requests and
    for answers, so not even a fetch already in flight gets through. The
    controller's port and the clients (on the bridge) are not touched.
    `inbound_only`: only the connections the peers open to `node` (their
    requests to it, its answers to them); `node`'s own requests to them
    still go through."""
    start_f, stop_f = "start-partition", "stop-partition"
    _serial = itertools.count(1)

    def __init__(self, node: str, peers: list[str], inbound_only: bool = False):
        self.node, self.peers, self.inbound_only = node, list(peers), inbound_only
        self.tag = f"broker-link-cut-{next(self._serial)}"
        self.cut: list[str] = []

    def asked(self) -> dict:
        return {"kind": "broker-links", "node": self.node, "peers": self.peers,
                **({"inbound_only": True} if self.inbound_only else {})}

    def start(self, cluster, rng) -> dict:
        check_own_network(cluster.nodes)
        port = str(cluster.db.port)
        drops = defaultdict(list)
        for peer in self.peers:
            for a, b in ((self.node, peer), (peer, self.node)):
                source = cluster.node(b).address
                # At a: b's requests to a's port, and b's answers to a's requests.
                if not self.inbound_only or a == self.node:
                    drops[a].append(["-s", source, "-p", "tcp", "--dport", port])
                if not self.inbound_only or a == peer:
                    drops[a].append(["-s", source, "-p", "tcp", "--sport", port])
        try:
            for name, matches in drops.items():
                add_drops(cluster.node(name), self.tag, matches)
                self.cut.append(name)
        except FaultError:
            self.stop(cluster)
            raise
        return {**self.asked(), "port": int(port)}

    def stop(self, cluster) -> dict:
        removed = {name: len(remove_tagged(cluster.node(name), self.tag)) for name in self.cut}
        self.cut = []
        return {**self.asked(), "rules": removed}


def settled(nemesis, replicas: int, timeout: float = 30.0):
    """Partition 0's leader once its ISR holds `replicas` nodes and sends
    are being acknowledged (None if not in time, or the phase is over)."""
    found = []

    def check() -> bool:
        leader, in_sync = nemesis.cluster.leader(), nemesis.cluster.in_sync()
        if leader is not None and in_sync is not None and len(in_sync) >= replicas:
            found.append(leader)
        return bool(found)
    if not nemesis.until(check, timeout) or not acknowledged(nemesis, 100, timeout):
        return None
    return found[0]


def order(nemesis, first) -> list[str]:
    names = [node.name for node in nemesis.cluster.nodes]
    start = names.index(first.name)
    return names[start:] + names[:start]


def leads(nemesis, name: str) -> bool:
    leader = nemesis.cluster.leader()
    return leader is not None and leader.name == name


def isr(nemesis, topic: str | None = None) -> list[str]:
    """Partition 0's ISR (the first topic's by default), by name."""
    return sorted(node.name for node in nemesis.cluster.in_sync(topic) or [])


def high_watermark(nemesis) -> int | None:
    """By ListOffsets from a client of the script's own; None: no answer."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition
    consumer = Consumer({"bootstrap.servers": nemesis.cluster.bootstrap, "log_level": 2,
                         "group.id": "kchaos-recipe-watch", "socket.timeout.ms": 2000})
    try:
        return consumer.get_watermark_offsets(
            TopicPartition(nemesis.cluster.topics[0], 0), timeout=2, cached=False)[1]
    except KafkaException:
        return None
    finally:
        consumer.close()


def acknowledged(nemesis, records: int, timeout: float) -> bool:
    """Until the high watermark has moved `records` past where it is now
    (that many more sends committed); False if not in time."""
    start = None

    def grown() -> bool:
        nonlocal start
        mark = high_watermark(nemesis)
        start = mark if start is None else start
        return None not in (start, mark) and mark >= start + records
    return nemesis.until(grown, timeout, interval=0.5)
