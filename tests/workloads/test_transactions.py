"""The queue workload's transactional producers (`transactions`) against a
real broker: transactions over several partitions, committed or aborted
by a seeded choice, the transactional.id kept across crashed clients; the
final reads (read_committed) return exactly the committed values."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from cluster.broker_process import BrokerProcess
from history_analysis.history import HistoryWriter
from history_analysis.history.reader import HistoryReader
from workloads.final import FinalReader
from workloads.queue import run_queue
from workloads.queue_config import QueueConfig, Target


def test_transactions_commit_or_abort_and_only_commits_are_read(tmp_path):
    with BrokerProcess(tmp_path / "data", config=["group.initial.rebalance.delay.ms=0"]) \
            as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=3,
                                      replication_factor=1)])["t"].result(30)
        config = QueueConfig(partitions=3, replication_factor=1, concurrency=2, rate=40,
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
