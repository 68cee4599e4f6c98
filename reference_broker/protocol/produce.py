"""Produce: append each partition's batches as they arrived.

acks=0 gets no response at all, and an error closes the connection (the
only way Kafka can tell such a producer, KafkaApis.handleProduceRequest).
On one node acks=1 and acks=all both answer after the leader's append.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes


class CloseConnection(Exception):
    """acks=0 produce failed: Kafka closes the connection instead of answering."""


async def handle(broker, header, request):
    shape = Shapes(request)
    if request.transactional_id is not None:
        return _answer_all(shape, request, ErrorCode.transactional_id_authorization_failed)
    if request.acks not in (0, 1, -1):
        return _answer_all(shape, request, ErrorCode.invalid_required_acks)
    max_batch = broker.config["message.max.bytes"]
    responses, failed = [], False
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            partition = broker.partition(topic.name, data.index)
            if partition is None:
                result_error, base, start, message = \
                    ErrorCode.unknown_topic_or_partition, -1, -1, None
            else:
                result = partition.append(data.records or b"", max_batch)
                result_error, base, start, message = \
                    result.error, result.base_offset, result.log_start_offset, result.message
            failed |= result_error != ErrorCode.none
            partitions.append(shape("PartitionProduceResponse", index=data.index,
                                    error_code=result_error, base_offset=base,
                                    log_append_time=None, log_start_offset=start,
                                    record_errors=(), error_message=message))
        responses.append(shape("TopicProduceResponse", name=topic.name,
                               partition_responses=tuple(partitions)))
    if request.acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    return shape("ProduceResponse", responses=tuple(responses))


def _answer_all(shape, request, error):
    return shape("ProduceResponse", responses=tuple(
        shape("TopicProduceResponse", name=topic.name, partition_responses=tuple(
            shape("PartitionProduceResponse", index=data.index, error_code=error,
                  base_offset=-1, log_append_time=None, log_start_offset=-1,
                  record_errors=(), error_message=None)
            for data in topic.partition_data))
        for topic in request.topic_data))
