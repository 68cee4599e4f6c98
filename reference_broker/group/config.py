"""The group coordinator's settings: Kafka's broker configs of the same names."""

from __future__ import annotations

from dataclasses import dataclass

# GroupCoordinator.NewMemberJoinTimeoutMs: a new member's JoinGroup may wait
# this long in a rebalance before the member is dropped (KIP-394 era).
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(frozen=True)
class GroupConfig:
    offsets_topic_partitions: int = 50           # offsets.topic.num.partitions
    group_min_session_timeout_ms: int = 6000     # group.min.session.timeout.ms
    group_max_session_timeout_ms: int = 1800000  # group.max.session.timeout.ms
    group_initial_rebalance_delay_ms: int = 3000  # group.initial.rebalance.delay.ms
    offset_metadata_max_bytes: int = 4096        # offset.metadata.max.bytes
    # Off only under the `no-generation-fencing` bug switch (zombie commits).
    fence_commits: bool = True
