"""`__consumer_offsets`: the group coordinator's storage, an internal topic
written through the same log as every other partition.

The coordinator hands over key/value records (Kafka's own formats); they go
into one uncompressed record batch per call, appended as leader. On a single
node acks=all is the leader's append; the replication issue makes this wait
for the ISR. On start every partition is replayed into the coordinator
before the broker serves (Kafka's GroupMetadataManager loads the same way).
"""

from __future__ import annotations

import io
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from reference_broker.group import StoreError

if TYPE_CHECKING:
    from reference_broker.broker import Broker

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

    def ensure(self) -> None:
        """Create the topic on first use, as Kafka does on FindCoordinator."""
        broker = self._broker
        if OFFSETS_TOPIC not in broker.topics:
            broker.create_topic(OFFSETS_TOPIC, broker.config["offsets.topic.num.partitions"], 1)
            for partition in broker.topics[OFFSETS_TOPIC].partitions:
                broker.coordinator.load(partition.index, ())

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]]) -> None:
        self.ensure()
        target = self._broker.partition(OFFSETS_TOPIC, partition)
        result = target.append(encode_batch(records), max_batch_bytes=2 ** 31 - 1)
        if result.error:
            raise StoreError(result.error)

    def load(self) -> None:
        broker = self._broker
        for partition in broker.topics[OFFSETS_TOPIC].partitions:
            broker.coordinator.load(partition.index, (
                record for _, raw in partition.log.batches() for record in decode_batch(raw)))
