"""`__consumer_offsets`: the group coordinator's storage, an internal topic
written through the same log as every other partition.

The coordinator hands over key/value records (Kafka's own formats); they go
into one uncompressed record batch per call, appended as leader with
acks=all. The topic is replicated like any other; when this broker becomes
leader of one of its partitions the broker replays it into the coordinator
(Kafka's GroupMetadataManager loads the same way), and unloads it when
leadership moves on.
"""

from __future__ import annotations

import io
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.schema.errors import ErrorCode
from kio.static.primitive import i8, i16, i32, i64

from reference_broker.bugs import OFFSETS_COMMIT_ACKS_ONE
from reference_broker.controller.new_topic import NewTopic
from reference_broker.group import StoreError

if TYPE_CHECKING:
    from reference_broker.broker import Broker
    from reference_broker.partition import Partition

OFFSETS_TOPIC = "__consumer_offsets"


def encode_batch(records: list[tuple[bytes, bytes | None]]) -> bytes:
    now = datetime.fromtimestamp(time.time(), tz=timezone.utc)
    batch = NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
        attributes=i16(0),
        records=tuple(Record(attributes=i8(0), timestamp=now, offset=i64(n), key=key,
                             value=value, headers=())
                      for n, (key, value) in enumerate(records)))
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def decode_batch(raw: bytes) -> list[tuple[bytes, bytes | None]]:
    batch, _ = read_batch(raw, 0)
    return [(record.key, record.value) for record in batch.records]


class OffsetsTopic:
    """The coordinator's OffsetStore over the broker's internal topic."""

    def __init__(self, broker: "Broker"):
        self._broker = broker

    async def ensure(self) -> None:
        """Create the topic on first use, as Kafka does on FindCoordinator,
        with offsets.topic.replication.factor capped by the brokers
        registered (so a small cluster still gets one)."""
        broker = self._broker
        if OFFSETS_TOPIC not in broker.topics:
            replication = min(broker.config["offsets.topic.replication.factor"],
                              max(1, len(broker.image.brokers)))
            await broker.create_topics([NewTopic(
                OFFSETS_TOPIC, broker.config["offsets.topic.num.partitions"], replication)],
                False)

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append as leader, then wait for the ISR (acks=all) up to
        offsets.commit.timeout.ms — unless the `offsets-commit-acks-one`
        bug answers after the leader's own append."""
        broker = self._broker
        target = broker.partition(OFFSETS_TOPIC, partition)
        if target is None:
            raise StoreError(ErrorCode.not_leader_or_follower)
        result = target.append(encode_batch(records), max_batch_bytes=2 ** 31 - 1, acks=-1)
        if result.error:
            raise StoreError(result.error)
        if OFFSETS_COMMIT_ACKS_ONE in broker.config.bugs:
            return
        verdict = await target.wait_replicated(
            result.last_offset, broker.config["offsets.commit.timeout.ms"] / 1000)
        if verdict:
            raise StoreError(verdict)

    def records_of(self, partition: "Partition", *, partial: bool = False
                   ) -> Iterator[tuple[bytes, bytes | None]]:
        """Every (key, value) of the partition in log order, to replay. With
        `partial` (the coordinator-partial-load bug, KAFKA-5600) only the
        batches within the first offsets.load.buffer.size bytes: the
        loader's first read, as if it were the whole log."""
        budget = self._broker.config["offsets.load.buffer.size"]
        read = 0
        for _, raw in partition.log.batches():
            if partial and read and read + len(raw) > budget:
                return
            read += len(raw)
            yield from decode_batch(raw)
