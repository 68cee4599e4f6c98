"""Follower-side state of one partition: where to fetch from, and applying
the leader's answer to the local log.

One idea, Kafka's fetcher (AbstractFetcherThread, ReplicaFetcherThread)
with truncate-on-fetch (KIP-320; KAFKA-10554): the follower keeps its whole
log when it becomes a follower and fetches at its LEO with the epoch of its
last batch. If the leader answers with a DivergingEpoch, the follower cuts
its log where the two histories part, found through both epoch caches
(KIP-101, KIP-279), and asks again; otherwise it appends the leader's
batches as they are. It learns the high watermark only from the leader:
min(leader HW, own LEO).
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from reference_broker.log import PartitionLog

TRUNCATE_TO_LOCAL_HW = "truncate-to-local-hw"

NO_EPOCH = -1  # Fetch's LastFetchedEpoch when there is none


@dataclass(frozen=True)
class FetchedPartition:
    """One partition of a Fetch response, as the follower needs it."""
    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: bytes
    diverging_epoch: tuple[int, int] | None = None  # (epoch, end offset)


class FollowerState:
    def __init__(self, *, leader_id: int, leader_epoch: int, log: PartitionLog,
                 high_watermark: int, bugs: frozenset[str] = frozenset()):
        """A replica that becomes a follower of `leader_id` in `leader_epoch`,
        with the HW it knew until now (its checkpoint after a restart)."""
        self.leader_id = leader_id
        self.leader_epoch = leader_epoch
        self.log = log
        self.bugs = bugs
        self.high_watermark = self._clamped(high_watermark)
        if TRUNCATE_TO_LOCAL_HW in bugs:
            # Before KIP-101 a new follower cut its log at its own HW
            # (ReplicaManager.makeFollowers -> logManager.truncateTo), which
            # lags the leader's by a fetch round trip: a record acknowledged
            # by the leader is gone here, and if this replica is elected
            # next it is gone for good (KAFKA-1211).
            self._truncate(self.high_watermark)

    def fetch_position(self) -> tuple[int, int]:
        """(fetch offset, last fetched epoch) for the next Fetch: the LEO and
        the epoch of the last batch (NO_EPOCH for an empty log)."""
        latest_epoch = self.log.latest_epoch()
        if TRUNCATE_TO_LOCAL_HW in self.bugs or latest_epoch is None:
            # Pre-KIP-101 fetches carry no epoch: the leader cannot see
            # that the logs have diverged.
            return self.log.log_end_offset, NO_EPOCH
        return self.log.log_end_offset, latest_epoch

    def apply(self, fetched: FetchedPartition) -> None:
        """Apply the answer to a fetch at fetch_position(). An error changes
        nothing (the caller backs off, refreshes metadata, or on
        OFFSET_OUT_OF_RANGE calls on_out_of_range). A DivergingEpoch cuts
        the log and is the whole answer (AbstractFetcherThread.processFetchRequest).
        Records are appended as the leader wrote them; a batch that does
        not follow the LEO raises UnexpectedAppendOffset."""
        if fetched.error is not ErrorCode.none:
            return
        if fetched.diverging_epoch is not None:
            self._truncate(self._divergence_point(*fetched.diverging_epoch))
            return
        if fetched.records:
            self.log.append_as_follower(fetched.records)
        # ReplicaFetcherThread.processPartitionData -> UnifiedLog.updateHighWatermark:
        # the leader's HW, clamped to what this log holds; it may move back.
        self.high_watermark = self._clamped(fetched.high_watermark)

    def on_out_of_range(self, leader_log_end_offset: int) -> None:
        """OFFSET_OUT_OF_RANGE answered a fetch: `leader_log_end_offset` is
        the leader's LEO (ListOffsets latest with this replica's id). A
        leader behind us (after an unclean election) means cutting to its
        LEO; otherwise the next fetch retries at our LEO
        (AbstractFetcherThread.fetchOffsetAndTruncate, non-fatal since
        KAFKA-7414). The leader's log start never passes our LEO here: this
        broker deletes no segments."""
        if leader_log_end_offset < self.log.log_end_offset:
            self._truncate(leader_log_end_offset)

    def _divergence_point(self, leader_epoch: int, leader_end_offset: int) -> int:
        """AbstractFetcherThread.getOffsetTruncationState (KIP-279): the
        leader's (epoch, end offset) against our own end of that epoch."""
        log_end_offset = self.log.log_end_offset
        epoch, end_offset = self.log.end_offset_for_epoch(leader_epoch)
        if end_offset < 0:
            # We track no epoch at or below the leader's: trust its offset.
            return min(leader_end_offset, log_end_offset)
        if epoch != leader_epoch:
            # We never saw the leader's epoch: cut at the end of our largest
            # epoch below it; the next fetch sends that epoch and the leader
            # answers again, until the epochs match.
            return min(end_offset, log_end_offset)
        return min(end_offset, leader_end_offset, log_end_offset)

    def _truncate(self, offset: int) -> None:
        self.log.truncate_to(offset)
        # UnifiedLog.truncateTo: the HW never stays above the LEO.
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    def _clamped(self, high_watermark: int) -> int:
        return max(self.log.log_start_offset, min(high_watermark, self.log.log_end_offset))
