"""WriteTxnMarkers (inter-broker): a transaction coordinator's COMMIT or
ABORT markers, written into each partition this broker leads and answered
once replicated (acks=all, as ReplicaManager.appendRecords with
requiredAcks -1 for markers). A marker replicated in a `__consumer_offsets`
partition then commits or drops the producer's pending TxnOffsetCommit
offsets there (GroupCoordinator.onTransactionCompleted)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from reference_broker.offsets_topic import OFFSETS_TOPIC
from reference_broker.protocol.shapes import Shapes
from reference_broker.txn.partition_txns import Marker

_REPLICATION_TIMEOUT_S = 30.0


async def handle(broker, header, request):
    shape = Shapes(request)
    results = []
    for marker in request.markers:
        answers: dict[tuple[str, int], ErrorCode | asyncio.Future] = {}
        for topic in marker.topics:
            for index in topic.partition_indexes:
                partition = broker.partition(topic.name, index)
                if partition is None:
                    answers[(topic.name, index)] = broker.missing_partition_error(
                        topic.name, index)
                    continue
                written = Marker(int(marker.transaction_result), marker.coordinator_epoch)
                error, offset = partition.append_marker(
                    marker.producer_id, marker.producer_epoch, written)
                answers[(topic.name, index)] = error or asyncio.ensure_future(
                    partition.wait_replicated(offset, _REPLICATION_TIMEOUT_S))
        waiting = {k: v for k, v in answers.items() if isinstance(v, asyncio.Future)}
        for key, error in zip(waiting, await asyncio.gather(*waiting.values())):
            answers[key] = error
            if key[0] == OFFSETS_TOPIC and not error:
                broker.coordinator.complete_txn(key[1], marker.producer_id,
                                                bool(marker.transaction_result))
        topics: dict[str, list] = {}
        for (name, index), error in answers.items():
            topics.setdefault(name, []).append(shape(
                "WritableTxnMarkerPartitionResult", partition_index=index, error_code=error))
        results.append(shape("WritableTxnMarkerResult", producer_id=marker.producer_id,
                             topics=tuple(shape("WritableTxnMarkerTopicResult", name=name,
                                                partitions=tuple(ps))
                                          for name, ps in topics.items())))
    return shape("WriteTxnMarkersResponse", markers=tuple(results))
