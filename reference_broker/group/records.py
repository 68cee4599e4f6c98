"""The `__consumer_offsets` record formats, byte for byte as Kafka writes them.

A record key starts with an int16 that says what the record is (Kafka's
CoordinatorRecordType: 0 and 1 = offset commit, 2 = group metadata); a value
starts with an int16 schema version. Field layouts follow the message specs in
apache/kafka `group-coordinator/src/main/resources/common/message/`
(OffsetCommitKey, OffsetCommitValue, GroupMetadataKey, GroupMetadataValue) and
the writers in GroupMetadataManager.scala (offsetCommitKey, offsetCommitValue,
groupMetadataKey, groupMetadataValue). We write OffsetCommitKey type 1 with
OffsetCommitValue v3, and GroupMetadataKey type 2 with GroupMetadataValue v3
(what Kafka 2.3+ writes); we read every non-flexible version (values 0-3), as
GroupMetadataManager.readOffsetMessageValue / readGroupMessageValue do. A
`None` value is a tombstone and is never decoded here.

Also here: which partition of the topic a group lives in (`partition_for`).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

OFFSET_COMMIT_KEY_TYPES = (0, 1)    # 0 = legacy offset commit key, same layout
GROUP_METADATA_KEY_TYPE = 2
OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3


class CorruptCoordinatorRecord(ValueError):
    """A `__consumer_offsets` key or value that does not decode."""


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group: str


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int             # -1 = none (v3+)
    metadata: str
    commit_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    member_id: str
    group_instance_id: str | None   # v3+ (KIP-345)
    client_id: str
    client_host: str
    rebalance_timeout_ms: int       # v1+; v0 records use the session timeout
    session_timeout_ms: int
    subscription: bytes             # metadata for the group's selected protocol
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int   # v2+, -1 = unknown
    members: tuple[MemberMetadataValue, ...]


def partition_for(group_id: str, partitions: int) -> int:
    """Kafka's `Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`.

    Java's String.hashCode runs over UTF-16 code units with int32 overflow;
    Utils.abs maps Integer.MIN_VALUE to 0 (unlike Math.abs).
    """
    h = 0
    units = group_id.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    if h >= 1 << 31:
        h -= 1 << 32
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# -- encoding ------------------------------------------------------------------

def _string(value: str | None) -> bytes:
    if value is None:
        return struct.pack(">h", -1)
    raw = value.encode()
    return struct.pack(">h", len(raw)) + raw


def _bytes(value: bytes) -> bytes:
    return struct.pack(">i", len(value)) + value


def offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    return (struct.pack(">h", OFFSET_COMMIT_KEY_TYPES[1]) + _string(group) + _string(topic)
            + struct.pack(">i", partition))


def group_metadata_key(group: str) -> bytes:
    return struct.pack(">h", GROUP_METADATA_KEY_TYPE) + _string(group)


def offset_commit_value(value: OffsetCommitValue) -> bytes:
    return (struct.pack(">hqi", OFFSET_COMMIT_VALUE_VERSION, value.offset, value.leader_epoch)
            + _string(value.metadata) + struct.pack(">q", value.commit_timestamp_ms))


def group_metadata_value(value: GroupMetadataValue) -> bytes:
    parts = [struct.pack(">h", GROUP_METADATA_VALUE_VERSION), _string(value.protocol_type),
             struct.pack(">i", value.generation), _string(value.protocol), _string(value.leader),
             struct.pack(">qi", value.current_state_timestamp_ms, len(value.members))]
    for member in value.members:
        parts += [_string(member.member_id), _string(member.group_instance_id),
                  _string(member.client_id), _string(member.client_host),
                  struct.pack(">ii", member.rebalance_timeout_ms, member.session_timeout_ms),
                  _bytes(member.subscription), _bytes(member.assignment)]
    return b"".join(parts)


# -- decoding ------------------------------------------------------------------

class _Reader:
    def __init__(self, data: bytes, what: str):
        self._data = memoryview(data)
        self._at = 0
        self._what = what

    def _take(self, size: int) -> memoryview:
        if size < 0 or self._at + size > len(self._data):
            raise CorruptCoordinatorRecord(
                f"{self._what}: needs {size} bytes at byte {self._at}, "
                f"has {len(self._data) - self._at}")
        chunk = self._data[self._at:self._at + size]
        self._at += size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self._take(2))[0]

    def int32(self) -> int:
        return struct.unpack(">i", self._take(4))[0]

    def int64(self) -> int:
        return struct.unpack(">q", self._take(8))[0]

    def nullable_string(self) -> str | None:
        size = self.int16()
        return None if size == -1 else bytes(self._take(size)).decode()

    def string(self) -> str:
        at = self._at
        value = self.nullable_string()
        if value is None:
            raise CorruptCoordinatorRecord(f"{self._what}: null string at byte {at}")
        return value

    def bytes(self) -> bytes:
        return bytes(self._take(self.int32()))


def parse_key(key: bytes) -> OffsetCommitKey | GroupMetadataKey | int:
    """The decoded key, or its type number if the type is not one of ours.

    Unknown key types are skipped by the loader, as Kafka does (UnknownKey).
    """
    reader = _Reader(key, "__consumer_offsets key")
    key_type = reader.int16()
    if key_type in OFFSET_COMMIT_KEY_TYPES:
        return OffsetCommitKey(reader.string(), reader.string(), reader.int32())
    if key_type == GROUP_METADATA_KEY_TYPE:
        return GroupMetadataKey(reader.string())
    return key_type


def parse_offset_commit_value(value: bytes) -> OffsetCommitValue:
    reader = _Reader(value, "OffsetCommitValue")
    version = reader.int16()
    if not 0 <= version <= 3:
        raise CorruptCoordinatorRecord(f"OffsetCommitValue: unknown version {version}")
    offset = reader.int64()
    leader_epoch = reader.int32() if version >= 3 else -1
    metadata = reader.string()
    commit_timestamp = reader.int64()
    if version == 1:
        reader.int64()   # expireTimestamp: offset retention is not modelled
    return OffsetCommitValue(offset, leader_epoch, metadata, commit_timestamp)


def parse_group_metadata_value(value: bytes) -> GroupMetadataValue:
    reader = _Reader(value, "GroupMetadataValue")
    version = reader.int16()
    if not 0 <= version <= 3:
        raise CorruptCoordinatorRecord(f"GroupMetadataValue: unknown version {version}")
    protocol_type = reader.string()
    generation = reader.int32()
    protocol = reader.nullable_string()
    leader = reader.nullable_string()
    state_timestamp = reader.int64() if version >= 2 else -1
    count = reader.int32()
    if count < 0:
        raise CorruptCoordinatorRecord(f"GroupMetadataValue: member count {count}")
    members = []
    for _ in range(count):
        member_id = reader.string()
        instance_id = reader.nullable_string() if version >= 3 else None
        client_id = reader.string()
        client_host = reader.string()
        rebalance_timeout = reader.int32() if version >= 1 else None
        session_timeout = reader.int32()
        members.append(MemberMetadataValue(
            member_id, instance_id, client_id, client_host,
            session_timeout if rebalance_timeout is None else rebalance_timeout,
            session_timeout, reader.bytes(), reader.bytes()))
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_timestamp,
                              tuple(members))
