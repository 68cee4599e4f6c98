"""Groups and offsets to and from `__consumer_offsets` (the storage half of
Kafka's GroupMetadataManager.scala).

Writing: records are encoded synchronously, at the moment of the decision,
then appended through the `OffsetStore` (acks=all); a failed append comes
back as the client-facing error Kafka derives from the log error. Reading:
`rebuild` replays a partition's records in log order, later records winning
and tombstones deleting, into groups in state Empty (no members) or Stable,
as GroupMetadataManager.doLoadGroupsAndOffsets and
GroupMetadata.loadGroup do.
"""

from __future__ import annotations

import logging
from typing import Iterable, Protocol

from kio.schema.errors import ErrorCode

from reference_broker.group import records
from reference_broker.group.metadata import Group, GroupState, Member
from reference_broker.group.records import (
    GroupMetadataKey, GroupMetadataValue, MemberMetadataValue, OffsetCommitKey,
    OffsetCommitValue)

log = logging.getLogger(__name__)

Record = tuple[bytes, bytes | None]


class StoreError(Exception):
    """An append to `__consumer_offsets` failed with this (log) error code."""

    def __init__(self, error_code: ErrorCode):
        super().__init__(f"__consumer_offsets append failed: {error_code.name}")
        self.error_code = error_code


class OffsetStore(Protocol):
    async def append(self, partition: int, records: list[Record],
                     producer: tuple[int, int] | None = None) -> None:
        """Append key/value records to one `__consumer_offsets` partition,
        with acks=all, in the order calls are made (the records must enter the
        log before the first await); raise StoreError on failure. With a
        `producer` (id, epoch): as that producer's transactional batch."""


# GroupMetadataManager.maybeConvertOffsetCommitError: log errors -> OffsetCommit errors.
_COMMIT_ERRORS = {
    ErrorCode.network_exception: ErrorCode.coordinator_load_in_progress,
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.message_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.record_list_too_large: ErrorCode.invalid_commit_offset_size,
    ErrorCode.invalid_fetch_size: ErrorCode.invalid_commit_offset_size,
}

# GroupMetadataManager.storeGroup's putCacheCallback: log errors -> SyncGroup/JoinGroup errors.
_GROUP_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
    ErrorCode.request_timed_out: ErrorCode.rebalance_in_progress,
    ErrorCode.message_too_large: ErrorCode.unknown_server_error,
    ErrorCode.record_list_too_large: ErrorCode.unknown_server_error,
    ErrorCode.invalid_fetch_size: ErrorCode.unknown_server_error,
}


def group_record(group: Group, assignment: dict[str, bytes]) -> Record:
    """GroupMetadataKey + GroupMetadataValue v3 for the group as it is now,
    each member with its subscription for the selected protocol."""
    value = GroupMetadataValue(
        protocol_type=group.protocol_type or "",
        generation=group.generation_id,
        protocol=group.protocol_name,
        leader=group.leader_id,
        current_state_timestamp_ms=group.state_timestamp_ms,
        members=tuple(
            MemberMetadataValue(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.rebalance_timeout_ms, m.session_timeout_ms,
                                m.metadata(group.protocol_name), assignment[m.member_id])
            for m in group.members.values()))
    return records.group_metadata_key(group.group_id), records.group_metadata_value(value)


def offset_records(group_id: str,
                   offsets: dict[tuple[str, int], OffsetCommitValue]) -> list[Record]:
    return [(records.offset_commit_key(group_id, topic, partition),
             records.offset_commit_value(value))
            for (topic, partition), value in offsets.items()]


async def append(store: OffsetStore, partition: int, batch: list[Record],
                 *, for_commit: bool, producer: tuple[int, int] | None = None) -> ErrorCode:
    """Append and translate a failure the way Kafka does for an offset
    commit (`for_commit`) or a group metadata write."""
    try:
        await (store.append(partition, batch) if producer is None
               else store.append(partition, batch, producer))
    except StoreError as failure:
        conversions = _COMMIT_ERRORS if for_commit else _GROUP_ERRORS
        return conversions.get(failure.error_code, failure.error_code)
    except Exception:
        # ReplicaManager answers an unexpected append failure with
        # UNKNOWN_SERVER_ERROR; a waiting group must still get an answer.
        log.exception("__consumer_offsets-%d: append failed", partition)
        return ErrorCode.unknown_server_error
    return ErrorCode.none


def rebuild(partition_records: Iterable[Record], now_ms: int,
            pending: dict[int, list[Record]] | None = None) -> list[Group]:
    """The groups of one partition, with their offsets, from its records;
    `pending`: the offset records of transactions with no marker yet, per
    producer id, which stay pending in their groups.

    Raises records.CorruptCoordinatorRecord on a record that does not decode.
    """
    offsets: dict[str, dict[tuple[str, int], tuple[int, OffsetCommitValue]]] = {}
    metadata: dict[str, GroupMetadataValue] = {}
    for key, value in partition_records:
        parsed = records.parse_key(key)
        if isinstance(parsed, OffsetCommitKey):
            group_offsets = offsets.setdefault(parsed.group, {})
            if value is None:
                group_offsets.pop((parsed.topic, parsed.partition), None)
            else:
                # Order 0: any commit made after loading supersedes it.
                group_offsets[(parsed.topic, parsed.partition)] = (
                    0, records.parse_offset_commit_value(value))
        elif isinstance(parsed, GroupMetadataKey):
            if value is None:
                metadata.pop(parsed.group, None)
            else:
                metadata[parsed.group] = records.parse_group_metadata_value(value)
        else:
            log.warning("unknown __consumer_offsets key type %d, ignored", parsed)
    groups = []
    # Groups with offsets but no metadata are "simple" groups: Empty.
    for group_id in metadata.keys() | {g for g, o in offsets.items() if o}:
        group = (_loaded_group(group_id, metadata[group_id], now_ms) if group_id in metadata
                 else Group(group_id, GroupState.EMPTY, now_ms))
        group.offsets = offsets.get(group_id, {})
        groups.append(group)
    by_id = {group.group_id: group for group in groups}
    for producer_id, pending_records in (pending or {}).items():
        for key, value in pending_records:
            parsed = records.parse_key(key)
            if isinstance(parsed, OffsetCommitKey) and value is not None:
                group = by_id.get(parsed.group)
                if group is None:
                    group = by_id[parsed.group] = Group(parsed.group, GroupState.EMPTY, now_ms)
                    groups.append(group)
                group.pending_txn_offsets.setdefault(producer_id, {})[
                    (parsed.topic, parsed.partition)] = records.parse_offset_commit_value(value)
    return groups


def _loaded_group(group_id: str, value: GroupMetadataValue, now_ms: int) -> Group:
    group = Group(group_id, GroupState.STABLE if value.members else GroupState.EMPTY,
                  value.current_state_timestamp_ms if value.current_state_timestamp_ms != -1
                  else now_ms)
    group.generation_id = value.generation
    group.protocol_type = value.protocol_type or None
    group.protocol_name = value.protocol
    group.leader_id = value.leader
    for m in value.members:
        group.add(Member(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                         m.rebalance_timeout_ms, m.session_timeout_ms, value.protocol_type,
                         [(value.protocol, m.subscription)], m.assignment), None)
    return group
