"""Record steps: Produce (acks 0/1/all, plain or idempotent batches, gzip),
Fetch in and out of range, ListOffsets (earliest, latest, by timestamp),
both read_uncommitted or read_committed, OffsetForLeaderEpoch,
InitProducerId. Each goes to the partition's leader
as the cluster's Metadata says (as a client would)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tests.conformance import requests as rq
from tests.conformance.base import Step, text
from tests.conformance.plain import keyed, plain
from tests.conformance.records import CONTROL, GZIP, Rec, decode, encode
from tests.conformance.wire import Closed

LOG_APPEND_SLACK_MS = 60_000
RETRIABLE = ("coordinator_load_in_progress", "coordinator_not_available", "not_coordinator")


@dataclass(frozen=True)
class InitProducerId(Step):
    producer: str                       # the scenario's name for it ("p0")
    api = "InitProducerId"

    def run(self, s) -> Any:
        # Retried while the broker's producer id source warms up, as every
        # client does (Kafka's first InitProducerId after start answers
        # COORDINATOR_LOAD_IN_PROGRESS until its id block is allocated).
        deadline = time.monotonic() + 20.0
        while True:
            answer = plain(s.call(1, rq.init_producer_id(s.v[rq.INIT_PRODUCER_ID])))
            if answer["error_code"] not in RETRIABLE or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        if answer["error_code"] == "none":
            s.producers[self.producer] = [answer["producer_id"], answer["producer_epoch"]]
        return {**answer, "producer_id": s.producer_name(answer["producer_id"])}


@dataclass(frozen=True)
class Batch:
    records: tuple[Rec, ...]
    producer: str | None = None         # idempotent: the InitProducerId's name
    epoch_offset: int = 0               # added to the producer's epoch (a bumped or old one)
    sequence: int = 0
    gzip: bool = False
    flaw: str | None = None             # "corrupt" (a CRC that does not match), "two" batches


@dataclass(frozen=True)
class Produce(Step):
    topic: str
    partition: int
    batch: Batch
    acks: int
    via: str = "leader"                 # or "follower", "other" (a broker without a replica)
    api = "Produce"

    def run(self, s) -> Any:
        b = self.batch
        pid, epoch, seq = -1, -1, -1
        if b.producer is not None:
            pid, base_epoch = s.producers.get(b.producer, [-1, -1])
            epoch, seq = base_epoch + b.epoch_offset, b.sequence
        data = encode(list(b.records), producer_id=pid, producer_epoch=epoch,
                      base_sequence=seq, compression=GZIP if b.gzip else 0)
        if b.flaw == "corrupt":
            data = data[:-1] + bytes([data[-1] ^ 0xFF])
        elif b.flaw == "two":
            data = data + data
        topic = s.topic(self.topic)
        node = s.node_for(topic, self.partition, self.via)
        request = rq.produce(s.v[rq.PRODUCE], topic, self.partition, data, acks=self.acks)
        conn = s.conn(node, "produce")
        key = (topic, self.partition)
        if self.acks == 0:
            conn.send(request, expect=False)
            # No answer; an error closes the connection. Whether the next
            # request on the same connection is answered tells both apart.
            try:
                conn.call(rq.api_versions())
            except Closed:
                return {"acks=0": "connection closed"}
            if b.producer is None:          # appended (the strategy sends no
                s.log_end[key] = s.log_end.get(key, 0) + len(b.records)     # idempotent acks=0)
                if b.flaw:
                    raise AssertionError(f"{s.kind}: a flawed acks=0 batch was taken: {b}")
                settle(s, node, topic, self.partition)
            return {"acks=0": "connection open"}
        answer = plain(conn.call(request))
        for t in answer["responses"]:
            for p in t["partition_responses"]:
                if p["error_code"] == "none":
                    s.log_end[key] = max(s.log_end.get(key, 0), p["base_offset"] + len(b.records))
                    if self.acks == 1:
                        settle(s, node, topic, self.partition)
                p["error_message"] = text(p["error_message"])
                if p["log_append_time"] not in (-1, None) and near_now(p["log_append_time"]):
                    p["log_append_time"] = "<now>"
        return {**answer, "responses": {t["name"]: keyed(t["partition_responses"], "index")
                                        for t in answer["responses"]}}


def near_now(ms: Any) -> bool:
    return isinstance(ms, int) and abs(ms - time.time() * 1000) < LOG_APPEND_SLACK_MS


def stamp_now(batch: dict) -> None:
    """log-append-time: a transaction marker (a control batch) is stamped
    with its broker's clock when written."""
    for key in ("base_timestamp", "max_timestamp"):
        if near_now(batch[key]):
            batch[key] = "<now>"
    for record in batch["records"]:
        if near_now(record["timestamp"]):
            record["timestamp"] = "<now>"


def settle(s, node: int, topic: str, partition: int, timeout: float = 10.0) -> None:
    """replication-timing: until the high watermark (ListOffsets latest)
    reaches the log end this scenario wrote, or timeout (a high watermark
    held back under min.insync.replicas stays where it is)."""
    end = s.log_end.get((topic, partition), 0)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = s.call(node, rq.list_offsets(s.v[rq.LIST_OFFSETS], topic, partition, rq.LATEST))
        got = answer.topics[0].partitions[0]
        if got.error_code.name != "none" or got.offset >= end:
            return
        time.sleep(0.02)


def follower_caught_up(s, node: int, topic: str, partition: int, timeout: float = 10.0) -> None:
    """replication-timing: until the follower's high watermark (as its
    Fetch answers) is the leader's, or timeout. Not compared."""
    leader = s.leader(topic, partition)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        lead = s.call(leader, rq.list_offsets(s.v[rq.LIST_OFFSETS], topic, partition, rq.LATEST))
        mine = s.call(node, rq.fetch(s.v[rq.FETCH], topic, partition, 0, max_bytes=1))
        got = mine.responses[0].partitions[0]
        if got.error_code.name != "none" or \
                got.high_watermark >= lead.topics[0].partitions[0].offset:
            return
        time.sleep(0.02)


@dataclass(frozen=True)
class Fetch(Step):
    topic: str
    partition: int
    offset: int                         # an offset, or LEO + (-offset - 100) when <= -100
    current_leader_epoch: int = -1
    max_bytes: int = 1 << 20
    via: str = "leader"
    isolation_level: int = rq.READ_UNCOMMITTED
    api = "Fetch"

    def run(self, s) -> Any:
        topic = s.topic(self.topic)
        node = s.node_for(topic, self.partition, self.via)
        if self.via == "follower":
            follower_caught_up(s, node, topic, self.partition)
        answer = plain(s.call(node, rq.fetch(
            s.v[rq.FETCH], topic, self.partition, self.offset,
            current_leader_epoch=self.current_leader_epoch, max_bytes=self.max_bytes,
            isolation_level=self.isolation_level)))
        for t in answer["responses"]:
            for p in t["partitions"]:
                batches = decode(p["records"])
                for batch in batches:
                    if "producer_id" in batch:
                        batch["producer_id"] = s.producer_name(batch["producer_id"])
                    if batch.get("attributes", 0) & CONTROL:
                        stamp_now(batch)
                p["records"] = batches
                if p["aborted_transactions"] is not None:       # read_committed
                    p["aborted_transactions"] = sorted(
                        ({"producer_id": s.producer_name(a["producer_id"]),
                          "first_offset": a["first_offset"]} for a in p["aborted_transactions"]),
                        key=lambda a: (a["first_offset"], str(a["producer_id"])))
        return {**answer, "responses": {t["topic"]: keyed(t["partitions"], "partition_index")
                                        for t in answer["responses"]}}


@dataclass(frozen=True)
class ListOffsets(Step):
    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int = -1
    via: str = "leader"
    isolation_level: int = rq.READ_UNCOMMITTED
    api = "ListOffsets"

    def run(self, s) -> Any:
        topic = s.topic(self.topic)
        node = s.node_for(topic, self.partition, self.via)
        answer = plain(s.call(node, rq.list_offsets(
            s.v[rq.LIST_OFFSETS], topic, self.partition, self.timestamp,
            current_leader_epoch=self.current_leader_epoch,
            isolation_level=self.isolation_level)))
        return {**answer, "topics": {t["name"]: keyed(t["partitions"], "partition_index")
                                     for t in answer["topics"]}}


@dataclass(frozen=True)
class OffsetForLeaderEpoch(Step):
    topic: str
    partition: int
    leader_epoch: int
    current_leader_epoch: int = -1
    via: str = "leader"
    api = "OffsetForLeaderEpoch"

    def run(self, s) -> Any:
        topic = s.topic(self.topic)
        node = s.node_for(topic, self.partition, self.via)
        answer = plain(s.call(node, rq.offset_for_leader_epoch(
            s.v[rq.OFFSET_FOR_LEADER_EPOCH], topic, self.partition, self.leader_epoch,
            current_leader_epoch=self.current_leader_epoch)))
        return {**answer, "topics": {t["topic"]: keyed(t["partitions"], "partition")
                                     for t in answer["topics"]}}
