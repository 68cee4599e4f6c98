"""The classic rebalance protocol: JoinGroup, SyncGroup, Heartbeat and
LeaveGroup on a group that the coordinator has already looked up and
validated, plus the delayed operations that drive a rebalance.

Follows GroupCoordinator.scala (apache/kafka core/.../coordinator/group/)
rule for rule; method names say which Kafka method they mirror. Kafka's
purgatories become event-loop timers: DelayedJoin and InitialDelayedJoin
(`Group.join_timer`), DelayedSync (`Group.sync_timer`), DelayedHeartbeat
(`Member.heartbeat_timer`, and `Group.pending_timers` for KIP-394 pending
members). A request that must wait (a JoinGroup during a rebalance, a
SyncGroup before the leader's assignment is stored) parks a future on its
member and is answered when the group moves on.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Callable, Coroutine, Mapping

from kio.schema.errors import ErrorCode

from reference_broker.group import storage
from reference_broker.group.config import NEW_MEMBER_JOIN_TIMEOUT_MS, GroupConfig
from reference_broker.group.metadata import Group, GroupState, Member
from reference_broker.group.records import partition_for
from reference_broker.group.results import JoinGroupResult, SyncGroupResult

log = logging.getLogger(__name__)

EMPTY, PREPARING, COMPLETING, STABLE = (
    GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE)
NONE = ErrorCode.none
Protocols = list[tuple[str, bytes]]


class Membership:
    def __init__(self, config: GroupConfig, store: storage.OffsetStore,
                 now_ms: Callable[[], int], spawn: Callable[[Coroutine], asyncio.Task]):
        self._config = config
        self._store = store
        self._now_ms = now_ms
        self._spawn = spawn

    # -- JoinGroup -------------------------------------------------------------

    def join_new_member(self, group: Group, answer: asyncio.Future, *, instance_id: str | None,
                        require_known_member_id: bool, client_id: str, client_host: str,
                        rebalance_timeout_ms: int, session_timeout_ms: int, protocol_type: str,
                        protocols: Protocols) -> None:
        """doNewMemberJoinGroup: a JoinGroup with an empty member id."""
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            answer.set_result(JoinGroupResult(ErrorCode.inconsistent_group_protocol, ""))
            return
        new_member_id = Group.generate_member_id(client_id, instance_id)
        if instance_id is not None and instance_id in group.static_members:
            self._replace_static_member(group, answer, instance_id,
                                        group.static_members[instance_id], new_member_id,
                                        protocols, rebalance_timeout_ms, session_timeout_ms)
        elif instance_id is None and require_known_member_id:
            # KIP-394: hand out the id and wait for the member to come back with it;
            # until then it blocks the join like a member that has not rejoined.
            group.pending_members.add(new_member_id)
            group.pending_timers[new_member_id] = self._later(
                session_timeout_ms, self._expire_pending_member, group, new_member_id)
            answer.set_result(JoinGroupResult(ErrorCode.member_id_required, new_member_id))
        else:
            self._add_member_and_rebalance(
                group, answer, Member(new_member_id, instance_id, client_id, client_host,
                                      rebalance_timeout_ms, session_timeout_ms, protocol_type,
                                      protocols))
        self.try_complete_join(group)

    def join_current_member(self, group: Group, answer: asyncio.Future, member_id: str, *,
                            instance_id: str | None, client_id: str, client_host: str,
                            rebalance_timeout_ms: int, session_timeout_ms: int,
                            protocol_type: str, protocols: Protocols) -> None:
        """doCurrentMemberJoinGroup: a JoinGroup with a member id."""
        if not group.supports_protocols(protocol_type, {name for name, _ in protocols}):
            answer.set_result(JoinGroupResult(ErrorCode.inconsistent_group_protocol, member_id))
        elif member_id in group.pending_members:
            if instance_id is not None:
                # Kafka throws IllegalStateException here: a pending member is never static.
                answer.set_result(JoinGroupResult(ErrorCode.unknown_server_error, member_id))
            else:
                self._add_member_and_rebalance(
                    group, answer, Member(member_id, None, client_id, client_host,
                                          rebalance_timeout_ms, session_timeout_ms,
                                          protocol_type, protocols))
        elif (error := group.member_error(member_id, instance_id)) is not None:
            answer.set_result(JoinGroupResult(error, member_id))
        else:
            member = group.members[member_id]
            rebalance = (group.state is PREPARING
                         or not member.matches(protocols)
                         # The leader may rejoin to force a rebalance (e.g. new topic metadata).
                         or (group.state is STABLE and group.is_leader(member_id)))
            if rebalance:
                group.update_member(member, protocols, rebalance_timeout_ms,
                                    session_timeout_ms, answer)
                self._maybe_prepare_rebalance(group)
            else:
                # Same metadata, e.g. a retry after a lost response: the current generation.
                answer.set_result(self._join_result(
                    group, member_id, with_members=(group.state is COMPLETING
                                                    and group.is_leader(member_id))))
        self.try_complete_join(group)

    def _add_member_and_rebalance(self, group: Group, answer: asyncio.Future,
                                  member: Member) -> None:
        member.is_new = True
        if group.state is PREPARING and group.generation_id == 0:
            group.new_member_added = True
        group.add(member, answer)
        # A new member cannot heartbeat yet; bound how long its join may wait.
        self.schedule_heartbeat(group, member, NEW_MEMBER_JOIN_TIMEOUT_MS)
        self._maybe_prepare_rebalance(group)

    def _replace_static_member(self, group: Group, answer: asyncio.Future, instance_id: str,
                               old_member_id: str, new_member_id: str, protocols: Protocols,
                               rebalance_timeout_ms: int, session_timeout_ms: int) -> None:
        """updateStaticMemberAndRebalance (KIP-345): the instance gets a new
        member id, keeps its assignment, and the old id is fenced."""
        current_leader = group.leader_id or ""
        member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        self.schedule_heartbeat(group, member)
        previous = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        group.update_member(member, protocols, rebalance_timeout_ms, session_timeout_ms, answer)
        if group.state is STABLE:
            if group.protocol_name == group.select_protocol():
                # No rebalance: persist the new member id, then answer with the
                # old leader id so that this member does not assign (JoinGroup < v9).
                assignment = {m.member_id: m.assignment for m in group.members.values()}
                record = storage.group_record(group, assignment)
                self._spawn(self._store_static_member(
                    group, member, answer, instance_id, old_member_id, new_member_id,
                    current_leader, previous, record))
            else:
                self._maybe_prepare_rebalance(group)
        elif group.state is COMPLETING:
            # The leader may be assigning for the old member id: start over.
            self._prepare_rebalance(group)

    async def _store_static_member(self, group: Group, member: Member, answer: asyncio.Future,
                                   instance_id: str, old_member_id: str, new_member_id: str,
                                   current_leader: str, previous: tuple,
                                   record: storage.Record) -> None:
        error = await self._append(group, record)
        if error is NONE:
            Group.invoke_join(member, JoinGroupResult(
                NONE, new_member_id, group.generation_id, group.protocol_type,
                group.protocol_name, current_leader))
            return
        log.warning("group %s: static member %s not persisted: %s", group.group_id,
                    instance_id, error.name)
        if group.members.get(new_member_id) is member:
            group.update_member(member, *previous, None)
            group.replace_static_member(instance_id, new_member_id, old_member_id)
            self.schedule_heartbeat(group, member)
        if not answer.done():
            answer.set_result(JoinGroupResult(error, "", group.generation_id, group.protocol_type,
                                              group.protocol_name, current_leader))

    def _join_result(self, group: Group, member_id: str, *, with_members: bool) -> JoinGroupResult:
        return JoinGroupResult(NONE, member_id, group.generation_id, group.protocol_type,
                               group.protocol_name, group.leader_id or "",
                               group.current_member_metadata() if with_members else ())

    # -- rebalance: DelayedJoin ------------------------------------------------

    def _maybe_prepare_rebalance(self, group: Group) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group)

    def _prepare_rebalance(self, group: Group) -> None:
        if group.state is COMPLETING:
            self._reset_and_propagate_assignment_error(group, ErrorCode.rebalance_in_progress)
        self._clear_pending_sync(group)
        rebalance_timeout_ms = group.rebalance_timeout_ms()
        was_empty = group.state is EMPTY
        group.transition_to(PREPARING, self._now_ms())
        log.info("group %s preparing to rebalance, generation %d", group.group_id,
                 group.generation_id)
        if was_empty:
            # group.initial.rebalance.delay.ms: let more new members arrive first.
            delay = self._config.group_initial_rebalance_delay_ms
            self._schedule_initial_join(group, delay, delay,
                                        max(rebalance_timeout_ms - delay, 0))
        else:
            self._schedule_join(group, rebalance_timeout_ms)

    def _schedule_join(self, group: Group, timeout_ms: int) -> None:
        group.join_is_initial = False
        group.join_timer = self._later(timeout_ms, self._on_join_expired, group)
        self.try_complete_join(group)

    def _schedule_initial_join(self, group: Group, configured_ms: int, delay_ms: int,
                               remaining_ms: int) -> None:
        group.join_is_initial = True
        group.join_timer = self._later(delay_ms, self._on_initial_join_expired, group,
                                       configured_ms, delay_ms, remaining_ms)

    def try_complete_join(self, group: Group) -> None:
        """DelayedJoin.tryComplete; an InitialDelayedJoin only ends by its timer."""
        if (group.state is PREPARING and group.join_timer is not None
                and not group.join_is_initial and group.has_all_members_joined()):
            group.join_timer.cancel()
            group.join_timer = None
            self._complete_join(group)

    def _on_join_expired(self, group: Group) -> None:
        group.join_timer = None
        self._complete_join(group)

    def _on_initial_join_expired(self, group: Group, configured_ms: int, delay_ms: int,
                                 remaining_ms: int) -> None:
        group.join_timer = None
        if group.new_member_added and remaining_ms != 0:
            group.new_member_added = False
            self._schedule_initial_join(group, configured_ms, min(configured_ms, remaining_ms),
                                        max(remaining_ms - delay_ms, 0))
        else:
            self._complete_join(group)

    def _complete_join(self, group: Group) -> None:
        """onCompleteJoin: drop dynamic members that did not rejoin, then start
        the next generation (static members keep their place, KIP-345)."""
        for member in [m for m in group.members.values()
                       if m.awaiting_join is None and m.group_instance_id is None]:
            group.remove(member.member_id)
        if not group.maybe_elect_new_joined_leader() and group.members:
            log.error("group %s could not complete rebalance: no member rejoined",
                      group.group_id)
            self._schedule_join(group, group.rebalance_timeout_ms())
            return
        group.init_next_generation(self._now_ms())
        if group.state is EMPTY:
            self._spawn(self._store_empty_group(group, storage.group_record(group, {})))
            return
        log.info("group %s stabilized generation %d with %d members", group.group_id,
                 group.generation_id, len(group.members))
        metadata = group.current_member_metadata()
        for member in group.members.values():
            leader = group.is_leader(member.member_id)
            Group.invoke_join(member, JoinGroupResult(
                NONE, member.member_id, group.generation_id, group.protocol_type,
                group.protocol_name, group.leader_id or "", metadata if leader else ()))
            self.schedule_heartbeat(group, member)
            member.is_new = False
            group.pending_sync.add(member.member_id)
        group.sync_timer = self._later(group.rebalance_timeout_ms(), self._on_sync_expired,
                                       group, group.generation_id)

    async def _store_empty_group(self, group: Group, record: storage.Record) -> None:
        error = await self._append(group, record)
        if error is not NONE:
            # Safe: an empty generation has no members to fence (Kafka only warns).
            log.warning("group %s: empty generation %d not persisted: %s", group.group_id,
                        group.generation_id, error.name)

    # -- SyncGroup -------------------------------------------------------------

    def sync(self, group: Group, answer: asyncio.Future, member_id: str,
             assignments: Mapping[str, bytes]) -> None:
        """doSyncGroup after validation, for a member of the current generation
        (so the group has members: it is not Empty)."""
        if group.state is PREPARING:
            answer.set_result(SyncGroupResult(ErrorCode.rebalance_in_progress))
        elif group.state is COMPLETING:
            group.members[member_id].awaiting_sync = answer
            self._remove_pending_sync(group, member_id)
            if group.is_leader(member_id):
                # Members the leader left out get an empty assignment.
                assignment = {m: bytes(assignments.get(m, b"")) for m in group.members}
                self._spawn(self._store_assignment(group, group.generation_id, assignment,
                                                   storage.group_record(group, assignment)))
        else:
            self._remove_pending_sync(group, member_id)
            member = group.members[member_id]
            answer.set_result(SyncGroupResult(NONE, member.assignment, group.protocol_type,
                                              group.protocol_name))
            self.schedule_heartbeat(group, member)

    async def _store_assignment(self, group: Group, generation_id: int,
                                assignment: dict[str, bytes], record: storage.Record) -> None:
        error = await self._append(group, record)
        # The group may have moved on while the write was in flight.
        if group.state is not COMPLETING or group.generation_id != generation_id:
            return
        if error is not NONE:
            self._reset_and_propagate_assignment_error(group, error)
            self._maybe_prepare_rebalance(group)
        else:
            for member in group.members.values():
                member.assignment = assignment[member.member_id]
            self._propagate_assignment(group, NONE)
            group.transition_to(STABLE, self._now_ms())

    def _reset_and_propagate_assignment_error(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _propagate_assignment(self, group: Group, error: ErrorCode) -> None:
        protocol_type, protocol_name = ((group.protocol_type, group.protocol_name)
                                        if error is NONE else (None, None))
        for member in group.members.values():
            if Group.invoke_sync(member, SyncGroupResult(error, member.assignment,
                                                         protocol_type, protocol_name)):
                # Sessions may have run out while members waited for the leader.
                self.schedule_heartbeat(group, member)

    # -- DelayedSync (KAFKA-13127 era: members that never sync are removed) -----

    def _remove_pending_sync(self, group: Group, member_id: str) -> None:
        group.pending_sync.discard(member_id)
        if not group.pending_sync and group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _clear_pending_sync(self, group: Group) -> None:
        group.pending_sync.clear()
        if group.sync_timer is not None:
            group.sync_timer.cancel()
            group.sync_timer = None

    def _on_sync_expired(self, group: Group, generation_id: int) -> None:
        group.sync_timer = None
        if (generation_id != group.generation_id or group.state not in (COMPLETING, STABLE)
                or not group.pending_sync):
            return
        log.info("group %s: removing members that did not sync: %s", group.group_id,
                 sorted(group.pending_sync))
        for member_id in list(group.pending_sync):
            group.remove(member_id)
        self._prepare_rebalance(group)

    # -- Heartbeat, LeaveGroup, session expiry ---------------------------------

    def heartbeat(self, group: Group, member_id: str) -> ErrorCode:
        """handleHeartbeat after validation (a member exists: not Empty)."""
        self.schedule_heartbeat(group, group.members[member_id])
        return ErrorCode.rebalance_in_progress if group.state is PREPARING else NONE

    def remove_member(self, group: Group, member: Member) -> None:
        """removeMemberAndUpdateGroup: a leaving or expired member."""
        Group.invoke_join(member, JoinGroupResult(ErrorCode.unknown_member_id, ""))
        group.remove(member.member_id)
        if group.state in (STABLE, COMPLETING):
            self._maybe_prepare_rebalance(group)
        elif group.state is PREPARING:
            self.try_complete_join(group)

    def remove_pending_member(self, group: Group, member_id: str) -> None:
        group.remove(member_id)
        self.try_complete_join(group)

    def schedule_heartbeat(self, group: Group, member: Member,
                           timeout_ms: int | None = None) -> None:
        """completeAndScheduleNextExpiration: the member's session starts over."""
        if member.heartbeat_timer is not None:
            member.heartbeat_timer.cancel()
        member.heartbeat_timer = self._later(
            member.session_timeout_ms if timeout_ms is None else timeout_ms,
            self._on_heartbeat_expired, group, member)

    def _on_heartbeat_expired(self, group: Group, member: Member) -> None:
        member.heartbeat_timer = None
        if group.members.get(member.member_id) is not member:
            return
        # MemberMetadata.hasSatisfiedHeartbeat: an established member waiting
        # in a rebalance counts as alive; a new one only has its join timeout.
        if not member.is_new and (member.awaiting_join is not None
                                  or member.awaiting_sync is not None):
            return
        log.info("group %s: member %s session expired", group.group_id, member.member_id)
        self.remove_member(group, member)

    def _expire_pending_member(self, group: Group, member_id: str) -> None:
        group.pending_timers.pop(member_id, None)
        if member_id in group.pending_members:
            self.remove_pending_member(group, member_id)

    # -- plumbing ----------------------------------------------------------------

    def _later(self, delay_ms: int, callback: Callable, *args) -> asyncio.TimerHandle:
        return asyncio.get_running_loop().call_later(delay_ms / 1000, callback, *args)

    async def _append(self, group: Group, record: storage.Record) -> ErrorCode:
        partition = partition_for(group.group_id, self._config.offsets_topic_partitions)
        return await storage.append(self._store, partition, [record], for_commit=False)
