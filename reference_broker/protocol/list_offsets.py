"""ListOffsets: earliest (-2), latest (-1: the high watermark, or the last
stable offset under read_committed) or the first offset at or after a
timestamp (any other negative one is UNSUPPORTED_VERSION). Only the leader
answers (after the client's epoch is checked, KIP-320). A new leader whose
high watermark is still below its epoch's start answers latest with
OFFSET_NOT_AVAILABLE rather than an offset that goes backwards (KIP-207).
A replica id asks for the log end offset: a follower finding where the
leader's log ends."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes

LATEST, EARLIEST = -1, -2


async def handle(broker, header, request):
    shape = Shapes(request)
    replica = getattr(request, "replica_id", -1) >= 0
    topics = []
    for topic in request.topics:
        answers = []
        for want in topic.partitions:
            error, timestamp, offset, epoch = ErrorCode.none, -1, -1, -1
            partition = broker.partition(topic.name, want.partition_index)
            if want.timestamp < EARLIEST:
                # The special timestamps below -2 came with later versions
                # (-3 v7 KIP-734, -4 v8 KIP-405, -5 v9 KIP-1005), none of
                # which this broker speaks; Kafka answers any of them, and
                # any other negative one, UNSUPPORTED_VERSION before it
                # looks at the partition (seen by tests/conformance/).
                error = ErrorCode.unsupported_version
            elif partition is None:
                error = broker.missing_partition_error(topic.name, want.partition_index)
            else:
                error = partition.leader_error(getattr(want, "current_leader_epoch", -1))
            if error == ErrorCode.none:
                epoch = partition.leader_epoch
                if want.timestamp == LATEST and replica:
                    offset = partition.log.log_end_offset
                elif want.timestamp == LATEST and partition.leader.high_watermark_lagging:
                    error = ErrorCode.offset_not_available
                elif want.timestamp == LATEST:
                    offset = partition.readable_end(getattr(request, "isolation_level", 0))
                elif want.timestamp == EARLIEST:
                    offset = partition.log.log_start_offset
                else:
                    found = partition.log.offset_for_timestamp(want.timestamp)
                    if found is not None and found[0] < partition.high_watermark:
                        offset, timestamp = found
                    else:
                        # No record at or after the timestamp: Kafka answers
                        # unknown timestamp, offset and epoch alike
                        # (ListOffsetsResponse.UNKNOWN_EPOCH when
                        # fetchOffsetForTimestamp finds nothing).
                        epoch = -1
            answers.append(shape("ListOffsetsPartitionResponse", partition_index=want.partition_index,
                                 error_code=error, timestamp=timestamp, offset=offset,
                                 leader_epoch=epoch))
        topics.append(shape("ListOffsetsTopicResponse", name=topic.name, partitions=tuple(answers)))
    return shape("ListOffsetsResponse", topics=tuple(topics))
