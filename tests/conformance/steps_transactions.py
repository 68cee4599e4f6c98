"""Transaction steps (KIP-98, KIP-890 part 1, KIP-664): InitProducerId with
a transactional id, AddPartitionsToTxn (v0-3, a producer's),
AddOffsetsToTxn, TxnOffsetCommit, transactional Produce, EndTxn,
DescribeTransactions, ListTransactions and DescribeProducers. Fetch and
ListOffsets under read_committed are steps_records' with an isolation level.

Transactional ids are the scenario's names ("x0") made unique per example
(Session.group); each cluster's producer id for one is compared as that
name (assigned-ids). Requests go to the id's coordinator, found as a client
finds it, and are asked again while it is loading or moving, as clients
retry; which broker it is is not compared (coordinator-node).

EndTxn is answered before the markers land, on both brokers: after a
successful one the step waits (bounded, not compared) until the
coordinator has written CompleteCommit or CompleteAbort, which both write
only once every marker is replicated, so the last stable offsets have
settled when the next step reads. An InitProducerId that fences an ongoing
transaction is answered CONCURRENT_TRANSACTIONS while the abort is under
way; its first answer is compared, and it is asked again until that ends.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tests.conformance import requests as rq
from tests.conformance.base import Step, text
from tests.conformance.plain import drop, keyed, plain
from tests.conformance.records import Rec, encode
from tests.conformance.steps_records import near_now

RETRIABLE = ("coordinator_load_in_progress", "coordinator_not_available", "not_coordinator")
RETRY_TIMEOUT = 20.0        # s: a coordinator loading or moving; an abort under way
OTHER_PID = 10 ** 12        # added to a producer id: one no transactional id has
UNKNOWN_ID = "nope"         # a transactional id nobody initialised


def handle(s, producer: str, epoch_offset: int = 0, other_pid: bool = False
           ) -> tuple[int, int]:
    """(producer id, epoch) the step sends for `producer`: the cluster's
    current ones, an epoch off (an old, fenced one: -1; one never given:
    +1), or a producer id that is not the transactional id's; -1, -1 for a
    transactional id never initialised."""
    pid, epoch = s.producers.get(producer, [-1, -1])
    if pid < 0:
        return pid, epoch
    return pid + (OTHER_PID if other_pid else 0), epoch + epoch_offset


def tid(s, producer: str) -> str:
    return s.group(producer)


def at_coordinator(s, transactional_id: str, request, error_of, group: bool = False) -> Any:
    """Send to the coordinator of the transactional id (or of the group),
    asked again while it loads or moves, as a client does."""
    key_type = rq.GROUP_KEY if group else rq.TRANSACTION_KEY
    deadline = time.monotonic() + RETRY_TIMEOUT
    while True:
        answer = plain(s.call(s.coordinator(transactional_id, key_type), request))
        if error_of(answer) not in RETRIABLE or time.monotonic() > deadline:
            return answer
        s.coordinators.pop((key_type, transactional_id), None)
        time.sleep(0.1)


def describe(s, transactional_id: str) -> dict:
    return at_coordinator(s, transactional_id, rq.describe_transactions(
        s.v[rq.DESCRIBE_TRANSACTIONS], [transactional_id]),
        lambda a: a["transaction_states"][0]["error_code"])["transaction_states"][0]


def wait_complete(s, transactional_id: str) -> None:
    """Until the coordinator has written the transaction's end (its markers
    are in every partition then). Not compared."""
    deadline = time.monotonic() + RETRY_TIMEOUT
    while time.monotonic() < deadline:
        if describe(s, transactional_id)["transaction_state"] not in (
                "PrepareCommit", "PrepareAbort", "PrepareEpochFence"):
            return
        time.sleep(0.05)


@dataclass(frozen=True)
class InitTxnProducer(Step):
    """InitProducerId for a transactional id: a new producer (or the next
    epoch of one, fencing the previous), or one naming itself (KIP-360,
    "current"), with an old epoch ("old") or another producer id ("other")."""
    producer: str                   # the scenario's name; "!" for the empty id
    timeout_ms: int = 60000
    claim: str = "none"             # or "current", "old", "other"
    api = "InitProducerId"

    def run(self, s) -> Any:
        pid, epoch = -1, -1
        if self.claim != "none":
            pid, epoch = handle(s, self.producer, -1 if self.claim == "old" else 0,
                                self.claim == "other")
        name = "" if self.producer == "!" else tid(s, self.producer)
        request = rq.init_producer_id(s.v[rq.INIT_PRODUCER_ID], pid, epoch,
                                      transactional_id=name, timeout_ms=self.timeout_ms)
        if not name:        # no coordinator to find: any broker answers
            answer = plain(s.call(1, request))
            return {**answer, "producer_id": s.producer_name(answer["producer_id"])}
        first = None
        deadline = time.monotonic() + RETRY_TIMEOUT
        while True:
            answer = at_coordinator(s, name, request, lambda a: a["error_code"])
            if answer["error_code"] != "concurrent_transactions" or \
                    time.monotonic() > deadline:
                break
            first = first or answer["error_code"]
            time.sleep(0.1)
        if answer["error_code"] == "none":
            s.producers[self.producer] = [answer["producer_id"], answer["producer_epoch"]]
        return {**answer, "producer_id": s.producer_name(answer["producer_id"]),
                "first_answer": first}


def _by_topic(results: list[dict], topic_key: str, partitions_key: str, index: str,
              error: str) -> dict:
    return {t[topic_key]: {p[index]: p[error] for p in t[partitions_key]} for t in results}


@dataclass(frozen=True)
class AddPartitions(Step):
    producer: str
    partitions: tuple[tuple[str, int], ...]     # (scenario topic, index)
    epoch_offset: int = 0
    other_pid: bool = False
    api = "AddPartitionsToTxn"

    def run(self, s) -> Any:
        pid, epoch = handle(s, self.producer, self.epoch_offset, self.other_pid)
        name = tid(s, self.producer)
        answer = at_coordinator(s, name, rq.add_partitions_to_txn(
            s.v[rq.ADD_PARTITIONS_TO_TXN], name, pid, epoch,
            [(s.topic(t), p) for t, p in self.partitions]),
            lambda a: next((p["partition_error_code"] for t in a["results_by_topic_v3_and_below"]
                            for p in t["results_by_partition"]), "none"))
        return {"throttle_time": answer["throttle_time"], "results": _by_topic(
            answer["results_by_topic_v3_and_below"], "name", "results_by_partition",
            "partition_index", "partition_error_code")}


@dataclass(frozen=True)
class AddOffsets(Step):
    producer: str
    group: str
    epoch_offset: int = 0
    api = "AddOffsetsToTxn"

    def run(self, s) -> Any:
        pid, epoch = handle(s, self.producer, self.epoch_offset)
        name = tid(s, self.producer)
        return at_coordinator(s, name, rq.add_offsets_to_txn(
            s.v[rq.ADD_OFFSETS_TO_TXN], name, pid, epoch, s.group(self.group)),
            lambda a: a["error_code"])


@dataclass(frozen=True)
class TxnCommitOffsets(Step):
    """TxnOffsetCommit to the group's coordinator, from no group member."""
    producer: str
    group: str
    offsets: tuple[tuple[str, int, int], ...]   # (scenario topic, partition, offset)
    epoch_offset: int = 0
    api = "TxnOffsetCommit"

    def run(self, s) -> Any:
        pid, epoch = handle(s, self.producer, self.epoch_offset)
        group = s.group(self.group)
        answer = at_coordinator(s, group, rq.txn_offset_commit(
            s.v[rq.TXN_OFFSET_COMMIT], tid(s, self.producer), group, pid, epoch,
            [(s.topic(t), p, o) for t, p, o in self.offsets]),
            lambda a: next((p["error_code"] for t in a["topics"] for p in t["partitions"]),
                           "none"), group=True)
        return {"throttle_time": answer["throttle_time"], "topics": _by_topic(
            answer["topics"], "name", "partitions", "partition_index", "error_code")}


@dataclass(frozen=True)
class TxnProduce(Step):
    """A transactional batch (acks=all) with the producer's id and epoch
    (or one off) and the partition's next sequence for the producer's
    current epoch ("next") or one past it ("gap"). A gap where the
    producer has no state yet is taken as a first batch by both, unless a
    refused verification there saw a lower sequence: Kafka then refuses
    it as out of order (VerificationStateEntry, until the producer's next
    transactional append or marker there), and so does this broker
    (reference_broker/txn/verification_state.py).

    A batch from another epoch carries that next sequence too, not 0."""
    producer: str
    topic: str
    partition: int
    records: tuple[Rec, ...]
    epoch_offset: int = 0
    sequence: str = "next"
    transactional_id: bool = True       # False: the request names no transactional id
    api = "Produce"

    def run(self, s) -> Any:
        pid, epoch = handle(s, self.producer, self.epoch_offset)
        current = handle(s, self.producer)[1]
        topic = s.topic(self.topic)
        key = (self.producer, topic, self.partition)
        known_epoch, following = s.sequences.get(key, (current, 0))
        following = following if known_epoch == current else 0
        seq = following + (1 if self.sequence == "gap" else 0)
        data = encode(list(self.records), producer_id=pid, producer_epoch=epoch,
                      base_sequence=seq, transactional=True)
        node = s.leader(topic, self.partition)
        answer = plain(s.call(node, rq.produce(
            s.v[rq.PRODUCE], topic, self.partition, data, acks=-1,
            transactional_id=tid(s, self.producer) if self.transactional_id else None),
            "produce"))
        for t in answer["responses"]:
            for p in t["partition_responses"]:
                if p["error_code"] == "none" and seq == following and epoch == current:
                    s.sequences[key] = (epoch, seq + len(self.records))
                    s.log_end[(topic, self.partition)] = max(
                        s.log_end.get((topic, self.partition), 0),
                        p["base_offset"] + len(self.records))
                p["error_message"] = text(p["error_message"])
                if near_now(p["log_append_time"]):
                    p["log_append_time"] = "<now>"
        return {**answer, "responses": {t["name"]: keyed(t["partition_responses"], "index")
                                        for t in answer["responses"]}}


@dataclass(frozen=True)
class EndTxn(Step):
    producer: str
    commit: bool
    epoch_offset: int = 0
    other_pid: bool = False
    api = "EndTxn"

    def run(self, s) -> Any:
        pid, epoch = handle(s, self.producer, self.epoch_offset, self.other_pid)
        name = tid(s, self.producer)
        answer = at_coordinator(s, name, rq.end_txn(s.v[rq.END_TXN], name, pid, epoch,
                                                    self.commit), lambda a: a["error_code"])
        if answer["error_code"] == "none":
            wait_complete(s, name)
        return answer


@dataclass(frozen=True)
class DescribeTxns(Step):
    """DescribeTransactions of each id at its coordinator (one request each:
    ids may have different coordinators)."""
    producers: tuple[str, ...]          # names; UNKNOWN_ID for one never initialised
    api = "DescribeTransactions"

    def run(self, s) -> Any:
        out = {}
        for producer in self.producers:
            state = describe(s, tid(s, producer))
            start = state["transaction_start_time"]
            out[producer] = {
                **drop(state, "transactional_id", "topics"),
                "producer_id": s.producer_name(state["producer_id"]),
                "transaction_start_time": "<now>" if near_now(start) else start,
                "topics": {t["topic"]: sorted(t["partitions"]) for t in state["topics"]}}
        return out


@dataclass(frozen=True)
class ListTxns(Step):
    """ListTransactions at every broker (each lists the ids it coordinates),
    the scenario's ids only, by name."""
    states: tuple[str, ...] = ()
    producers: tuple[str, ...] = ()     # producer id filters, by name
    duration_ms: int = -1
    api = "ListTransactions"

    def run(self, s) -> Any:
        pids = [handle(s, p)[0] if p in s.producers else OTHER_PID for p in self.producers]
        errors, unknown, listed = set(), set(), {}
        for node in sorted(s.cluster.addresses):
            answer = plain(s.call(node, rq.list_transactions(
                s.v[rq.LIST_TRANSACTIONS], list(self.states), pids, self.duration_ms)))
            errors.add(answer["error_code"])
            unknown.update(answer["unknown_state_filters"])
            for t in answer["transaction_states"]:
                if t["transactional_id"].startswith(s.prefix + "-"):
                    name = t["transactional_id"][len(s.prefix) + 1:]
                    listed[name] = {"producer_id": s.producer_name(t["producer_id"]),
                                    "transaction_state": t["transaction_state"]}
        return {"error_codes": sorted(errors), "unknown_state_filters": sorted(unknown),
                "transactions": listed}


@dataclass(frozen=True)
class DescribeProducers(Step):
    """DescribeProducers of each partition at its leader."""
    topic: str
    partitions: tuple[int, ...]
    api = "DescribeProducers"

    def run(self, s) -> Any:
        topic = s.topic(self.topic)
        out = {}
        for index in self.partitions:
            answer = plain(s.call(s.leader(topic, index), rq.describe_producers(
                s.v[rq.DESCRIBE_PRODUCERS], topic, [index])))
            for p in answer["topics"][0]["partitions"]:
                producers = {}
                for producer in p["active_producers"]:
                    stamp = producer["last_timestamp"]
                    producers[str(s.producer_name(producer["producer_id"]))] = {
                        **drop(producer, "producer_id"),
                        "last_timestamp": "<now>" if near_now(stamp) else stamp}
                out[p["partition_index"]] = {**p, "error_message": text(p["error_message"]),
                                             "active_producers": producers}
        return out
