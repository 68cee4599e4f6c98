"""The clusters the conformance suite compares, started once per test
session and size and shared by every example: the reference broker and
Apache Kafka side by side, on 1 node and on 3 (clusters.py). Startup is
the expensive part (Kafka's JVMs), so each pair is started only when a
test of its size first asks, both systems at once, and stopped at the end
of the session.

Before the first example each cluster is warmed up the way a client would
wait for it: every `__consumer_offsets` partition's coordinator answers
(Kafka creates and loads them on first use) and InitProducerId answers
(Kafka's first answers COORDINATOR_LOAD_IN_PROGRESS until it has a block
of producer ids).
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.group.records import partition_for
from tests.conformance import clusters
from tests.conformance import requests as rq
from tests.conformance.clusters import Cluster
from tests.conformance.wire import Closed, Connection

OFFSETS_PARTITIONS = 50     # offsets.topic.num.partitions, both systems' default
WARM_UP_TIMEOUT = 120.0


@dataclass
class Pair:
    size: int
    reference: Cluster
    kafka: Cluster
    versions: dict[int, int]        # api key -> the version both brokers and kio speak


def advertised(cluster: Cluster) -> dict[int, tuple[int, int]]:
    conn = Connection(*cluster.addresses[1])
    try:
        answer = conn.call(rq.api_versions())
    finally:
        conn.close()
    return {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}


def negotiate(*tables: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Per compared API the highest version every broker and kio support
    (and a client may send: rq.CLIENT_MAX)."""
    versions = {}
    for key in rq.COMPARED:
        low = max(t[key][0] for t in tables)
        high = min(min(t[key][1] for t in tables), rq.kio_max_version(key),
                   rq.CLIENT_MAX.get(key, 1 << 15))
        if low > high:
            raise RuntimeError(f"api key {key}: no version both brokers and kio speak "
                               f"({[t[key] for t in tables]})")
        versions[key] = high
    return versions


def group_names_covering_partitions(prefix: str) -> list[str]:
    """A group name for every __consumer_offsets partition."""
    found: dict[int, str] = {}
    n = 0
    while len(found) < OFFSETS_PARTITIONS:
        name = f"{prefix}-{n}"
        found.setdefault(partition_for(name, OFFSETS_PARTITIONS), name)
        n += 1
    return list(found.values())


def warm_up(cluster: Cluster, versions: dict[int, int]) -> None:
    deadline = time.monotonic() + WARM_UP_TIMEOUT
    conns: dict[int, Connection] = {}

    def call(node: int, request):
        if node not in conns or conns[node].closed:
            conns[node] = Connection(*cluster.addresses[node])
        return conns[node].call(request)

    def until(what: str, ask) -> None:
        while True:
            try:
                if ask():
                    return
            except Closed:
                pass
            if time.monotonic() > deadline:
                raise TimeoutError(f"{cluster.kind} {cluster.size}-node: {what} not ready "
                                   f"within {WARM_UP_TIMEOUT} s")
            time.sleep(0.1)

    try:
        for group in group_names_covering_partitions("warm-up"):
            def coordinator_answers(group=group) -> bool:
                found = call(1, rq.find_coordinator(versions[rq.FIND_COORDINATOR], group))
                if found.error_code != ErrorCode.none:
                    return False
                fetched = call(found.node_id, rq.offset_fetch(
                    versions[rq.OFFSET_FETCH], group, None))
                return fetched.error_code == ErrorCode.none
            until(f"the coordinator of {group}", coordinator_answers)
        until("InitProducerId", lambda: call(1, rq.init_producer_id(
            versions[rq.INIT_PRODUCER_ID])).error_code == ErrorCode.none)
    finally:
        for conn in conns.values():
            conn.close()


class Pairs:
    """The pairs of clusters started so far in this session, by size."""

    def __init__(self, root, octet: int):
        self.root = root
        self.octet = octet
        self.pairs: dict[int, Pair] = {}
        self.started: list[Cluster] = []

    def get(self, size: int) -> Pair:
        if size not in self.pairs:
            self.pairs[size] = self._start(size)
        return self.pairs[size]

    def _start(self, size: int) -> Pair:
        first = {1: (11, 31), 3: (21, 41)}[size]
        plan = [("reference", f"127.0.{self.octet}.{first[0]}"),
                ("kafka", f"127.0.{self.octet}.{first[1]}")]
        with ThreadPoolExecutor(2) as pool:
            futures = [pool.submit(clusters.start, kind, self.root, size, address)
                       for kind, address in plan]
            started = []
            errors = []
            for future in futures:
                try:
                    started.append(future.result())
                except Exception as e:      # noqa: BLE001 — stop what did start, re-raise
                    errors.append(e)
        self.started += started
        if errors:
            raise errors[0]
        reference, kafka = started
        versions = negotiate(advertised(reference), advertised(kafka))
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda c: warm_up(c, versions), [reference, kafka]))
        return Pair(size, reference, kafka, versions)

    def stop(self) -> None:
        for cluster in self.started:
            cluster.stop()


def _kafka_available() -> str | None:
    """Why Apache Kafka cannot run here, or None. The jars are not fetched
    here (`make test` fetches the tested versions first: make kafka-dist)."""
    from cluster.kafka import dist
    try:
        dist.java()
    except dist.KafkaDistError as e:
        return str(e)
    if not dist.lib_dir(clusters.KAFKA_VERSION).is_dir():
        return (f"its jars are not in {dist.lib_dir(clusters.KAFKA_VERSION)}: run "
                f"make kafka-dist (python -m cluster.kafka.dist {clusters.KAFKA_VERSION})")
    return None


@pytest.fixture
def cluster_pairs(tmp_path_factory):
    # Per test (one test per cluster size): four idle Kafka JVMs and their
    # reference twins kept for a whole pytest session slowed every other
    # test on the worker's machine (load average 28 in a make test).
    why = _kafka_available()
    if why:
        pytest.skip(f"Apache Kafka {clusters.KAFKA_VERSION} is not available: {why}")
    pairs = Pairs(tmp_path_factory.mktemp("conformance"), clusters.octet())
    try:
        yield pairs
    finally:
        pairs.stop()
