"""One classic group in memory: its state machine, members and offsets.

Mirrors Kafka's GroupMetadata.scala and MemberMetadata.scala (apache/kafka
core/src/main/scala/kafka/coordinator/group/). The one idea: a member that is
waiting for an answer holds an asyncio future (Kafka's awaitingJoinCallback /
awaitingSyncCallback); answering it means resolving that future, and a member
"is awaiting join" exactly while it holds one. Timer handles for the
coordinator's delayed operations (DelayedJoin, DelayedSync, DelayedHeartbeat)
live here too, so unloading a group can cancel them all.
"""

from __future__ import annotations

import asyncio
import enum
import uuid
from collections import Counter
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from reference_broker.group.records import OffsetCommitValue
from reference_broker.group.results import (
    GroupOverview, GroupSummary, JoinGroupMember, JoinGroupResult, MemberSummary,
    SyncGroupResult)


class GroupState(enum.Enum):
    """Values are Kafka's state names, as ListGroups/DescribeGroups show them."""
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


_VALID_PREVIOUS = {   # GroupState.validPreviousStates in GroupMetadata.scala
    GroupState.PREPARING_REBALANCE: {GroupState.STABLE, GroupState.COMPLETING_REBALANCE,
                                     GroupState.EMPTY},
    GroupState.COMPLETING_REBALANCE: {GroupState.PREPARING_REBALANCE},
    GroupState.STABLE: {GroupState.COMPLETING_REBALANCE},
    GroupState.EMPTY: {GroupState.PREPARING_REBALANCE},
    GroupState.DEAD: set(GroupState),
}


@dataclass(eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]      # (name, metadata) in preference order
    assignment: bytes = b""
    awaiting_join: asyncio.Future | None = None
    awaiting_sync: asyncio.Future | None = None
    is_new: bool = False                    # joined but not yet through a completed join
    heartbeat_timer: asyncio.TimerHandle | None = None

    def metadata(self, protocol: str) -> bytes:
        return next(data for name, data in self.protocols if name == protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        return next(name for name, _ in self.protocols if name in candidates)


class Group:
    def __init__(self, group_id: str, state: GroupState, now_ms: int):
        self.group_id = group_id
        self.state = state
        self.state_timestamp_ms = now_ms
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}    # group.instance.id -> member id (KIP-345)
        self.pending_members: set[str] = set()      # KIP-394: ids handed out, not yet joined
        self.pending_sync: set[str] = set()         # members that have not synced this generation
        # (topic, partition) -> (order in the log, value); see GroupCoordinator._install
        self.offsets: dict[tuple[str, int], tuple[int, OffsetCommitValue]] = {}
        # TxnOffsetCommit's offsets, per producer id, until its transaction's
        # marker commits or drops them (KIP-98's pendingTransactionalOffsetCommits).
        self.pending_txn_offsets: dict[int, dict[tuple[str, int], OffsetCommitValue]] = {}
        self.new_member_added = False               # InitialDelayedJoin may extend its delay
        self.join_timer: asyncio.TimerHandle | None = None
        self.join_is_initial = False                # the pending join is an InitialDelayedJoin
        self.sync_timer: asyncio.TimerHandle | None = None
        self.pending_timers: dict[str, asyncio.TimerHandle] = {}

    # -- membership ------------------------------------------------------------

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id == member_id

    def add(self, member: Member, awaiting_join: asyncio.Future | None) -> None:
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        member.awaiting_join = awaiting_join
        self._forget_pending(member.member_id)

    def _forget_pending(self, member_id: str) -> None:
        self.pending_members.discard(member_id)
        timer = self.pending_timers.pop(member_id, None)
        if timer is not None:
            timer.cancel()

    def remove(self, member_id: str) -> None:
        member = self.members.pop(member_id, None)
        if member is not None:
            if member.group_instance_id is not None:
                self.static_members.pop(member.group_instance_id, None)
            if member.heartbeat_timer is not None:
                member.heartbeat_timer.cancel()
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self._forget_pending(member_id)
        self.pending_sync.discard(member_id)

    def member_error(self, member_id: str, instance_id: str | None) -> ErrorCode | None:
        """GroupCoordinator.validateCurrentMember: a static member must be the
        instance's current member id (else FENCED_INSTANCE_ID, KIP-345); any
        member must exist (else UNKNOWN_MEMBER_ID)."""
        if instance_id is not None:
            current = self.static_members.get(instance_id)
            if current is None:
                return ErrorCode.unknown_member_id
            if current != member_id:
                return ErrorCode.fenced_instance_id
        if member_id not in self.members:
            return ErrorCode.unknown_member_id
        return None

    def maybe_elect_new_joined_leader(self) -> bool:
        """False if there is no leader or nobody rejoined; else make sure the
        leader is a member that rejoined (GroupMetadata.maybeElectNewJoinedLeader)."""
        if self.leader_id is None:
            return False
        if self.members[self.leader_id].awaiting_join is not None:
            return True
        joined = next((m for m in self.members.values() if m.awaiting_join is not None), None)
        if joined is None:
            return False
        self.leader_id = joined.member_id
        return True

    def replace_static_member(self, instance_id: str, old_member_id: str,
                              new_member_id: str) -> Member:
        member = self.members.pop(old_member_id)
        # Fence a duplicate that may still wait on the old id (KIP-345).
        self.invoke_join(member, JoinGroupResult(ErrorCode.fenced_instance_id, old_member_id))
        self.invoke_sync(member, SyncGroupResult(ErrorCode.fenced_instance_id))
        member.member_id = new_member_id
        self.members[new_member_id] = member
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return member

    def update_member(self, member: Member, protocols: list[tuple[str, bytes]],
                      rebalance_timeout_ms: int, session_timeout_ms: int,
                      awaiting_join: asyncio.Future | None) -> None:
        member.protocols = protocols
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        member.awaiting_join = awaiting_join

    def has_all_members_joined(self) -> bool:
        return (all(m.awaiting_join is not None for m in self.members.values())
                and not self.pending_members)

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    @staticmethod
    def generate_member_id(client_id: str, instance_id: str | None) -> str:
        return f"{client_id if instance_id is None else instance_id}-{uuid.uuid4()}"

    # -- answering waiting members ---------------------------------------------

    @staticmethod
    def invoke_join(member: Member, result: JoinGroupResult) -> None:
        future, member.awaiting_join = member.awaiting_join, None
        if future is not None and not future.done():
            future.set_result(result)

    @staticmethod
    def invoke_sync(member: Member, result: SyncGroupResult) -> bool:
        future, member.awaiting_sync = member.awaiting_sync, None
        if future is None:
            return False
        if not future.done():
            future.set_result(result)
        return True

    # -- state machine and protocol selection ----------------------------------

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def transition_to(self, state: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[state]:
            raise RuntimeError(f"group {self.group_id!r}: illegal transition "
                                 f"{self.state.value} -> {state.value}")
        self.state = state
        self.state_timestamp_ms = now_ms

    def _candidate_protocols(self) -> set[str]:
        votes = Counter(name for m in self.members.values() for name, _ in m.protocols)
        return {name for name, count in votes.items() if count == len(self.members)}

    def select_protocol(self) -> str:
        """The protocol all members support with the most first-choice votes."""
        candidates = self._candidate_protocols()
        votes = Counter(m.vote(candidates) for m in self.members.values())
        return votes.most_common(1)[0][0]

    def supports_protocols(self, protocol_type: str, names: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(names)
        return protocol_type == self.protocol_type and bool(names & self._candidate_protocols())

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync.clear()

    # -- views -----------------------------------------------------------------

    def current_member_metadata(self) -> tuple[JoinGroupMember, ...]:
        return tuple(JoinGroupMember(m.member_id, m.group_instance_id,
                                     m.metadata(self.protocol_name))
                     for m in self.members.values())

    def summary(self) -> GroupSummary:
        stable = self.state is GroupState.STABLE
        return GroupSummary(
            self.group_id, ErrorCode.none, self.state.value, self.protocol_type or "",
            self.protocol_name if stable else "",
            tuple(MemberSummary(m.member_id, m.group_instance_id, m.client_id, m.client_host,
                                m.metadata(self.protocol_name) if stable else b"",
                                m.assignment if stable else b"")
                  for m in self.members.values()))

    def overview(self) -> GroupOverview:
        return GroupOverview(self.group_id, self.protocol_type or "", self.state.value)

    def cancel_timers(self) -> None:
        for timer in (self.join_timer, self.sync_timer, *self.pending_timers.values(),
                      *(m.heartbeat_timer for m in self.members.values())):
            if timer is not None:
                timer.cancel()
        self.join_timer = self.sync_timer = None
        self.pending_timers.clear()
