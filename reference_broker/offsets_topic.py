"""`__consumer_offsets`: the group coordinator's storage, an internal topic
(internal_topic.py) whose records are Kafka's own formats
(GroupMetadataManager loads the same way).

TxnOffsetCommit's offsets are a producer's transactional batches here:
replay applies them where their COMMIT marker is, drops them at an ABORT,
and hands back those still waiting for a marker, which stay pending
(GroupMetadataManager.doLoadGroupsAndOffsets' pendingOffsets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from reference_broker.bugs import OFFSETS_COMMIT_ACKS_ONE
from reference_broker.group import StoreError
from reference_broker.internal_batches import decode_batch
from reference_broker.internal_topic import HostBroker, InternalTopic, TopicSettings
from reference_broker.txn.partition_txns import COMMIT, decode_marker

if TYPE_CHECKING:
    from reference_broker.partition import Partition

OFFSETS_TOPIC = "__consumer_offsets"
Record = tuple[bytes, bytes | None]
SETTINGS = TopicSettings(OFFSETS_TOPIC, "offsets.topic.num.partitions",
                         "offsets.topic.replication.factor", "offsets.commit.timeout.ms")


class OffsetsTopic(InternalTopic):
    """The coordinator's OffsetStore over the broker's internal topic."""

    def __init__(self, broker: HostBroker):
        super().__init__(broker, SETTINGS)

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
                     producer: tuple[int, int] | None = None) -> None:
        """Append with acks=all — unless the `offsets-commit-acks-one` bug
        answers after the leader's own append. StoreError on failure."""
        error = await super().append(
            partition, records, wait=OFFSETS_COMMIT_ACKS_ONE not in self._broker.config.bugs,
            producer=producer)
        if error:
            raise StoreError(error)

    def replay(self, partition: Partition, *, partial: bool = False
               ) -> tuple[list[Record], dict[int, list[Record]]]:
        """(the records that count, in the order they apply; the records
        of transactions with no marker yet, per producer id). With
        `partial` (the coordinator-partial-load bug, KAFKA-5600) only the
        batches within the first offsets.load.buffer.size bytes: the
        loader's first read, as if it were the whole log."""
        budget = self._broker.config["offsets.load.buffer.size"] if partial else None
        applied: list[Record] = []
        pending: dict[int, list[Record]] = {}
        read = 0
        for header, raw in partition.log.batches():
            if budget is not None and read and read + len(raw) > budget:
                break
            read += len(raw)
            if not header.is_transactional:
                applied.extend(decode_batch(raw))
            elif not header.is_control:
                pending.setdefault(header.producer_id, []).extend(decode_batch(raw))
            elif decode_marker(raw).result == COMMIT:
                applied.extend(pending.pop(header.producer_id, ()))
            else:
                pending.pop(header.producer_id, None)
        return applied, pending
