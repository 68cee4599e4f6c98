"""The final reads against a real broker: they read every partition to its
recorded end, and past it until the partitions are quiet — records that
arrived after the ends were asked for are read and counted (`past_end`),
so a stale end does not hide them."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from history_analysis.history.writer import HistoryWriter
from workloads.clients import LIBRARIES, ClientSettings
from workloads.final import EMPTY_POLLS, FinalReader

TIMEOUT = 30


def create_topic(bootstrap: str, partitions: int) -> str:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=partitions,
                                  replication_factor=1)])[topic].result(TIMEOUT)
    return topic


def produce(bootstrap: str, topic: str, partition: int, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for v in values:
        producer.produce(topic, value=str(v).encode(), partition=partition)
    assert producer.flush(TIMEOUT) == 0


class LateWrites(FinalReader):
    """A reader whose partitions get more records right after it asked
    where they end: its recorded ends are stale, as after a failover."""

    def __init__(self, *args, late, **kwargs):
        super().__init__(*args, **kwargs)
        self.late = late

    def _client(self):
        client = super()._client()
        end_offsets = client.end_offsets

        def stale_end_offsets(partitions, timeout):
            outcome = end_offsets(partitions, timeout)
            self.late()
            return outcome

        client.end_offsets = stale_end_offsets
        return client


@pytest.mark.parametrize("library", LIBRARIES)
def test_final_reads_go_past_a_stale_end_until_quiet(broker, tmp_path, library):
    topic = create_topic(broker.bootstrap, 2)
    produce(broker.bootstrap, topic, 0, range(0, 5))
    produce(broker.bootstrap, topic, 1, range(100, 103))
    history = HistoryWriter(tmp_path / "history.jsonl")
    reader = LateWrites(history, bootstrap=broker.bootstrap, library=library,
                        settings=ClientSettings(), partitions=[(topic, 0), (topic, 1)],
                        first_process=1000, process_step=1,
                        late=lambda: produce(broker.bootstrap, topic, 0, range(5, 9)))
    final = reader.run(TIMEOUT)
    history.close()
    assert final["ends"] == {f"{topic}-0": 5, f"{topic}-1": 3}
    assert final["reached"] is True and final["past_end"] == {f"{topic}-0": 4}
    events = [json.loads(line) for line in (tmp_path / "history.jsonl").read_text().splitlines()]
    read = sorted((r["partition"], r["offset"]) for e in events
                  if e["f"] == "poll" and e["type"] == "ok" for r in e["value"]["reads"])
    assert read == [(0, o) for o in range(9)] + [(1, o) for o in range(3)]
    polls = [e for e in events if e["f"] == "poll" and e["type"] == "ok"]
    assert [p["value"]["reads"] for p in polls[-EMPTY_POLLS:]] == [[]] * EMPTY_POLLS


def test_final_reads_of_quiet_partitions_read_nothing_past_the_end(broker, tmp_path):
    topic = create_topic(broker.bootstrap, 1)
    produce(broker.bootstrap, topic, 0, range(3))
    history = HistoryWriter(tmp_path / "history.jsonl")
    final = FinalReader(history, bootstrap=broker.bootstrap, library=LIBRARIES[0],
                        settings=ClientSettings(), partitions=[(topic, 0)],
                        first_process=1000, process_step=1).run(TIMEOUT)
    history.close()
    assert final == {"ends": {f"{topic}-0": 3}, "reached": True, "processes": 1,
                     "past_end": {}}
