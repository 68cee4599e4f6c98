"""OffsetCommit: fenced by member and generation, stored in
`__consumer_offsets` before the answer (retention_time of v2–v4 is
ignored, as Kafka ≥ 2.1 does for those versions, KIP-211).

Its request and response shapes are TxnOffsetCommit's too
(txn_offset_commit.py): `requested` and `respond` serve both."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.group import OffsetCommit
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    offsets, errors = requested(broker, request)
    if offsets:
        errors.update(await broker.coordinator.commit_offsets(
            request.group_id, request.generation_id_or_member_epoch, request.member_id,
            getattr(request, "group_instance_id", None), offsets))
    return respond(Shapes(request), "OffsetCommit", request, errors)


def requested(broker, request) -> tuple[list[OffsetCommit], dict]:
    """(the offsets for the coordinator, the errors already known):
    unknown partitions are answered here and never reach the coordinator
    (KafkaApis.handleOffsetCommitRequest, handleTxnOffsetCommitRequest)."""
    offsets, errors = [], {}
    for topic in request.topics:
        for p in topic.partitions:
            if broker.image.partition(topic.name, p.partition_index) is None:
                errors[(topic.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                offsets.append(OffsetCommit(topic.name, p.partition_index, p.committed_offset,
                                            getattr(p, "committed_leader_epoch", -1),
                                            p.committed_metadata))
    return offsets, errors


def respond(shape, api: str, request, errors: dict):
    """`api`: "OffsetCommit" or "TxnOffsetCommit", its entities' prefix."""
    return shape(f"{api}Response", topics=tuple(
        shape(f"{api}ResponseTopic", name=topic.name, partitions=tuple(
            shape(f"{api}ResponsePartition", partition_index=p.partition_index,
                  error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions))
        for topic in request.topics))
