"""OffsetFetch: a group's committed offsets, for the partitions named or
(topics null, v2+) all of them, each with the leader epoch it was committed
in (v5+, KIP-320: a consumer resuming there validates it) — none under the
`no-leader-epoch-fencing` switch, as before KIP-320. With `require_stable`
(v7+, KIP-447) a partition whose offset waits in an open transaction is
UNSTABLE_OFFSET_COMMIT, so a consumer of a consume-transform-produce
pipeline does not resume from an offset its predecessor may still commit.
(v8's batch of groups is not served.)"""

from __future__ import annotations

from collections import defaultdict

from kio.schema.errors import ErrorCode

from reference_broker.group.results import NO_LEADER_EPOCH
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    wanted = None if request.topics is None else \
        [(t.name, p) for t in request.topics for p in t.partition_indexes]
    require_stable = shape.version >= 7 and request.require_stable
    result = broker.coordinator.fetch_offsets(request.group_id, wanted, require_stable)
    by_topic = defaultdict(list)
    for (topic, partition), committed in sorted(result.offsets.items()):
        epoch = committed.leader_epoch if broker.tells_leader_epochs else NO_LEADER_EPOCH
        by_topic[topic].append(shape(
            "OffsetFetchResponsePartition", partition_index=partition,
            committed_offset=committed.offset, committed_leader_epoch=epoch,
            metadata=committed.metadata, error_code=committed.error))
    topics = tuple(shape("OffsetFetchResponseTopic", name=topic, partitions=tuple(parts))
                   for topic, parts in by_topic.items())
    error = result.error
    if shape.version < 2 and error is not ErrorCode.none:
        # v0–v1 have no top-level error: it goes on every partition.
        topics = tuple(shape("OffsetFetchResponseTopic", name=t.name, partitions=tuple(
            shape("OffsetFetchResponsePartition", partition_index=p, committed_offset=-1,
                  committed_leader_epoch=-1, metadata="", error_code=error)
            for p in t.partition_indexes)) for t in request.topics or ())
    return shape("OffsetFetchResponse", topics=topics, error_code=error)
