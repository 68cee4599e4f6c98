"""Fetch: whole batches below the high watermark, long-polled.

A fetch waits up to max_wait for min_bytes (a producer's append wakes it),
returns at most max_bytes in total and partition_max_bytes per partition,
except that the first batch of the first partition with data is returned
whole however large (KIP-74), so a consumer always makes progress. Errors
answer at once. Fetch sessions (KIP-227) are declined with session id 0,
which the protocol allows: clients then send full fetches.
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from reference_broker.log import OffsetOutOfRange
from reference_broker.partition import READ_COMMITTED
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait.total_seconds()
    while True:
        responses, size, errors, partitions = _read(broker, shape, request)
        remaining = deadline - loop.time()
        if size >= request.min_bytes or errors or remaining <= 0 or not partitions:
            if not partitions and remaining > 0 and not errors:
                await asyncio.sleep(remaining)  # nothing to fetch: wait like Kafka
            return shape("FetchResponse", error_code=ErrorCode.none, session_id=0,
                         responses=responses)
        waiters = [p.data_waiter() for p in partitions]
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()


def _read(broker, shape, request):
    """One pass over the requested partitions: (responses, bytes, whether
    any partition erred, the partitions that exist)."""
    budget = request.max_bytes if request.max_bytes > 0 else 2 ** 31 - 1
    size, errors, found, responses = 0, False, [], []
    for topic in request.topics:
        datas = []
        for want in topic.partitions:
            partition = broker.partition(topic.topic, want.partition)
            error, records = ErrorCode.none, b""
            if partition is None:
                error = ErrorCode.unknown_topic_or_partition
            else:
                found.append(partition)
                error = partition.check_epoch(getattr(want, "current_leader_epoch", -1))
            if partition is not None and error == ErrorCode.none:
                upper = partition.readable_end(request.isolation_level)
                limit = min(want.partition_max_bytes, budget - size)
                try:
                    records = partition.log.read(want.fetch_offset, max(limit, 0), upper)
                    # KIP-74: only the response's first batch may exceed the
                    # limits; later partitions get none that does not fit.
                    if size > 0 and len(records) > limit:
                        records = b""
                except OffsetOutOfRange:
                    error = ErrorCode.offset_out_of_range
            errors |= error != ErrorCode.none
            size += len(records)
            datas.append(shape(
                "PartitionData", partition_index=want.partition, error_code=error,
                high_watermark=partition.high_watermark if partition else -1,
                last_stable_offset=partition.last_stable_offset if partition else -1,
                log_start_offset=partition.log.log_start_offset if partition else -1,
                aborted_transactions=None if request.isolation_level != READ_COMMITTED else (),
                preferred_read_replica=-1, records=records))
        responses.append(shape("FetchableTopicResponse", topic=topic.topic,
                               partitions=tuple(datas)))
    return tuple(responses), size, errors, found
