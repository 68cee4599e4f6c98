"""Produce: append each partition's batches as they arrived.

acks=0 gets no response at all, and an error closes the connection (the
only way Kafka can tell such a producer, KafkaApis.handleProduceRequest).
acks=1 answers after the leader's append; acks=all is refused before the
append while the ISR is below min.insync.replicas, and otherwise answers
once the high watermark passes every partition's batch, or at the request
timeout (DelayedProduce): REQUEST_TIMED_OUT, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum.
"""

from __future__ import annotations

import asyncio

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
    results = []    # (topic, index, partition, ProduceResult-like fields)
    for topic in request.topic_data:
        for data in topic.partition_data:
            partition = broker.partition(topic.name, data.index)
            if partition is None:
                results.append([topic.name, data.index, None,
                                broker.missing_partition_error(topic.name, data.index),
                                -1, -1, None, -1])
            else:
                # max.message.bytes: the topic's, else message.max.bytes.
                max_batch = broker.topic_settings.values(topic.name)["max.message.bytes"]
                r = partition.append(data.records or b"", max_batch, request.acks)
                results.append([topic.name, data.index, partition, r.error, r.base_offset,
                                r.log_start_offset, r.message, r.last_offset])
    if request.acks == -1:
        timeout_s = request.timeout.total_seconds()
        waiting = [(result, result[2].wait_replicated(result[7], timeout_s))
                   for result in results if result[3] == ErrorCode.none]
        verdicts = await asyncio.gather(*(w for _, w in waiting))
        for (result, _), verdict in zip(waiting, verdicts):
            result[3] = verdict
    failed = any(result[3] != ErrorCode.none for result in results)
    responses = []
    for name in dict.fromkeys(result[0] for result in results):
        responses.append(shape("TopicProduceResponse", name=name, partition_responses=tuple(
            shape("PartitionProduceResponse", index=index, error_code=error,
                  base_offset=base, log_append_time=None, log_start_offset=start,
                  record_errors=(), error_message=message)
            for topic, index, _, error, base, start, message, _ in results if topic == name)))
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
