"""A group's committed offsets, once the coordinator has validated the
request: stored through `__consumer_offsets` before they are visible, and
read back (GroupMetadataManager.storeOffsets and getOffsets).

An offset enters the group's cache only after its append succeeded, so the
cache never shows what the log may not hold; each commit is numbered as it
is made, so that of two in flight the later one in the log stays.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Callable, Coroutine, Sequence

from kio.schema.errors import ErrorCode

from reference_broker.group import storage
from reference_broker.group.config import GroupConfig
from reference_broker.group.metadata import Group, GroupState
from reference_broker.group.records import OffsetCommitValue, partition_for
from reference_broker.group.results import CommittedOffset, OffsetCommit, OffsetFetchResult

NONE = ErrorCode.none
TopicPartition = tuple[str, int]


class GroupOffsets:
    def __init__(self, config: GroupConfig, store: storage.OffsetStore,
                 spawn: Callable[[Coroutine], asyncio.Task]):
        """`spawn` runs the appends as the coordinator's tasks, which it
        cancels on close."""
        self._config = config
        self._store = store
        self._spawn = spawn
        self._commit_order = itertools.count(1)   # 0 is every offset replayed by load()

    async def store(self, group: Group, offsets: Sequence[OffsetCommit], now_ms: int,
                    producer: tuple[int, int] | None = None) -> dict[TopicPartition, ErrorCode]:
        """Append the commits, stamped `now_ms` (their commit timestamp);
        per partition, NONE or the error that refused it. With a `producer`
        (id, epoch), TxnOffsetCommit: the offsets stay pending until the
        transaction's marker (`complete_txn`)."""
        results: dict[TopicPartition, ErrorCode] = {}
        values: dict[TopicPartition, OffsetCommitValue] = {}
        for commit in offsets:
            metadata = commit.metadata or ""
            # offset.metadata.max.bytes counts Java chars (UTF-16 units).
            if len(metadata.encode("utf-16-le")) // 2 > self._config.offset_metadata_max_bytes:
                results[(commit.topic, commit.partition)] = ErrorCode.offset_metadata_too_large
            else:
                values[(commit.topic, commit.partition)] = OffsetCommitValue(
                    commit.offset, commit.leader_epoch, metadata, now_ms)
        if values:
            # Shielded: once appended, the offset must reach the cache even if
            # the client goes away, or the cache and the log would disagree.
            write = self._spawn(self._write(group, next(self._commit_order), values, producer))
            error = await asyncio.shield(write)
            results.update({tp: error for tp in values})
        return results

    def complete_txn(self, group: Group, producer_id: int, commit: bool) -> None:
        """The producer's transaction ended in the group's partition
        (GroupMetadata.completePendingTxnOffsetCommit): a commit makes its
        pending offsets the group's, later than every offset before."""
        pending = group.pending_txn_offsets.pop(producer_id, None)
        if pending and commit:
            order = next(self._commit_order)
            for tp, value in pending.items():
                group.offsets[tp] = (order, value)

    async def _write(self, group: Group, order: int,
                     values: dict[TopicPartition, OffsetCommitValue],
                     producer: tuple[int, int] | None) -> ErrorCode:
        partition = partition_for(group.group_id, self._config.offsets_topic_partitions)
        error = await storage.append(self._store, partition,
                                     storage.offset_records(group.group_id, values),
                                     for_commit=True, producer=producer)
        if error is NONE and group.state is not GroupState.DEAD and producer is not None:
            group.pending_txn_offsets.setdefault(producer[0], {}).update(values)
        elif error is NONE and group.state is not GroupState.DEAD:
            for tp, value in values.items():
                # Concurrent commits may finish out of order; the one later in
                # the log wins (GroupMetadata.onOffsetCommitAppend).
                if group.offsets.get(tp, (0, None))[0] < order:
                    group.offsets[tp] = (order, value)
        return error

    @staticmethod
    def fetch(group: Group | None, partitions: Sequence[TopicPartition] | None,
              require_stable: bool = False) -> OffsetFetchResult:
        """partitions None = every partition the group has an offset for.
        `require_stable`: a partition with an offset pending in an open
        transaction is UNSTABLE_OFFSET_COMMIT (KIP-447; Kafka's
        OffsetMetadataManager.hasPendingTransactionalOffsets)."""
        stored = group.offsets if group is not None else {}
        unstable = set().union(*group.pending_txn_offsets.values()) \
            if require_stable and group is not None else set()
        wanted = list(stored) if partitions is None else partitions
        return OffsetFetchResult(NONE, {
            tp: (CommittedOffset(error=ErrorCode.unstable_offset_commit) if tp in unstable
                 else CommittedOffset(stored[tp][1].offset, stored[tp][1].leader_epoch,
                                      stored[tp][1].metadata)
                 if tp in stored else CommittedOffset())
            for tp in wanted})
