"""OffsetForLeaderEpoch: where an epoch ended in this leader's log, so a
consumer (KIP-320) or follower (KIP-101/279) can detect divergence. Only
the leader answers."""

from __future__ import annotations


from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    topics = []
    for topic in request.topics:
        answers = []
        for want in topic.partitions:
            partition = broker.partition(topic.topic, want.partition)
            epoch, end = -1, -1
            if partition is None:
                error = broker.missing_partition_error(topic.topic, want.partition)
            else:
                error = partition.leader_error(want.current_leader_epoch)
                if not error:
                    epoch, end = partition.log.end_offset_for_epoch(want.leader_epoch)
            answers.append(shape("EpochEndOffset", error_code=error, partition=want.partition,
                                 leader_epoch=epoch, end_offset=end))
        topics.append(shape("OffsetForLeaderTopicResult", topic=topic.topic,
                            partitions=tuple(answers)))
    return shape("OffsetForLeaderEpochResponse", topics=tuple(topics))
