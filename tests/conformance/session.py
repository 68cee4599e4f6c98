"""One cluster as a scenario sees it: connections per node (and per
channel, so that each group member has its own socket), the negotiated
API versions, and what each cluster assigned on its own — member ids,
producer ids — under the names the scenario gave them, so that the two
clusters' answers can be compared by those names.

Waiting for metadata to spread after a topic is created, and finding
leaders and coordinators, is done here the way a client does it, and is
not compared: it is not an answer to the scenario's requests.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from tests.conformance import requests as rq
from tests.conformance.clusters import Cluster
from tests.conformance.wire import Connection

SETTLE_TIMEOUT = 20.0       # s: a new topic known everywhere, a coordinator loaded


class Session:
    def __init__(self, cluster: Cluster, versions: dict[int, int], prefix: str):
        self.cluster = cluster
        self.prefix = prefix
        self.v = versions
        self.kind = cluster.kind
        self.size = cluster.size
        self._conns: dict[tuple[int, str], Connection] = {}
        self.members: dict[str, str] = {}          # scenario name -> member id
        self.producers: dict[str, list[int]] = {}  # scenario name -> [producer id, epoch]
        self.coordinators: dict[tuple[int, str], int] = {}    # (key type, key) -> node
        self.manual: set[str] = set()       # topics created with a manual assignment
        self.groups: dict[str, object] = {}  # group -> what the cluster said of it (steps_groups)
        self.log_end: dict[tuple[str, int], int] = {}   # what this scenario appended, by partition
        # (producer, topic, partition) -> (epoch, next sequence) (steps_transactions)
        self.sequences: dict[tuple[str, str, int], tuple[int, int]] = {}
        self._barriers = 0

    def topic(self, name: str) -> str:
        """The scenario's topic `name` ("t0") as named on the cluster: unique
        per example; a name starting with "!" is used as it is (an invalid
        or internal name)."""
        return name[1:] if name.startswith("!") else f"{self.prefix}-{name}"

    def group(self, name: str) -> str:
        """As topic(): "!" + a raw group id."""
        return name[1:] if name.startswith("!") else f"{self.prefix}-{name}"

    # -- connections -----------------------------------------------------

    def conn(self, node: int, channel: str = "main") -> Connection:
        key = (node, channel)
        conn = self._conns.get(key)
        if conn is None or conn.closed:
            conn = self._conns[key] = Connection(*self.cluster.addresses[node])
        return conn

    def call(self, node: int, request: Any, channel: str = "main") -> Any:
        return self.conn(node, channel).call(request)

    def close(self) -> None:
        for conn in self._conns.values():
            conn.close()
        self._conns.clear()

    # -- what a client looks up -------------------------------------------

    def metadata(self, topics: list[str] | None, node: int = 1):
        return self.call(node, rq.metadata(self.v[rq.METADATA], topics))

    def leader(self, topic: str, partition: int) -> int:
        """The partition's leader by Metadata (node 1 if nobody knows:
        the request then gets the broker's own error, which is compared)."""
        meta = self.metadata([topic])
        for t in meta.topics:
            for p in t.partitions:
                if p.partition_index == partition and p.leader_id >= 0:
                    return p.leader_id
        return 1

    def node_for(self, topic: str, partition: int, via: str = "leader") -> int:
        """Where a partition request goes: its leader, a follower (the lowest
        id), or a broker that has no replica of it ("other"); the leader
        when the cluster has no such broker (the same on both clusters,
        since replication factors are the same)."""
        leader = self.leader(topic, partition)
        if via == "leader":
            return leader
        meta = self.metadata([topic])
        replicas = next((p.replica_nodes for t in meta.topics for p in t.partitions
                         if p.partition_index == partition), [])
        if via == "follower":
            candidates = sorted(r for r in replicas if r != leader)
        else:
            candidates = sorted(n for n in self.cluster.addresses if n not in replicas)
        return candidates[0] if candidates else leader

    def wait_topic(self, topic: str) -> None:
        """Until every broker's Metadata shows the topic with a leader for
        each partition and the full ISR (a client would retry meanwhile)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            if all(self._settled(topic, node) for node in self.cluster.addresses):
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.kind}: topic {topic} not settled on every broker "
                                   f"within {SETTLE_TIMEOUT} s")
            time.sleep(0.05)

    def metadata_barrier(self) -> None:
        """Until every broker has applied the metadata changes made so far.
        Kafka answers IncrementalAlterConfigs once its controller has the
        change, before the brokers' metadata caches do, so a DescribeConfigs
        right after may not show it; a topic created after the change is
        seen by a broker only once it has applied everything before it (the
        metadata log is applied in order). Not compared."""
        self._barriers += 1
        name = f"{self.prefix}-barrier-{self._barriers}"
        answer = self.call(1, rq.create_topics(self.v[rq.CREATE_TOPICS], [
            (name, 1, 1, None, [])]))
        if answer.topics[0].error_code != ErrorCode.none:
            raise RuntimeError(f"{self.kind}: barrier topic {name}: "
                               f"{answer.topics[0].error_code.name}")
        self.wait_topic(name)

    def _settled(self, topic: str, node: int) -> bool:
        """Node's Metadata shows every partition led, with its full ISR,
        and each leader answers ListOffsets as the leader."""
        meta = self.metadata([topic], node)
        if not all(t.error_code == ErrorCode.none and t.partitions and
                   all(p.leader_id >= 0 and sorted(p.isr_nodes) == sorted(p.replica_nodes)
                       for p in t.partitions) for t in meta.topics):
            return False
        for p in meta.topics[0].partitions:
            answer = self.call(p.leader_id, rq.list_offsets(
                self.v[rq.LIST_OFFSETS], topic, p.partition_index, rq.LATEST))
            if answer.topics[0].partitions[0].error_code != ErrorCode.none:
                return False
        return True

    def coordinator(self, key: str, key_type: int = rq.GROUP_KEY) -> int:
        """The coordinator node of a group (or, key type 1, of a
        transactional id): FindCoordinator, retried while the coordinator is
        not available or loading (Kafka creates `__transaction_state` on
        the first transactional lookup)."""
        if (key_type, key) in self.coordinators:
            return self.coordinators[(key_type, key)]
        deadline = time.monotonic() + SETTLE_TIMEOUT * (1 + key_type)
        while True:
            answer = self.call(1, rq.find_coordinator(self.v[rq.FIND_COORDINATOR], key,
                                                      key_type))
            if answer.error_code == ErrorCode.none:
                self.coordinators[(key_type, key)] = answer.node_id
                return answer.node_id
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.kind}: no coordinator for {key}: "
                                   f"{answer.error_code.name}")
            time.sleep(0.1)

    # -- names -------------------------------------------------------------

    def node_of(self, host: str, port: int) -> str:
        """A broker address as the node it belongs to ("node2"), or as it
        is when it is none of this cluster's."""
        for node, address in self.cluster.addresses.items():
            if address == (host, port):
                return f"node{node}"
        return f"{host}:{port}"

    def member_name(self, member_id: str | None) -> str | None:
        """A member id as the scenario's name for it."""
        if member_id in (None, ""):
            return member_id
        for name, known in self.members.items():
            if known == member_id:
                return name
        return "<unknown member id>"

    def producer_name(self, producer_id: int) -> Any:
        if producer_id < 0:
            return producer_id
        for name, (known, _) in self.producers.items():
            if known == producer_id:
                return name
        return "<unknown producer id>"
