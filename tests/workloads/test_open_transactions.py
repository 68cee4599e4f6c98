"""The final phase's question when a last stable offset stays below its high
watermark: which transaction holds it, as the partition's leader and the
transaction's coordinator tell it (KIP-664), asked of a reference broker
process with a real transaction left open — alone, and at the end of the
final phase's wait."""

from __future__ import annotations

import socket

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.broker_process import BrokerProcess
from history_analysis.history.writer import HistoryWriter
from tests.reference_broker.test_transactions import (
    TIMEOUT, TOPIC, confluent_producer, left_open, transaction,
)
from workloads.clients import LIBRARIES, ClientSettings
from workloads.final import FinalReader
from workloads.open_transactions import open_transactions


@pytest.fixture
def broker(tmp_path):
    with BrokerProcess(tmp_path / "data", config=["num.partitions=2"]) as process:
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        admin.create_topics([NewTopic(TOPIC, 2, 1)])[TOPIC].result(TIMEOUT)
        yield process


def test_an_open_transaction_is_named_by_its_leader_and_its_coordinator(broker):
    producer = confluent_producer(broker.bootstrap, "tx-open")
    transaction(producer, [0, 1], commit=True)
    left_open(producer, b"2")
    both = [(TOPIC, 0), (TOPIC, 1)]
    [held] = open_transactions(broker.bootstrap, ClientSettings(), both, TIMEOUT)
    # Partition 0: value 0, the commit marker, then value 2 opens the transaction.
    assert {k: held[k] for k in ("topic", "partition", "first_offset", "transactional_id")} \
        == {"topic": TOPIC, "partition": 0, "first_offset": 2, "transactional_id": "tx-open"}
    assert held["coordinator"] == {"state": "Ongoing", "producer_epoch": held["producer_epoch"],
                                   "partitions": [f"{TOPIC}-0"]}
    producer.commit_transaction(TIMEOUT)
    assert open_transactions(broker.bootstrap, ClientSettings(), both, TIMEOUT) == []


def test_a_cluster_that_cannot_be_asked_is_one_error_not_an_exception():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]      # nothing listens once closed
    [entry] = open_transactions(f"127.0.0.1:{port}", ClientSettings(), [(TOPIC, 0)], 2.0)
    assert set(entry) == {"error"} and entry["error"]


def test_the_final_phase_names_what_holds_a_last_stable_offset(broker, tmp_path):
    """The final phase's wait for the last stable offsets ends with t-0's
    held by an open transaction: its summary names it; t-1 is stable and
    is not asked about."""
    producer = confluent_producer(broker.bootstrap, "tx-held")
    left_open(producer, b"0")
    history = HistoryWriter(tmp_path / "history.jsonl")
    reader = FinalReader(history, bootstrap=broker.bootstrap, library=LIBRARIES[0],
                         settings=ClientSettings(isolation_level="read_committed"),
                         partitions=[(TOPIC, 0), (TOPIC, 1)], first_process=1000,
                         process_step=1, stable_within=2.0)
    final = reader.run(TIMEOUT)
    history.close()
    [held] = final["open_transactions"]
    assert (held["topic"], held["partition"], held["first_offset"], held["transactional_id"]) \
        == (TOPIC, 0, 0, "tx-held")
    assert held["coordinator"]["state"] == "Ongoing"
    producer.commit_transaction(TIMEOUT)
    stable = FinalReader(HistoryWriter(tmp_path / "again.jsonl"), bootstrap=broker.bootstrap,
                         library=LIBRARIES[0],
                         settings=ClientSettings(isolation_level="read_committed"),
                         partitions=[(TOPIC, 0), (TOPIC, 1)], first_process=1000,
                         process_step=1, stable_within=2.0).run(TIMEOUT)
    assert "open_transactions" not in stable and stable["reached"] is True
