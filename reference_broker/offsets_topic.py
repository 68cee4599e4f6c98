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

from collections.abc import Iterator
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from reference_broker.bugs import OFFSETS_COMMIT_ACKS_ONE
from reference_broker.controller.new_topic import NewTopic
from reference_broker.group import StoreError
from reference_broker.internal_batches import decode_batch, encode_batch

if TYPE_CHECKING:
    from reference_broker.config import BrokerConfig
    from reference_broker.controller.image import MetadataImage
    from reference_broker.partition import Partition

OFFSETS_TOPIC = "__consumer_offsets"


class HostBroker(Protocol):
    """What the topic asks of the broker that hosts it (broker.py's
    `Broker`, which owns this topic and so is above it)."""

    config: BrokerConfig
    image: MetadataImage

    async def create_topics(self, topics: list[NewTopic], validate_only: bool
                            ) -> list[tuple[ErrorCode, str | None]]: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...


class OffsetsTopic:
    """The coordinator's OffsetStore over the broker's internal topic."""

    def __init__(self, broker: HostBroker):
        self._broker = broker

    async def ensure(self) -> None:
        """Create the topic on first use, as Kafka does on FindCoordinator,
        with offsets.topic.replication.factor capped by the brokers
        registered (so a small cluster still gets one)."""
        broker = self._broker
        if OFFSETS_TOPIC not in broker.image.topics:
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
