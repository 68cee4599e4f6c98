"""Fetch: whole batches, long-polled — consumers below the high watermark,
followers up to the log end.

A fetch waits up to max_wait for min_bytes (an append or a high watermark
move wakes it), returns at most max_bytes in total and partition_max_bytes
per partition, except that the first batch of the first partition with
data is returned whole however large (KIP-74), so a reader always makes
progress. Errors answer at once. Fetch sessions (KIP-227) are declined with
session id 0, which the protocol allows: clients then send full fetches.

Only the leader serves (NOT_LEADER_OR_FOLLOWER elsewhere), after the
client's leader epoch is checked (KIP-320) — except that from v11, whose
requests carry client metadata (a rack id), a follower serves consumers
too, up to its own high watermark (KIP-392: Kafka's
FetchParams.fetchOnlyLeader is false for a consumer with client metadata,
whether or not a replica selector is configured; no preferred read replica
is ever named here). A fetch with a replica id is a follower's: it reports
the follower's LEO to the leader state (which may move the high watermark
and propose an ISR expansion), or, when the follower's last fetched epoch
ends earlier here, answers DivergingEpoch and nothing else (KIP-320
truncate-on-fetch, Fetch v12).
"""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from reference_broker.log import OffsetOutOfRange
from reference_broker.partition import READ_COMMITTED
from reference_broker.protocol.shapes import Shapes

CONSUMER = -1
FOLLOWER_FETCH_VERSION = 11     # KIP-392: consumers may fetch from followers


async def handle(broker, header, request):
    shape = Shapes(request)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.max_wait.total_seconds()
    replica_id = getattr(request, "replica_id", CONSUMER)
    reported: set[tuple[str, int]] = set()   # follower positions are reported once
    while True:
        responses, size, answer_now, partitions = _read(broker, shape, request, replica_id,
                                                        reported)
        remaining = deadline - loop.time()
        if size >= request.min_bytes or answer_now or remaining <= 0 or not partitions:
            if not partitions and remaining > 0 and not answer_now:
                await asyncio.sleep(remaining)  # nothing to fetch: wait like Kafka
            return shape("FetchResponse", error_code=ErrorCode.none, session_id=0,
                         responses=responses)
        waiters = [p.data_waiter() for p in partitions]
        try:
            await asyncio.wait(waiters, timeout=remaining, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()


def _read(broker, shape, request, replica_id, reported):
    """One pass over the requested partitions: (responses, bytes, whether
    to answer at once — an error or a divergence —, the partitions led here)."""
    budget = request.max_bytes if request.max_bytes > 0 else 2 ** 31 - 1
    size, answer_now, found, responses = 0, False, [], []
    for topic in request.topics:
        datas = []
        for want in topic.partitions:
            partition = broker.partition(topic.topic, want.partition)
            error, records, diverging, aborted = ErrorCode.none, b"", None, ()
            if partition is None:
                error = broker.missing_partition_error(topic.topic, want.partition)
            elif replica_id < 0 and request.__version__ >= FOLLOWER_FETCH_VERSION:
                error = partition.replica_error(getattr(want, "current_leader_epoch", -1))
            else:
                error = partition.leader_error(getattr(want, "current_leader_epoch", -1))
            if error == ErrorCode.none:
                found.append(partition)
                try:
                    if replica_id >= 0:
                        records, diverging = _replica_read(broker, partition, want, replica_id,
                                                           reported)
                    else:
                        upper = partition.readable_end(request.isolation_level)
                        limit = min(want.partition_max_bytes, budget - size)
                        records = partition.log.read(want.fetch_offset, max(limit, 0), upper)
                        if request.isolation_level == READ_COMMITTED:
                            # Every aborted transaction the records may
                            # hold, so the reader can drop them (KIP-98).
                            aborted = tuple(
                                shape("AbortedTransaction", producer_id=txn.producer_id,
                                      first_offset=txn.first_offset)
                                for txn in partition.aborted_transactions(
                                    want.fetch_offset, upper))
                        # KIP-74: only the response's first batch may exceed the
                        # limits; later partitions get none that does not fit.
                        if size > 0 and len(records) > limit:
                            records = b""
                except OffsetOutOfRange:
                    error = ErrorCode.offset_out_of_range
            answer_now |= error != ErrorCode.none or diverging is not None
            size += len(records)
            fields = {}
            if diverging is not None:
                fields["diverging_epoch"] = shape("EpochEndOffset", epoch=diverging[0],
                                                  end_offset=diverging[1])
            # A partition answered with an error has no offsets to tell:
            # ReplicaManager.readFromLog's LogReadResult for a failed read
            # (createLogReadResult) carries UnifiedLog.UnknownOffset (-1) as
            # high watermark, last stable and log start offset. Except, here,
            # OFFSET_OUT_OF_RANGE, which tells where the log is (Kafka: -1
            # too; a known divergence, docs/broker.md).
            ok = error in (ErrorCode.none, ErrorCode.offset_out_of_range)
            datas.append(shape(
                "PartitionData", partition_index=want.partition, error_code=error,
                high_watermark=partition.high_watermark if ok else -1,
                last_stable_offset=partition.last_stable_offset if ok else -1,
                log_start_offset=partition.log.log_start_offset if ok else -1,
                aborted_transactions=None if request.isolation_level != READ_COMMITTED
                else aborted,
                preferred_read_replica=-1, records=records, **fields))
        responses.append(shape("FetchableTopicResponse", topic=topic.topic,
                               partitions=tuple(datas)))
    return tuple(responses), size, answer_now, found


def _replica_read(broker, partition, want, replica_id, reported):
    """A follower's fetch (Partition.fetchRecords with a replica id)."""
    leader = partition.leader
    if replica_id not in leader.replicas or replica_id == broker.node_id:
        raise OffsetOutOfRange(want.fetch_offset, partition.log.log_start_offset,
                               partition.log.log_end_offset)
    diverging = leader.diverging_epoch(getattr(want, "last_fetched_epoch", -1),
                                       want.fetch_offset, partition.log)
    if diverging is not None:
        return b"", diverging   # no records, no follower state update (KAFKA-13141)
    records = partition.log.read(want.fetch_offset, want.partition_max_bytes)
    key = (partition.topic, partition.index)
    if key not in reported:
        reported.add(key)
        broker.propose(partition, partition.on_follower_fetch(replica_id, want.fetch_offset))
    return records, None
