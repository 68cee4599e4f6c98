"""Pulling from a leader: one fetcher per leader broker, fetching every
partition this broker follows there in one Fetch (Kafka's
ReplicaFetcherThread per source broker).

Each round sends Fetch v12 with this broker's replica id, and per partition
the leader epoch it follows, its LEO as fetch offset and the epoch of its
last batch (KIP-320's truncate-on-fetch); the answers go to the partition's
`FollowerState` through `Partition.apply_fetched`. A partition whose role
changed while the fetch was in flight is skipped: the answer belongs to an
older leadership. A leader that cannot be reached is retried after a pause
until the metadata names another one.
"""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch
from kio.schema.list_offsets.v5 import request as list_offsets
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from reference_broker.log import UnexpectedAppendOffset
from reference_broker.peer import Peer, PeerError
from reference_broker.replication import FetchedPartition

if TYPE_CHECKING:
    from reference_broker.config import BrokerConfig
    from reference_broker.controller.image import MetadataImage
    from reference_broker.partition import Partition

log = logging.getLogger("reference_broker.fetcher")

_BACKOFF_S = 0.1     # replica.fetch.backoff.ms is 1000; tests need faster failover
_LATEST = -1


class FollowerBroker(Protocol):
    """What a fetcher reads of the broker it fetches for (broker.py's
    `Broker`, which starts the fetchers and so is above them): its replicas,
    and where the image says their leader is."""

    node_id: int
    config: BrokerConfig
    image: MetadataImage
    partitions: dict[tuple[str, int], Partition]


class ReplicaFetcher:
    def __init__(self, broker: FollowerBroker, leader_id: int):
        self.broker = broker
        self.leader_id = leader_id
        self._peer: Peer | None = None
        self._woken = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    def wake(self) -> None:
        self._woken.set()

    def close(self) -> None:
        self._task.cancel()
        if self._peer is not None:
            self._peer.close()

    def _partitions(self) -> list["Partition"]:
        return [p for p in self.broker.partitions.values()
                if p.follower is not None and p.follower.leader_id == self.leader_id]

    def _leader_peer(self) -> Peer | None:
        info = self.broker.image.brokers.get(self.leader_id)
        if info is None:
            return None
        if self._peer is None or (self._peer.host, self._peer.port) != (info.host, info.port):
            if self._peer is not None:
                self._peer.close()
            self._peer = Peer(info.host, info.port, f"replica-fetcher-{self.broker.node_id}")
        return self._peer

    async def _pause(self, seconds: float) -> None:
        """Sleep, but wake early when the metadata changes."""
        try:
            await asyncio.wait_for(self._woken.wait(), seconds)
        except asyncio.TimeoutError:
            pass

    async def _run(self) -> None:
        while True:
            self._woken.clear()
            partitions = self._partitions()
            peer = self._leader_peer()
            if not partitions or peer is None:
                await self._pause(1.0)
                continue
            followers = {(p.topic, p.index): (p, p.follower) for p in partitions}
            config = self.broker.config
            wait_s = config["replica.fetch.wait.max.ms"] / 1000
            try:
                response = await peer.request(self._request(partitions), wait_s + 10)
            except PeerError as e:
                log.debug("fetch from %d failed: %s", self.leader_id, e)
                await self._pause(_BACKOFF_S)
                continue
            backoff = response.error_code != ErrorCode.none
            for topic in response.responses:
                for data in topic.partitions:
                    partition, follower = followers.get((topic.topic, data.partition_index),
                                                        (None, None))
                    if partition is None or partition.follower is not follower:
                        continue    # the role changed while we fetched
                    backoff |= not await self._apply(peer, partition, data)
            if backoff:
                await self._pause(_BACKOFF_S)

    def _request(self, partitions: list["Partition"]) -> fetch.FetchRequest:
        config = self.broker.config
        by_topic: dict[str, list] = {}
        for p in partitions:
            offset, epoch = p.follower.fetch_position()
            by_topic.setdefault(p.topic, []).append(fetch.FetchPartition(
                partition=i32(p.index), current_leader_epoch=i32(p.follower.leader_epoch),
                fetch_offset=i64(offset), last_fetched_epoch=i32(epoch),
                log_start_offset=i64(p.log.log_start_offset),
                partition_max_bytes=i32(config["replica.fetch.max.bytes"])))
        return fetch.FetchRequest(
            cluster_id=None, replica_id=BrokerId(self.broker.node_id),
            max_wait=timedelta(milliseconds=config["replica.fetch.wait.max.ms"]),
            min_bytes=i32(1), max_bytes=i32(10 * 1024 * 1024), isolation_level=i8(0),
            session_id=i32(0), session_epoch=i32(-1),
            topics=tuple(fetch.FetchTopic(topic=TopicName(t), partitions=tuple(ps))
                         for t, ps in by_topic.items()),
            forgotten_topics_data=(), rack_id="")

    async def _apply(self, peer: Peer, partition: "Partition", data) -> bool:
        """Apply one partition's answer; False to back off."""
        error = data.error_code
        if error == ErrorCode.offset_out_of_range:
            leader_end = await self._leader_log_end(peer, partition)
            if leader_end is not None and partition.follower is not None:
                partition.truncate_out_of_range(leader_end)
            return False
        if error != ErrorCode.none:
            # FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH / NOT_LEADER_OR_FOLLOWER:
            # one of us is behind on metadata; it will catch up.
            return False
        diverging = data.diverging_epoch
        try:
            partition.apply_fetched(FetchedPartition(
                error=error, high_watermark=data.high_watermark,
                log_start_offset=data.log_start_offset, records=data.records or b"",
                diverging_epoch=(diverging.epoch, diverging.end_offset)
                if diverging.epoch >= 0 else None))
        except UnexpectedAppendOffset as e:
            log.warning("%s: %s", partition, e)
            return False
        except OSError as e:
            # A disk error (EIO): the failed append changed nothing
            # (Segment.append), so the next fetch asks again from the log
            # end. Kafka would take the log directory offline
            # (KIP-112) and, with one directory, stop the broker; the
            # reference broker treats the error as transient and retries,
            # as it does for a produce that hit it. Not catching it here
            # ended the fetcher for good: the follower never rejoined.
            log.warning("%s: disk error applying a fetch from %d: %s", partition,
                        self.leader_id, e)
            return False
        if diverging.epoch >= 0:
            log.info("%s: truncated to %d after diverging epoch %d (end %d) from leader %d",
                     partition, partition.log.log_end_offset, diverging.epoch,
                     diverging.end_offset, self.leader_id)
        return True

    async def _leader_log_end(self, peer: Peer, partition: "Partition") -> int | None:
        """ListOffsets(latest) as a replica: the leader's LEO."""
        try:
            response = await peer.request(list_offsets.ListOffsetsRequest(
                replica_id=BrokerId(self.broker.node_id), isolation_level=i8(0),
                topics=(list_offsets.ListOffsetsTopic(name=TopicName(partition.topic), partitions=(
                    list_offsets.ListOffsetsPartition(
                        partition_index=i32(partition.index),
                        current_leader_epoch=i32(partition.follower.leader_epoch),
                        timestamp=i64(_LATEST)),)),)), 5.0)
        except PeerError:
            return None
        answer = response.topics[0].partitions[0]
        return answer.offset if answer.error_code == ErrorCode.none else None
