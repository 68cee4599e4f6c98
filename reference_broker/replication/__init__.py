"""Replication of one partition between its leader and followers
(docs/broker.md, "Replication").

`LeaderState` (leader.py) is the leader's view: follower LEOs, the high
watermark, ISR change proposals (`AlterIsr`) and acks=all waiters.
`FollowerState` (follower.py) is a follower's: the fetch position and
applying a `FetchedPartition` to its log. Both are pure — no sockets, no
clock: the broker passes times, sends the proposals and fetches.
`REPLICATION_BUGS` are the bug switches they honour.
"""

from reference_broker.replication.follower import (
    NO_EPOCH, TRUNCATE_TO_LOCAL_HW, FetchedPartition, FollowerState,
)
from reference_broker.replication.leader import (
    ACKS_ALL_IGNORES_MIN_ISR, EPOCH_LOOKUP_V0, HW_ADVANCES_UNDER_MIN_ISR,
    ISR_EXPAND_BELOW_EPOCH_START, STALE_HW_AFTER_FAILOVER, AlterIsr, LeaderState,
)

REPLICATION_BUGS = frozenset({
    ACKS_ALL_IGNORES_MIN_ISR, EPOCH_LOOKUP_V0, HW_ADVANCES_UNDER_MIN_ISR,
    ISR_EXPAND_BELOW_EPOCH_START, STALE_HW_AFTER_FAILOVER, TRUNCATE_TO_LOCAL_HW,
})

__all__ = [
    "ACKS_ALL_IGNORES_MIN_ISR", "EPOCH_LOOKUP_V0", "HW_ADVANCES_UNDER_MIN_ISR",
    "ISR_EXPAND_BELOW_EPOCH_START", "NO_EPOCH", "REPLICATION_BUGS", "STALE_HW_AFTER_FAILOVER",
    "TRUNCATE_TO_LOCAL_HW", "AlterIsr", "FetchedPartition", "FollowerState", "LeaderState",
]
