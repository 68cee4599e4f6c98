"""Leader-side state of one partition: what each follower holds, the high
watermark, ISR shrink and expand proposals, and the acks=all waiters.

One idea, Kafka's Partition on its leader (Partition.scala, Replica.scala):
followers report their log end offset (LEO) by fetching at it, and the
high watermark (HW) is the smallest LEO among the replicas the leader must
wait for — the ISR plus a pending expansion (KIP-497's maximal ISR) plus
followers that are caught up. The HW only moves forward, and not at all
while the committed ISR is smaller than min.insync.replicas (KAFKA-15583).
ISR changes are proposals (`AlterIsr`) that count only once the controller
commits them — except an expansion, which already holds the HW back.

Pure: the caller passes every time and LEO, and sends the proposals.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from reference_broker.log import OffsetOutOfRange, PartitionLog

HW_ADVANCES_UNDER_MIN_ISR = "hw-advances-under-min-isr"
ISR_EXPAND_BELOW_EPOCH_START = "isr-expand-below-epoch-start"
ACKS_ALL_IGNORES_MIN_ISR = "acks-all-ignores-min-isr"
EPOCH_LOOKUP_V0 = "epoch-lookup-v0"
STALE_HW_AFTER_FAILOVER = "stale-hw-after-failover"

UNKNOWN_OFFSET = -1  # UnifiedLog.UnknownOffset: a follower that has not fetched in this epoch


@dataclass(frozen=True)
class AlterIsr:
    """An ISR change for the controller (AlterPartition, KIP-497): sent with
    the leader and partition epochs it was decided under, so a deposed
    leader's proposal is rejected."""
    leader_epoch: int
    partition_epoch: int
    new_isr: tuple[int, ...]


@dataclass
class _Follower:
    """Replica.scala's ReplicaState, as reset for a new leader
    (Replica.resetReplicaState with isNewLeader)."""
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_ms: int = 0
    last_fetch_leader_log_end_offset: int = UNKNOWN_OFFSET


class LeaderState:
    def __init__(self, *, replica_id: int, replicas: tuple[int, ...], isr: tuple[int, ...],
                 leader_epoch: int, partition_epoch: int, log_end_offset: int,
                 high_watermark: int, epoch_start_offset: int, min_insync_replicas: int,
                 replica_lag_time_max_ms: int, now_ms: int, bugs: frozenset[str] = frozenset()):
        """A broker that becomes leader in `leader_epoch`. `high_watermark` is
        the one it learnt as a follower; `epoch_start_offset` is its LEO at
        election, already cached in its log (KAFKA-7415)."""
        if replica_id not in replicas:
            raise ValueError(f"replica_id={replica_id!r} is not one of replicas={replicas!r}")
        if replica_id not in isr or not set(isr) <= set(replicas):
            raise ValueError(f"isr={isr!r}: must hold the leader {replica_id} "
                             f"and only replicas {replicas!r}")
        if min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas={min_insync_replicas!r}: must be >= 1")
        self.replica_id = replica_id
        self.replicas = tuple(replicas)
        self.leader_epoch = leader_epoch
        self.partition_epoch = partition_epoch
        self.log_end_offset = log_end_offset
        self.epoch_start_offset = epoch_start_offset
        self.min_insync_replicas = min_insync_replicas
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.bugs = bugs
        self._isr = frozenset(isr)
        self._pending: AlterIsr | None = None
        self._high_watermark = min(high_watermark, log_end_offset)
        # Partition.makeLeader: a new leader forgets every follower LEO, so
        # the HW waits until each ISR follower has fetched in this epoch.
        # ISR members count as caught up now, others not at all.
        self._followers = {
            follower_id: _Follower(last_caught_up_ms=now_ms if follower_id in self._isr else 0)
            for follower_id in self.replicas if follower_id != replica_id}
        self._waiters: list[tuple[int, int, asyncio.Future]] = []
        self._waiter_order = itertools.count()
        self._maybe_advance_high_watermark(now_ms)

    @property
    def high_watermark(self) -> int:
        return self._high_watermark

    @property
    def isr(self) -> tuple[int, ...]:
        """The committed ISR, in replica order."""
        return self._in_replica_order(self._isr)

    @property
    def pending(self) -> AlterIsr | None:
        """The ISR change in flight to the controller; no other is proposed meanwhile."""
        return self._pending

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """KIP-497: the committed ISR plus a pending expansion. A pending
        shrink does not count until committed (PendingShrinkIsr.maximalIsr)."""
        members = self._isr | frozenset(self._pending.new_isr if self._pending else ())
        return self._in_replica_order(members)

    @property
    def high_watermark_lagging(self) -> bool:
        """True while the HW is below this epoch's start offset: a new leader's
        HW can be behind the old leader's, so ListOffsets(latest) and
        timestamp lookups past it answer OFFSET_NOT_AVAILABLE rather than an
        offset that goes backwards (KIP-207, KAFKA-2334;
        Partition.fetchOffsetForTimestamp)."""
        if STALE_HW_AFTER_FAILOVER in self.bugs:
            return False
        return self._high_watermark < self.epoch_start_offset

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int,
                        log: PartitionLog) -> tuple[int, int] | None:
        """KIP-320 truncate-on-fetch, on the leader's `log` (Partition.readRecords):
        (epoch, end offset) to send as DivergingEpoch, with no records and
        without calling on_follower_fetch (KAFKA-13141), when the follower's
        last fetched epoch ends earlier here or is not ours; None to serve
        the fetch. Raises OffsetOutOfRange when the epoch's end is unknown
        here or the offset is below the log start (OFFSET_OUT_OF_RANGE)."""
        if last_fetched_epoch < 0:
            return None  # no epoch sent (Fetch < v12, or an empty follower log)
        epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
        if EPOCH_LOOKUP_V0 in self.bugs:
            # KIP-101's OffsetsForLeaderEpoch v0 answered an offset only (the
            # start of the next higher epoch, or the LEO): the follower could
            # not tell that the epoch ending there is not its own, and cut
            # at min(offset, its LEO) (KAFKA-6361, fixed by KIP-279).
            epoch = last_fetched_epoch
        if end_offset < 0 or fetch_offset < log.log_start_offset:
            raise OffsetOutOfRange(fetch_offset, log.log_start_offset, log.log_end_offset)
        if epoch < last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def on_follower_fetch(self, follower_id: int, fetch_offset: int, now_ms: int) -> AlterIsr | None:
        """A follower fetched at `fetch_offset` (its LEO) in this epoch and was
        served (Partition.updateFollowerFetchState). Returns an ISR expansion
        to send to the controller, or None."""
        follower = self._followers.get(follower_id)
        if follower is None:
            raise ValueError(f"follower_id={follower_id!r} is not a follower "
                             f"of replicas {self.replicas!r}")
        if fetch_offset > self.log_end_offset:
            raise ValueError(f"fetch_offset={fetch_offset!r} is past the leader's log end offset "
                             f"{self.log_end_offset}: call on_append after every append")
        # Replica.updateFetchStateOrThrow: caught up now if the fetch reaches
        # our LEO; caught up at the previous fetch if it reaches the LEO we
        # had then — so a follower behind a steady stream of small produces
        # still counts as caught up.
        if fetch_offset >= self.log_end_offset:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, now_ms)
        elif fetch_offset >= follower.last_fetch_leader_log_end_offset:
            follower.last_caught_up_ms = max(follower.last_caught_up_ms, follower.last_fetch_ms)
        follower.log_end_offset = fetch_offset
        follower.last_fetch_leader_log_end_offset = max(
            self.log_end_offset, follower.last_fetch_leader_log_end_offset)
        follower.last_fetch_ms = now_ms
        expansion = self._maybe_expand(follower_id, follower)
        self._maybe_advance_high_watermark(now_ms)
        return expansion

    def on_append(self, log_end_offset: int, now_ms: int) -> None:
        """The leader's log grew to `log_end_offset` (Partition.appendRecordsToLeader:
        an ISR of the leader alone commits at once)."""
        if log_end_offset < self.log_end_offset:
            raise ValueError(f"log_end_offset={log_end_offset!r} is below {self.log_end_offset}: "
                             "a leader's log only grows")
        self.log_end_offset = log_end_offset
        self._maybe_advance_high_watermark(now_ms)

    def maybe_shrink(self, now_ms: int) -> AlterIsr | None:
        """Partition.maybeShrinkIsr, run every replica.lag.time.max.ms / 2:
        propose removing the ISR followers that have not been caught up
        for replica.lag.time.max.ms. The leader stays."""
        if self._pending is not None:
            return None
        out_of_sync = {follower_id for follower_id in self._isr - {self.replica_id}
                       if not self._caught_up(self._followers[follower_id], now_ms)}
        if not out_of_sync:
            return None
        self._pending = AlterIsr(self.leader_epoch, self.partition_epoch,
                                 self._in_replica_order(self._isr - out_of_sync))
        return self._pending

    def on_isr_committed(self, isr: tuple[int, ...], partition_epoch: int, now_ms: int) -> None:
        """The controller accepted our change, or metadata brought a newer
        partition state in this leader epoch (e.g. a fenced follower removed).
        Older or repeated partition epochs are ignored."""
        if partition_epoch <= self.partition_epoch:
            return
        if self.replica_id not in isr or not set(isr) <= set(self.replicas):
            raise ValueError(f"isr={isr!r}: must hold the leader {self.replica_id} "
                             f"and only replicas {self.replicas!r}")
        self._isr = frozenset(isr)
        self.partition_epoch = partition_epoch
        self._pending = None
        self._maybe_advance_high_watermark(now_ms)

    def on_isr_rejected(self, error: ErrorCode) -> None:
        """The controller refused the pending change (Partition.handleAlterPartitionError):
        INELIGIBLE_REPLICA or OPERATION_NOT_ATTEMPTED roll back to the
        committed ISR; any other error (FENCED_LEADER_EPOCH,
        INVALID_UPDATE_VERSION) means newer metadata is coming, and the
        change stays in flight until on_isr_committed or a new leader state."""
        if error in (ErrorCode.ineligible_replica, ErrorCode.operation_not_attempted):
            self._pending = None

    def set_min_insync_replicas(self, min_insync_replicas: int, now_ms: int) -> None:
        """The topic's min.insync.replicas changed: it governs the next
        acks=all check, and a lower one may let the HW advance now."""
        if min_insync_replicas < 1:
            raise ValueError(f"min_insync_replicas={min_insync_replicas!r}: must be >= 1")
        self.min_insync_replicas = min_insync_replicas
        self._maybe_advance_high_watermark(now_ms)

    def acks_all_check(self) -> ErrorCode:
        """Before an acks=all append (Partition.appendRecordsToLeader):
        NOT_ENOUGH_REPLICAS, appending nothing, if the ISR is below the minimum."""
        if len(self._isr) < self._effective_min_isr():
            return ErrorCode.not_enough_replicas
        return ErrorCode.none

    def wait_for(self, offset: int) -> asyncio.Future:
        """A future done with an ErrorCode once the HW passes `offset` (the
        append's last offset): NONE, or NOT_ENOUGH_REPLICAS_AFTER_APPEND if
        the ISR is below the minimum by then (Partition.checkEnoughReplicasReachOffset);
        NOT_LEADER_OR_FOLLOWER after step_down. The caller applies the
        request timeout (REQUEST_TIMED_OUT) and may cancel the future. Under
        Kafka 3.7 rules the HW does not pass while the ISR is below the
        minimum, so such a wait ends in the timeout."""
        future = asyncio.get_running_loop().create_future()
        if self._high_watermark > offset:
            future.set_result(self._acks_verdict())
        else:
            heapq.heappush(self._waiters, (offset, next(self._waiter_order), future))
        return future

    def step_down(self) -> None:
        """Leadership lost: every acks=all waiter answers NOT_LEADER_OR_FOLLOWER."""
        waiters, self._waiters = self._waiters, []
        for _, _, future in waiters:
            if not future.done():
                future.set_result(ErrorCode.not_leader_or_follower)

    def _effective_min_isr(self) -> int:
        if ACKS_ALL_IGNORES_MIN_ISR in self.bugs:
            # Before 0.8.2 (KAFKA-1555) there was no min.insync.replicas:
            # acks=all meant "whatever the ISR is now", even the leader alone.
            return 1
        # KAFKA-15583: capped by the replication factor (Partition.effectiveMinIsr).
        return min(self.min_insync_replicas, len(self.replicas))

    def _caught_up(self, follower: _Follower, now_ms: int) -> bool:
        # ReplicaState.isCaughtUp
        return (follower.log_end_offset == self.log_end_offset
                or now_ms - follower.last_caught_up_ms <= self.replica_lag_time_max_ms)

    def _maybe_expand(self, follower_id: int, follower: _Follower) -> AlterIsr | None:
        """Partition.maybeExpandIsr/isFollowerInSync: a follower joins once
        its LEO reaches the HW and this epoch's start offset. Without the
        second rule a follower missing committed records between the HW and
        the epoch start could join, be elected and lose them (KAFKA-7128)."""
        if self._pending is not None or follower_id in self._isr:
            return None
        in_sync = follower.log_end_offset >= self._high_watermark
        if ISR_EXPAND_BELOW_EPOCH_START not in self.bugs:
            in_sync = in_sync and follower.log_end_offset >= self.epoch_start_offset
        if not in_sync:
            return None
        self._pending = AlterIsr(self.leader_epoch, self.partition_epoch,
                                 self._in_replica_order(self._isr | {follower_id}))
        return self._pending

    def _maybe_advance_high_watermark(self, now_ms: int) -> None:
        """Partition.maybeIncrementLeaderHW."""
        if len(self._isr) < self._effective_min_isr() and HW_ADVANCES_UNDER_MIN_ISR not in self.bugs:
            # KAFKA-15583 (KIP-966): under min ISR nothing becomes committed,
            # so data on the last replica standing is never acknowledged.
            return
        maximal_isr = self.maximal_isr
        new_high_watermark = self.log_end_offset
        for follower_id, follower in self._followers.items():
            # Waiting for a caught-up follower outside the ISR keeps the HW
            # from running away from a replica about to join (KIP-497).
            if follower.log_end_offset < new_high_watermark and (
                    follower_id in maximal_isr or self._caught_up(follower, now_ms)):
                new_high_watermark = follower.log_end_offset
        if new_high_watermark <= self._high_watermark:
            return  # UnifiedLog.maybeIncrementHighWatermark: forward only
        self._high_watermark = new_high_watermark
        verdict = self._acks_verdict()
        while self._waiters and self._waiters[0][0] < new_high_watermark:
            _, _, future = heapq.heappop(self._waiters)
            if not future.done():  # the caller's timeout may have cancelled it
                future.set_result(verdict)

    def _acks_verdict(self) -> ErrorCode:
        # checkEnoughReplicasReachOffset counts the maximal ISR.
        if len(self.maximal_isr) < self._effective_min_isr():
            return ErrorCode.not_enough_replicas_after_append
        return ErrorCode.none

    def _in_replica_order(self, members: frozenset[int]) -> tuple[int, ...]:
        return tuple(replica for replica in self.replicas if replica in members)
