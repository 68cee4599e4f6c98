"""The classic consumer group coordinator and its `__consumer_offsets` storage.

`GroupCoordinator` (coordinator.py) is the entry point; its docstring lists
every input and result value. `OffsetStore` is what the broker implements to
give it the `__consumer_offsets` log.
"""

from __future__ import annotations

from reference_broker.group.config import GroupConfig
from reference_broker.group.coordinator import GroupCoordinator
from reference_broker.group.metadata import GroupState
from reference_broker.group.records import CorruptCoordinatorRecord, partition_for
from reference_broker.group.results import (
    CommittedOffset, GroupOverview, GroupSummary, JoinGroupMember, JoinGroupResult,
    LeaveGroupResult, LeavingMember, ListGroupsResult, MemberLeaveResult, MemberSummary,
    OffsetCommit, OffsetFetchResult, SyncGroupResult)
from reference_broker.group.storage import OffsetStore, StoreError

__all__ = [
    "CommittedOffset", "CorruptCoordinatorRecord", "GroupConfig", "GroupCoordinator",
    "GroupOverview", "GroupState", "GroupSummary", "JoinGroupMember", "JoinGroupResult",
    "LeaveGroupResult", "LeavingMember", "ListGroupsResult", "MemberLeaveResult",
    "MemberSummary", "OffsetCommit", "OffsetFetchResult", "OffsetStore", "StoreError",
    "SyncGroupResult", "partition_for",
]
