"""A topic the broker writes itself — `__consumer_offsets`,
`__transaction_state` — through the same log as every other partition.

A coordinator hands over key/value records; they go into one uncompressed
record batch per call, appended as leader with acks=all. The topic is
created on first use (as Kafka does on FindCoordinator) with its
replication factor capped by the brokers registered, so a small cluster
still gets one. When this broker becomes leader of one of its partitions
the broker replays it into the coordinator, and unloads it
when leadership moves on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from reference_broker.controller.new_topic import NewTopic
from reference_broker.internal_batches import TRANSACTIONAL, decode_batch, encode_batch

if TYPE_CHECKING:
    from reference_broker.config import BrokerConfig
    from reference_broker.controller.image import MetadataImage
    from reference_broker.partition import Partition


class HostBroker(Protocol):
    """What the topic asks of the broker that hosts it (broker.py's
    `Broker`, which owns this topic and so is above it)."""

    config: BrokerConfig
    image: MetadataImage

    async def create_topics(self, topics: list[NewTopic], validate_only: bool
                            ) -> list[tuple[ErrorCode, str | None]]: ...

    def partition(self, topic: str, index: int) -> Partition | None: ...


@dataclass(frozen=True)
class TopicSettings:
    """The broker settings that shape one internal topic (Kafka's names)."""
    name: str
    partitions: str         # e.g. offsets.topic.num.partitions
    replication: str        # e.g. offsets.topic.replication.factor
    timeout: str            # how long an append waits for the ISR
    min_isr: str | None = None      # the topic's min.insync.replicas, if it sets one


class InternalTopic:
    def __init__(self, broker: HostBroker, settings: TopicSettings):
        self._broker = broker
        self.settings = settings
        self.name = settings.name

    @property
    def partitions(self) -> int:
        return self._broker.config[self.settings.partitions]

    async def ensure(self) -> None:
        broker, settings = self._broker, self.settings
        if self.name in broker.image.topics:
            return
        replication = min(broker.config[settings.replication],
                          max(1, len(broker.image.brokers)))
        configs = () if settings.min_isr is None else (
            ("min.insync.replicas", str(min(broker.config[settings.min_isr], replication))),)
        await broker.create_topics([NewTopic(self.name, self.partitions, replication,
                                             configs=configs)], False)

    def leader(self, index: int):
        """The registered, unfenced broker leading partition `index`, or None."""
        image = self._broker.image
        state = image.partition(self.name, index)
        leader = None if state is None else image.brokers.get(state.leader)
        return None if leader is None or leader.fenced else leader

    async def append(self, index: int, records: list[tuple[bytes, bytes | None]], *,
                     wait: bool = True, producer: tuple[int, int] | None = None) -> ErrorCode:
        """Append as leader, then (with `wait`) wait for the ISR (acks=all)
        up to the topic's timeout setting. The log's error, or none. With a
        `producer` (id, epoch), as a transactional batch of that producer
        (TxnOffsetCommit's offsets, pending until its marker)."""
        broker = self._broker
        target = broker.partition(self.name, index)
        if target is None:
            return ErrorCode.not_leader_or_follower
        batch = encode_batch(records) if producer is None else encode_batch(
            records, producer_id=producer[0], producer_epoch=producer[1],
            attributes=TRANSACTIONAL)
        result = target.append(batch, max_batch_bytes=2 ** 31 - 1, acks=-1, coordinator=True)
        if result.error or not wait:
            return result.error
        return await target.wait_replicated(
            result.last_offset, broker.config[self.settings.timeout] / 1000)

    def records_of(self, partition: Partition) -> Iterator[tuple[bytes, bytes | None]]:
        """Every (key, value) of the partition in log order, to replay."""
        for _, raw in partition.log.batches():
            yield from decode_batch(raw)
