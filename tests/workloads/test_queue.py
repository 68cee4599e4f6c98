"""The queue workload's consumers against a real broker: where a new
process starts reading."""

from __future__ import annotations

import threading
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.broker_process import BrokerProcess
from history_analysis.history import HistoryWriter
from history_analysis.history.reader import HistoryReader
from workloads.clients import ClientSettings
from workloads.queue import ConsumerWorker, Stats
from workloads.queue_config import QueueConfig, Target


def test_a_group_without_a_commit_restarts_from_the_beginning(tmp_path):
    # With auto.offset.reset=latest a restart "from the committed offset" of
    # a group that has none would skip what the group never read: until its
    # first ok commit a new process seeks to the beginning (and says so).
    # The topic stays empty for 3 s: nothing read, nothing to commit, so
    # the first restarts come before any commit and the later ones after.
    with BrokerProcess(tmp_path / "data", config=["num.partitions=1"]) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=1,
                                      replication_factor=1)])["t"].result(30)
        producer = Producer({"bootstrap.servers": broker.bootstrap})
        config = QueueConfig(partitions=1, concurrency=2, rate=40, crash_clients_every=0.5,
                             client_settings=ClientSettings(auto_offset_reset="latest"))
        target = Target(broker.bootstrap, topics=("t",), groups=("unused",), seed=3)
        history = HistoryWriter(tmp_path / "history.jsonl")
        stop = threading.Event()
        worker = ConsumerWorker(1, config, target, history, Stats(), stop, mode="assign",
                                group=f"g-{uuid.uuid4().hex[:6]}")
        thread = threading.Thread(target=worker.run)
        thread.start()
        stop.wait(3)
        for value in range(5):
            producer.produce("t", str(value).encode(), partition=0)
        assert producer.flush(30) == 0
        stop.wait(7)
        stop.set()
        thread.join(60)
        history.close()
    assert not thread.is_alive()

    committed = False
    assigns = []    # (seek_to_beginning, whether the group had an ok commit)
    for event in HistoryReader(tmp_path / "history.jsonl"):
        if event["type"] == "ok" and event["f"] == "assign":
            assigns.append((event["value"]["seek_to_beginning"], committed))
        if event["type"] == "ok" and event["f"] == "commit":
            committed = True
    assert all(seek != had_commit for seek, had_commit in assigns), assigns
    assert {had_commit for _, had_commit in assigns[1:]} == {False, True}, \
        f"restarts before and after the first commit are needed: {assigns}"
