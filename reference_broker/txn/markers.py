"""Transaction markers on their way to the partitions of a transaction
(Kafka's TransactionMarkerChannelManager): WriteTxnMarkers to each
partition's current leader, retried across leader changes until every
partition has written its marker.

Which errors retry and which abandon a partition is Kafka's
(TransactionMarkerRequestCompletionHandler): a leader that moved, a
partition not yet known or below min.insync.replicas is retried; a marker
refused as coming from an old producer epoch or a fenced coordinator is
given up ("this txn can now be ignored") — so a wrongful refusal would
leave a hanging transaction, which kchaos's checkers look for.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName
from kio.schema.write_txn_markers.v1 import request as markers_v1
from kio.static.primitive import i16, i32

from reference_broker.peer import PeerError, Peers
from reference_broker.txn.metadata import Partition, by_topic

if TYPE_CHECKING:
    from reference_broker.controller.image import MetadataImage

log = logging.getLogger(__name__)

_BACKOFF_S = 0.1            # retry.backoff.ms
_REQUEST_TIMEOUT_S = 30.0   # request.timeout.ms of the channel
_ABANDON = {ErrorCode.invalid_producer_epoch, ErrorCode.transaction_coordinator_fenced}


class MarkerChannel:
    """The coordinator's MarkerWriter over the network, to every leader
    including this broker (as Kafka's channel does)."""

    def __init__(self, image: MetadataImage, node_id: int):
        self._image = image
        self._peers = Peers(f"txn-marker-channel-{node_id}")

    async def write(self, producer_id: int, producer_epoch: int, result: int,
                    coordinator_epoch: int, partitions: Iterable[Partition],
                    still_coordinator: Callable[[], bool]) -> None:
        left = set(partitions)
        while left and still_coordinator():
            by_leader: dict[int, list[Partition]] = defaultdict(list)
            for topic, index in left:
                state = self._image.partition(topic, index)
                if state is None and topic not in self._image.topics:
                    # The topic was deleted: nothing to mark (Kafka drops it too).
                    left.discard((topic, index))
                elif state is not None and state.leader >= 0:
                    by_leader[state.leader].append((topic, index))
            answers = await asyncio.gather(*(
                self._send(leader, producer_id, producer_epoch, result, coordinator_epoch, ps)
                for leader, ps in by_leader.items()))
            for answer in answers:
                for partition, error in answer.items():
                    if error == ErrorCode.none:
                        left.discard(partition)
                    elif error in _ABANDON:
                        log.warning("%s-%d: marker of producer %d epoch %d refused (%s); "
                                    "abandoned", *partition, producer_id, producer_epoch,
                                    error.name)
                        left.discard(partition)
            if left:
                await asyncio.sleep(_BACKOFF_S)

    async def _send(self, leader: int, producer_id: int, producer_epoch: int, result: int,
                    coordinator_epoch: int, partitions: list[Partition]
                    ) -> dict[Partition, ErrorCode]:
        info = self._image.brokers.get(leader)
        if info is None or info.fenced:
            return {}
        topics = by_topic(partitions)
        request = markers_v1.WriteTxnMarkersRequest(markers=(markers_v1.WritableTxnMarker(
            producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
            transaction_result=bool(result), coordinator_epoch=i32(coordinator_epoch),
            topics=tuple(markers_v1.WritableTxnMarkerTopic(
                name=TopicName(topic), partition_indexes=tuple(i32(i) for i in indexes))
                for topic, indexes in topics.items())),))
        try:
            response = await self._peers.to(leader, info.host, info.port).request(
                request, _REQUEST_TIMEOUT_S)
        except PeerError as e:
            log.info("markers to broker %d: %s; retrying", leader, e)
            return {}
        return {(topic.name, p.partition_index): p.error_code
                for marker in response.markers for topic in marker.topics
                for p in topic.partitions}

    def close(self) -> None:
        self._peers.close()
