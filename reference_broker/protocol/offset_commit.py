"""OffsetCommit: fenced by member and generation, stored in
`__consumer_offsets` before the answer (retention_time of v2–v4 is
ignored, as Kafka ≥ 2.1 does for those versions, KIP-211)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.group import OffsetCommit
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    offsets, errors = [], {}
    for topic in request.topics:
        for p in topic.partitions:
            if broker.image.partition(topic.name, p.partition_index) is None:
                # KafkaApis.handleOffsetCommitRequest: unknown partitions are
                # answered here and never reach the coordinator.
                errors[(topic.name, p.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                offsets.append(OffsetCommit(topic.name, p.partition_index, p.committed_offset,
                                            getattr(p, "committed_leader_epoch", -1),
                                            p.committed_metadata))
    if offsets:
        errors.update(await broker.coordinator.commit_offsets(
            request.group_id, request.generation_id_or_member_epoch, request.member_id,
            getattr(request, "group_instance_id", None), offsets))
    return shape("OffsetCommitResponse", topics=tuple(
        shape("OffsetCommitResponseTopic", name=topic.name, partitions=tuple(
            shape("OffsetCommitResponsePartition", partition_index=p.partition_index,
                  error_code=errors[(topic.name, p.partition_index)])
            for p in topic.partitions))
        for topic in request.topics))
