"""The queue workload's transactional producers (`transactions`) against a
real broker: transactions over several partitions, committed or aborted
by a seeded choice, the transactional.id kept across crashed clients; the
final reads (read_committed) return exactly the committed values."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.broker_process import BrokerProcess
from history_analysis.history import HistoryWriter
from history_analysis.history.reader import HistoryReader
from workloads.clients import TRANSACTIONAL_LIBRARIES, make_transactional_producer
from workloads.clients.base import ClientSettings, Stall
from workloads.final import FinalReader
from workloads.queue import run_queue
from workloads.queue_config import QueueConfig, Target


@pytest.mark.parametrize("library", TRANSACTIONAL_LIBRARIES)
def test_transactions_commit_or_abort_and_only_commits_are_read(tmp_path, library):
    with BrokerProcess(tmp_path / "data", config=["group.initial.rebalance.delay.ms=0"]) \
            as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=3,
                                      replication_factor=1)])["t"].result(30)
        config = QueueConfig(client=library, partitions=3, replication_factor=1,
                             concurrency=2, rate=40,
                             transactions=True, abort_probability=0.4,
                             crash_clients_every=1.0, consumer_mode="assign")
        assert config.problems() == []
        path = tmp_path / "history.jsonl"
        history = HistoryWriter(path)
        run_queue(config, Target(broker.bootstrap, ("t",), ("g",), seed=5), history, 6.0)
        final = FinalReader(history, bootstrap=broker.bootstrap, library=config.client,
                            settings=config.client_settings,
                            partitions=[("t", p) for p in range(3)],
                            first_process=100, process_step=2).run(60)
        history.close()
    events = list(HistoryReader(path))
    txns = [e for e in events if e["f"] == "txn" and e["type"] != "invoke"]
    committed = {s["value"] for e in txns if e["type"] == "ok" for s in e["value"]["sends"]}
    aborted = {s["value"] for e in txns if e["type"] == "fail" for s in e["value"]["sends"]}
    assert {e["type"] for e in txns} == {"ok", "fail"}
    assert all(e["error"].startswith("ABORTED: ") for e in txns if e["type"] == "fail")
    # Transactions span partitions; several records each.
    assert max(len({s["partition"] for s in e["value"]["sends"]}) for e in txns) > 1
    # Crashed clients: new processes of the producer slot, same transactional.id.
    assert len({e["process"] for e in txns}) > 1
    assert final["reached"], final
    read = {r["value"] for e in events if e.get("phase") == "final" and e["f"] == "poll"
            and e["type"] == "ok" for r in e["value"]["reads"]}
    assert committed <= read
    assert not read & aborted


@pytest.mark.parametrize("library", TRANSACTIONAL_LIBRARIES)
@pytest.mark.parametrize("bug_on", [False, True])
def test_a_transaction_stalled_past_its_timeout_is_fenced(tmp_path, bug_on, library):
    """KAFKA-6119's producer: one partition's records, a stall past the
    timeout (the coordinator aborts), then another partition and the commit.
    The abort's epoch bump fences it (`fail`); under `txn-expiry-no-bump` the
    commit is answered and only the second half is ever read."""
    with BrokerProcess(tmp_path / "data", bugs=["txn-expiry-no-bump"] if bug_on else [],
                       config=["transaction.abort.timed.out.transaction.cleanup.interval.ms=100"]
                       ) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=2,
                                      replication_factor=1)])["t"].result(30)
        clock = time.time_ns
        producer = make_transactional_producer(library, broker.bootstrap, ClientSettings(),
                                               "p", "tx", transaction_timeout_ms=1000)
        stalled = producer.transaction([("t", 0, 1), ("t", 1, 2)], True, 15, clock,
                                       Stall(after=1, wait=lambda: time.sleep(1.6)))
        if not producer.usable:
            producer.close()
            producer = make_transactional_producer(library, broker.bootstrap,
                                                   ClientSettings(), "p", "tx",
                                                   transaction_timeout_ms=1000)
        after = producer.transaction([("t", 0, 3)], True, 15, clock)
        producer.close()
        history = HistoryWriter(tmp_path / "history.jsonl")
        final = FinalReader(history, bootstrap=broker.bootstrap, library=library,
                            settings=ClientSettings(), partitions=[("t", 0), ("t", 1)],
                            first_process=1, process_step=1).run(60)
        history.close()
    assert final["reached"], final
    events = list(HistoryReader(tmp_path / "history.jsonl"))
    read = {r["value"] for e in events if e["f"] == "poll" and e["type"] == "ok"
            for r in e["value"]["reads"]}
    assert after.type == "ok"
    if bug_on:
        assert stalled.type == "ok" and stalled.value["sends"][0]["offset"] is not None
        assert read == {2, 3}       # the committed transaction's first half is lost
    else:
        assert stalled.type == "fail" and "FENCED" in stalled.error.upper(), stalled
        assert read == {3}


@pytest.mark.parametrize("library", TRANSACTIONAL_LIBRARIES)
def test_a_zombie_producer_is_fenced_by_its_successor(tmp_path, library):
    """Two producers of one transactional.id: the second's first transaction
    fences the first, whose next transaction is refused (`fail`: it never
    asked to commit) and leaves it spent; a new producer goes on."""
    with BrokerProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=1,
                                      replication_factor=1)])["t"].result(30)

        def producer(name):
            return make_transactional_producer(library, broker.bootstrap, ClientSettings(),
                                               name, "tx", transaction_timeout_ms=10000)
        zombie, successor = producer("zombie"), producer("successor")
        try:
            assert zombie.transaction([("t", 0, 1)], True, 15, time.time_ns).type == "ok"
            assert successor.transaction([("t", 0, 2)], True, 15, time.time_ns).type == "ok"
            fenced = zombie.transaction([("t", 0, 3)], True, 15, time.time_ns)
            assert fenced.type == "fail" and "FENCED" in fenced.error.upper(), fenced
            assert not zombie.usable
            assert successor.transaction([("t", 0, 4)], True, 15, time.time_ns).type == "ok"
        finally:
            zombie.close()
            successor.close()


@pytest.mark.parametrize("library", TRANSACTIONAL_LIBRARIES)
def test_a_producer_closes_at_once_when_its_coordinator_is_gone(tmp_path, library):
    """The broker killed in the middle of a transaction: the transaction
    ends `fail` (never asked to commit) and closing the producer does not
    wait for the dead coordinator (confluent-kafka's close() aborts an open
    transaction with no bound: a run's workers once never stopped)."""
    with BrokerProcess(tmp_path / "data") as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=1,
                                      replication_factor=1)])["t"].result(30)
        producer = make_transactional_producer(library, broker.bootstrap, ClientSettings(),
                                               "p", "tx", transaction_timeout_ms=10000)
        outcome = producer.transaction([("t", 0, 1), ("t", 0, 2)], True, 3, time.time_ns,
                                       Stall(after=1, wait=broker.kill))
        closer = threading.Thread(target=producer.close, daemon=True)
        closer.start()
        closer.join(30)
        assert not closer.is_alive(), "close() waited for a dead coordinator"
    assert outcome.type == "fail" and outcome.error.startswith("ABORTED: "), outcome
