"""The classic group coordinator: the entry point for JoinGroup, SyncGroup,
Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch, ListGroups and
DescribeGroups, with groups and offsets persisted in `__consumer_offsets`.

The one idea: every request is first checked the way Kafka's
GroupCoordinator.validateGroupStatus does (valid group id, coordinator
active, partition loaded and owned), then handed to the group's state
machine (`membership`) or to its committed offsets (`offsets`); state
changes that must survive a restart are written through the `OffsetStore`
before they are acted on (an offset is visible only after its append
succeeded). A partition is served only after `load()` has replayed it;
until then its groups answer NOT_COORDINATOR, and
COORDINATOR_LOAD_IN_PROGRESS between `begin_load()` and `load()`.

Inputs (results.py):
  OffsetCommit(topic, partition, offset, leader_epoch=-1, metadata="")
      one partition of an OffsetCommit request; metadata None means "".
  LeavingMember(member_id, group_instance_id=None)
      one member of a LeaveGroup request (v0-v2: just the request's member id).

Results (results.py), every error an `ErrorCode`:
  JoinGroupResult(error, member_id, generation_id=-1, protocol_type=None,
                  protocol_name=None, leader_id="", members=())
      member_id is the member's id: the new one on MEMBER_ID_REQUIRED (KIP-394)
      and on success, "" when a static member's rejoin could not be stored.
      protocol_name None must be sent as "" below JoinGroup v7 (KafkaApis).
      members (JoinGroupMember(member_id, group_instance_id, metadata)) is
      filled for the leader only: every member with its metadata for the
      selected protocol; group_instance_id goes out from v5.
  SyncGroupResult(error, assignment=b"", protocol_type=None, protocol_name=None)
      the member's assignment; protocol type/name for SyncGroup v5+.
  LeaveGroupResult(error, members=())
      top-level error plus MemberLeaveResult(member_id, group_instance_id,
      error) per leaving member (v3+). `single_error` is the v0-v2 answer.
  heartbeat() returns a bare ErrorCode.
  commit_offsets() returns {(topic, partition): ErrorCode}.
  OffsetFetchResult(error, offsets={})
      offsets maps (topic, partition) to CommittedOffset(offset=-1,
      leader_epoch=-1, metadata="", error=NONE); -1 = nothing committed.
      A top-level error leaves offsets empty: OffsetFetch v1 puts that error
      on every requested partition, v2+ in the top-level error code.
  ListGroupsResult(error, groups=()) with GroupOverview(group_id,
      protocol_type, state); state for ListGroups v4+.
  GroupSummary(group_id, error, state, protocol_type, protocol, members=())
      one per described group, with MemberSummary(member_id,
      group_instance_id, client_id, client_host, metadata, assignment);
      metadata and assignment are filled only when the group is Stable. An
      unknown group is state "Dead" with error NONE (DescribeGroups v6+ would
      use GROUP_ID_NOT_FOUND instead).

Left to the protocol adapters, as KafkaApis does it before calling the
coordinator: UNKNOWN_TOPIC_OR_PARTITION for commits to partitions that do
not exist, JoinGroup v0's rebalance timeout (= session timeout), and
require_known_member_id (JoinGroup v4+ without a group instance id).

Not modelled: group.max.size (unbounded, as Kafka's default), offset
retention and expiry of empty groups (offsets.retention.minutes; an
OffsetCommit v2-v4 retention_time is ignored), transactional offset
commits, DeleteGroups and OffsetDelete.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Callable, Coroutine, Iterable, Mapping, Sequence

from kio.schema.errors import ErrorCode

from reference_broker.group import storage
from reference_broker.group.config import GroupConfig
from reference_broker.group.membership import Membership
from reference_broker.group.metadata import Group, GroupState
from reference_broker.group.offsets import GroupOffsets, TopicPartition
from reference_broker.group.records import CorruptCoordinatorRecord, partition_for
from reference_broker.group.results import (
    GroupSummary, JoinGroupResult, LeaveGroupResult, LeavingMember, ListGroupsResult,
    MemberLeaveResult, OffsetCommit, OffsetFetchResult, SyncGroupResult)

log = logging.getLogger(__name__)

NONE = ErrorCode.none


class GroupCoordinator:
    def __init__(self, store: storage.OffsetStore, config: GroupConfig = GroupConfig(),
                 clock: Callable[[], float] = time.time):
        """`clock` is wall-clock seconds, for the commit and state timestamps
        written to the log; timeouts run on the event loop's own clock."""
        self._config = config
        self._clock = clock
        self._groups: dict[str, Group] = {}
        self._owned: set[int] = set()
        self._loading: set[int] = set()
        self._active = True
        self._tasks: set[asyncio.Task] = set()
        self._membership = Membership(config, store, self._now_ms, self._spawn)
        self._offsets = GroupOffsets(config, store, self._spawn)

    # -- loading (GroupMetadataManager.loadGroupsAndOffsets / removeGroupsForPartition) --

    def begin_load(self, partition: int) -> None:
        """The partition is being replayed: its groups answer COORDINATOR_LOAD_IN_PROGRESS."""
        if partition not in self._owned:
            self._loading.add(partition)

    def load(self, partition: int, records: Iterable[tuple[bytes, bytes | None]],
             pending: dict[int, list[tuple[bytes, bytes | None]]] | None = None) -> None:
        """Replay one `__consumer_offsets` partition (key, value) in log order
        and start serving its groups. Must run inside the event loop: restored
        members get their session timers (GroupCoordinator.onGroupLoaded). An
        already owned partition is left as it is."""
        if partition in self._owned:
            log.info("__consumer_offsets-%d already loaded", partition)
            return
        try:
            groups = storage.rebuild(records, self._now_ms(), pending)
        except CorruptCoordinatorRecord:
            # As GroupMetadataManager.loadGroupsAndOffsets: log, load nothing, own the partition.
            log.exception("error loading __consumer_offsets-%d", partition)
            groups = []
        self._loading.discard(partition)
        self._owned.add(partition)
        for group in groups:
            self._groups[group.group_id] = group
            for member in group.members.values():
                self._membership.schedule_heartbeat(group, member)
        log.info("__consumer_offsets-%d loaded: %d groups", partition, len(groups))

    def unload(self, partition: int) -> None:
        """Stop serving a partition (onResignation): its groups die and every
        waiting request is answered NOT_COORDINATOR (onGroupUnloaded)."""
        self._owned.discard(partition)
        self._loading.discard(partition)
        for group in [g for g in self._groups.values()
                      if self._partition(g.group_id) == partition]:
            previous = group.state
            group.transition_to(GroupState.DEAD, self._now_ms())
            for member in group.members.values():
                if previous is GroupState.PREPARING_REBALANCE:
                    Group.invoke_join(member, JoinGroupResult(ErrorCode.not_coordinator,
                                                              member.member_id))
                else:
                    Group.invoke_sync(member, SyncGroupResult(ErrorCode.not_coordinator))
            group.cancel_timers()
            del self._groups[group.group_id]

    async def close(self) -> None:
        """Unload everything, stop answering, cancel in-flight writes."""
        for partition in list(self._owned):
            self.unload(partition)
        self._active = False
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    # -- membership APIs --------------------------------------------------------

    async def join_group(self, group_id: str, *, member_id: str, group_instance_id: str | None,
                         require_known_member_id: bool, client_id: str, client_host: str,
                         session_timeout_ms: int, rebalance_timeout_ms: int,
                         protocol_type: str,
                         protocols: Sequence[tuple[str, bytes]]) -> JoinGroupResult:
        """require_known_member_id: JoinGroup v4+ (KIP-394). For JoinGroup v0
        pass the session timeout as the rebalance timeout (JoinGroupRequest)."""
        error = self._status_error(group_id)
        if error is not None:
            return JoinGroupResult(error, member_id)
        if not (self._config.group_min_session_timeout_ms <= session_timeout_ms
                <= self._config.group_max_session_timeout_ms):
            return JoinGroupResult(ErrorCode.invalid_session_timeout, member_id)
        group = self._groups.get(group_id)
        if group is None:
            if member_id:
                return JoinGroupResult(ErrorCode.unknown_member_id, member_id)
            group = self._groups[group_id] = Group(group_id, GroupState.EMPTY, self._now_ms())
        answer = asyncio.get_running_loop().create_future()
        request = dict(instance_id=group_instance_id, client_id=client_id,
                       client_host=client_host, rebalance_timeout_ms=rebalance_timeout_ms,
                       session_timeout_ms=session_timeout_ms, protocol_type=protocol_type,
                       protocols=[(name, bytes(metadata)) for name, metadata in protocols])
        if member_id:
            self._membership.join_current_member(group, answer, member_id, **request)
        else:
            self._membership.join_new_member(
                group, answer, require_known_member_id=require_known_member_id, **request)
        return await answer

    async def sync_group(self, group_id: str, *, generation_id: int, member_id: str,
                         group_instance_id: str | None, assignments: Mapping[str, bytes],
                         protocol_type: str | None = None,
                         protocol_name: str | None = None) -> SyncGroupResult:
        """assignments: member id -> assignment, from the leader (empty from followers)."""
        error = self._status_error(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            # The rebalance state was lost with the old coordinator: make the
            # member rejoin; older clients do not expect LOAD_IN_PROGRESS here.
            return SyncGroupResult(ErrorCode.rebalance_in_progress)
        if error is not None:
            return SyncGroupResult(error)
        group = self._groups.get(group_id)
        if group is None:
            return SyncGroupResult(ErrorCode.unknown_member_id)
        error = self._generation_error(group, generation_id, member_id, group_instance_id)
        if error is None and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)):
            error = ErrorCode.inconsistent_group_protocol
        if error is not None:
            return SyncGroupResult(error)
        answer = asyncio.get_running_loop().create_future()
        self._membership.sync(group, answer, member_id, assignments)
        return await answer

    async def heartbeat(self, group_id: str, *, generation_id: int, member_id: str,
                        group_instance_id: str | None) -> ErrorCode:
        error = self._status_error(group_id)
        if error is ErrorCode.coordinator_load_in_progress:
            return NONE   # the group is still loading: answer blindly, as Kafka does
        if error is not None:
            return error
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = self._generation_error(group, generation_id, member_id, group_instance_id)
        return error if error is not None else self._membership.heartbeat(group, member_id)

    async def leave_group(self, group_id: str,
                          members: Sequence[LeavingMember]) -> LeaveGroupResult:
        error = self._status_error(group_id)
        if error is not None:
            return LeaveGroupResult(error)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveGroupResult(NONE, tuple(
                MemberLeaveResult(m.member_id, m.group_instance_id, ErrorCode.unknown_member_id)
                for m in members))
        return LeaveGroupResult(NONE, tuple(
            MemberLeaveResult(m.member_id, m.group_instance_id, self._leave(group, m))
            for m in members))

    def _leave(self, group: Group, leaving: LeavingMember) -> ErrorCode:
        if not leaving.member_id:
            # KIP-345: an admin may remove a static member by instance id alone.
            current = (None if leaving.group_instance_id is None
                       else group.static_members.get(leaving.group_instance_id))
            if current is None:
                return ErrorCode.unknown_member_id
            self._membership.remove_member(group, group.members[current])
            return NONE
        if leaving.member_id in group.pending_members:
            self._membership.remove_pending_member(group, leaving.member_id)
            return NONE
        error = group.member_error(leaving.member_id, leaving.group_instance_id)
        if error is not None:
            return error
        self._membership.remove_member(group, group.members[leaving.member_id])
        return NONE

    # -- offsets -----------------------------------------------------------------

    async def commit_offsets(self, group_id: str, generation_id: int, member_id: str,
                             group_instance_id: str | None,
                             offsets: Sequence[OffsetCommit]) -> dict[TopicPartition, ErrorCode]:
        """handleCommitOffsets. generation -1 with an empty member id is a
        standalone ("simple") commit, allowed while the group has no members."""
        partitions = [(o.topic, o.partition) for o in offsets]
        error = self._status_error(group_id, empty_id_allowed=True)
        if error is None:
            group = self._groups.get(group_id)
            if group is None and generation_id < 0:
                group = self._groups[group_id] = Group(group_id, GroupState.EMPTY,
                                                       self._now_ms())
            error = (ErrorCode.illegal_generation if group is None
                     else self._commit_error(group, generation_id, member_id, group_instance_id))
        if error is not None:
            return {tp: error for tp in partitions}
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE) \
                and member_id in group.members:
            # A commit from a member proves it is alive.
            self._membership.schedule_heartbeat(group, group.members[member_id])
        return await self._offsets.store(group, offsets, self._now_ms())

    async def txn_commit_offsets(self, group_id: str, producer_id: int, producer_epoch: int,
                                 generation_id: int, member_id: str,
                                 group_instance_id: str | None, offsets: Sequence[OffsetCommit]
                                 ) -> dict[TopicPartition, ErrorCode]:
        """handleTxnCommitOffsets: offsets written as the producer's
        transactional batch, pending until its marker. Fenced by generation
        and member only when the request names them (KIP-447, TxnOffsetCommit
        v3); a group not yet known is created Empty."""
        error = self._status_error(group_id, empty_id_allowed=True)
        group = None
        if error is None:
            group = self._groups.get(group_id)
            if group is None:
                group = self._groups[group_id] = Group(group_id, GroupState.EMPTY,
                                                       self._now_ms())
            if group.state is GroupState.DEAD:
                error = ErrorCode.coordinator_not_available
            elif self._config.fence_commits and (generation_id >= 0 or member_id
                                                 or group_instance_id is not None):
                error = self._generation_error(group, generation_id, member_id,
                                               group_instance_id)
        if error is not None:
            return {(o.topic, o.partition): error for o in offsets}
        return await self._offsets.store(group, offsets, self._now_ms(),
                                         producer=(producer_id, producer_epoch))

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker of the producer landed in this
        `__consumer_offsets` partition (onTransactionCompleted)."""
        for group in self._groups.values():
            if self._partition(group.group_id) == partition:
                self._offsets.complete_txn(group, producer_id, commit)

    def _commit_error(self, group: Group, generation_id: int, member_id: str,
                      instance_id: str | None) -> ErrorCode | None:
        """validateOffsetCommit plus doCommitOffsets' state check."""
        if generation_id < 0 and group.state is GroupState.EMPTY:
            return None
        if not self._config.fence_commits:
            return None  # bug switch no-generation-fencing: any commit lands
        if generation_id >= 0 or member_id or instance_id is not None:
            error = self._generation_error(group, generation_id, member_id, instance_id)
        else:
            # Generation -1 without a member id, but the group has members:
            # only members may commit.
            error = ErrorCode.unknown_member_id
        if error is None and group.state is GroupState.COMPLETING_REBALANCE:
            # The member has the new generation but not its assignment yet.
            return ErrorCode.rebalance_in_progress
        return error

    def fetch_offsets(self, group_id: str, partitions: Sequence[TopicPartition] | None,
                      require_stable: bool = False) -> OffsetFetchResult:
        """partitions None = every partition the group has an offset for."""
        error = self._status_error(group_id, empty_id_allowed=True)
        if error is not None:
            return OffsetFetchResult(error)
        return self._offsets.fetch(self._groups.get(group_id), partitions, require_stable)

    # -- listing -----------------------------------------------------------------

    def list_groups(self, states: Iterable[str] = ()) -> ListGroupsResult:
        """states: ListGroups v4+ filter, case-insensitive; empty = all."""
        if not self._active:
            return ListGroupsResult(ErrorCode.coordinator_not_available)
        wanted = {s.lower() for s in states}
        return ListGroupsResult(
            ErrorCode.coordinator_load_in_progress if self._loading else NONE,
            tuple(g.overview() for g in self._groups.values()
                  if not wanted or g.state.value.lower() in wanted))

    def describe_groups(self, group_ids: Iterable[str]) -> list[GroupSummary]:
        summaries = []
        for group_id in group_ids:
            error = self._status_error(group_id, empty_id_allowed=True)
            group = self._groups.get(group_id)
            if error is not None:
                summaries.append(GroupSummary(group_id, error, "", "", ""))
            elif group is None:
                summaries.append(GroupSummary(group_id, NONE, GroupState.DEAD.value, "", ""))
            else:
                summaries.append(group.summary())
        return summaries

    # -- validation and plumbing -------------------------------------------------

    def _status_error(self, group_id: str | None, *,
                      empty_id_allowed: bool = False) -> ErrorCode | None:
        """validateGroupStatus: OffsetCommit, OffsetFetch and DescribeGroups
        accept the empty group id for backwards compatibility."""
        if group_id is None or (not group_id and not empty_id_allowed):
            return ErrorCode.invalid_group_id
        if not self._active:
            return ErrorCode.coordinator_not_available
        partition = self._partition(group_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress
        if partition not in self._owned:
            return ErrorCode.not_coordinator
        return None

    @staticmethod
    def _generation_error(group: Group, generation_id: int, member_id: str,
                          instance_id: str | None) -> ErrorCode | None:
        error = group.member_error(member_id, instance_id)
        if error is None and generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        return error

    def _partition(self, group_id: str) -> int:
        return partition_for(group_id, self._config.offsets_topic_partitions)

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _spawn(self, coroutine: Coroutine) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task
