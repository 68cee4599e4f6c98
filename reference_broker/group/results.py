"""What the group coordinator takes in and hands back: plain frozen values
that carry exactly the fields the JoinGroup, SyncGroup, Heartbeat,
LeaveGroup, OffsetCommit, OffsetFetch, ListGroups and DescribeGroups
responses need. Field meanings are documented in `coordinator`'s docstring;
they mirror the result case classes at the end of Kafka's
GroupCoordinator.scala.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

NO_GENERATION = -1        # GroupCoordinator.NoGeneration
NO_LEADER = ""            # GroupCoordinator.NoLeader
NO_OFFSET = -1            # OffsetFetchResponse.INVALID_OFFSET
NO_LEADER_EPOCH = -1      # RecordBatch.NO_PARTITION_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class JoinGroupMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error: ErrorCode
    member_id: str
    generation_id: int = NO_GENERATION
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = NO_LEADER
    members: tuple[JoinGroupMember, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error: ErrorCode
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None


@dataclass(frozen=True, slots=True)
class LeavingMember:
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class MemberLeaveResult:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error: ErrorCode
    members: tuple[MemberLeaveResult, ...] = ()

    @property
    def single_error(self) -> ErrorCode:
        """The one error code of LeaveGroup v0-v2: the top-level error, else
        the first member error (Kafka's LeaveGroupResponse.getError)."""
        if self.error is not ErrorCode.none:
            return self.error
        return next((m.error for m in self.members if m.error is not ErrorCode.none),
                    ErrorCode.none)


@dataclass(frozen=True, slots=True)
class OffsetCommit:
    topic: str
    partition: int
    offset: int
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class CommittedOffset:
    offset: int = NO_OFFSET
    leader_epoch: int = NO_LEADER_EPOCH
    metadata: str = ""
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class OffsetFetchResult:
    error: ErrorCode
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class GroupOverview:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True, slots=True)
class ListGroupsResult:
    error: ErrorCode
    groups: tuple[GroupOverview, ...] = ()


@dataclass(frozen=True, slots=True)
class MemberSummary:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupSummary:
    group_id: str
    error: ErrorCode
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberSummary, ...] = ()
