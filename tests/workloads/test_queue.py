"""The queue workload's consumers against a real broker: where a new
process starts reading."""

from __future__ import annotations

import contextlib
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


@contextlib.contextmanager
def topic_t(tmp_path, partitions: int):
    """A one-broker cluster with topic t of `partitions`, and a producer."""
    with BrokerProcess(tmp_path / "data", config=[f"num.partitions={partitions}"]) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("t", num_partitions=partitions,
                                      replication_factor=1)])["t"].result(30)
        yield broker, Producer({"bootstrap.servers": broker.bootstrap})


class Running:
    """One assign-mode consumer worker on t, in a thread, writing tmp_path's history."""

    def __init__(self, tmp_path, broker, config: QueueConfig, seed: int):
        target = Target(broker.bootstrap, topics=("t",), groups=("unused",), seed=seed)
        self.path = tmp_path / "history.jsonl"
        self.history = HistoryWriter(self.path)
        self.stop = threading.Event()
        worker = ConsumerWorker(1, config, target, self.history, Stats(), self.stop,
                                mode="assign", group=f"g-{uuid.uuid4().hex[:6]}")
        self.thread = threading.Thread(target=worker.run)
        self.thread.start()

    def finish(self) -> list[dict]:
        self.stop.set()
        self.thread.join(60)
        self.history.close()
        assert not self.thread.is_alive()
        return list(HistoryReader(self.path))


def test_a_group_without_a_commit_restarts_from_the_beginning(tmp_path):
    # With auto.offset.reset=latest a restart "from the committed offset" of
    # a group that has none would skip what the group never read: until its
    # first ok commit a new process seeks to the beginning (and says so).
    # The topic stays empty for 3 s: nothing read, nothing to commit, so
    # the first restarts come before any commit and the later ones after.
    with topic_t(tmp_path, 1) as (broker, producer):
        config = QueueConfig(partitions=1, concurrency=2, rate=40, crash_clients_every=0.5,
                             client_settings=ClientSettings(auto_offset_reset="latest"))
        run = Running(tmp_path, broker, config, seed=3)
        run.stop.wait(3)
        for value in range(5):
            producer.produce("t", str(value).encode(), partition=0)
        assert producer.flush(30) == 0
        run.stop.wait(7)
        events = run.finish()

    committed = False
    assigns = []    # (seek_to_beginning, whether the group had an ok commit)
    for event in events:
        if event["type"] == "ok" and event["f"] == "assign":
            assigns.append((event["value"]["seek_to_beginning"], committed))
        if event["type"] == "ok" and event["f"] == "commit":
            committed = True
    assert all(seek != had_commit for seek, had_commit in assigns), assigns
    assert {had_commit for _, had_commit in assigns[1:]} == {False, True}, \
        f"restarts before and after the first commit are needed: {assigns}"



def test_consumers_ask_for_the_ends_in_the_main_phase(tmp_path):
    # --end-offsets-every: end-offsets ops of the main phase (no phase),
    # every partition each time, answers that follow what was produced,
    # with the answering leader's epoch (confluent-kafka, the default client).
    with topic_t(tmp_path, 2) as (broker, producer):
        for value in range(7):
            producer.produce("t", str(value).encode(), partition=value % 2)
        assert producer.flush(30) == 0
        config = QueueConfig(partitions=2, concurrency=2, rate=40, end_offsets_every=0.2)
        run = Running(tmp_path, broker, config, seed=5)
        run.stop.wait(4)
        events = run.finish()

    ends = [e for e in events if e["f"] == "end-offsets" and e["type"] != "invoke"]
    assert len(ends) >= 3, ends
    assert all("phase" not in e and e["type"] == "ok" for e in ends), ends
    assert {tuple((o["partition"], o["offset"], o["epoch"]) for o in e["value"]["offsets"])
            for e in ends} == {((0, 4, 0), (1, 3, 0))}
