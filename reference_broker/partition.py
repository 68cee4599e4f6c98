"""One partition replica on this broker: its log, its producers, its role —
leader, follower or neither — and who is waiting for it to grow.

Its transactions (txn/partition_txns.py) give the last stable offset and
the aborted ranges of read_committed reads; as leader it appends the
coordinator's transaction markers.

The role comes from the metadata image (Kafka's Partition.makeLeader /
makeFollower). As leader it appends clients' batches and keeps a
`LeaderState` (follower LEOs, high watermark, ISR proposals, acks=all
waiters); as follower a `FollowerState` applies what the replica fetcher
brings. The high watermark is whichever role's, or the checkpointed one
while the replica has no role yet.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from reference_broker.bugs import (
    DEDUP_WINDOW_ONE, FETCH_ABOVE_HW, LSO_INCLUSIVE, NO_IDEMPOTENT_DEDUP,
    NO_LEADER_EPOCH_FENCING,
)
from reference_broker.controller.records import PartitionState
from reference_broker.log import (
    CorruptRecordError, InvalidRecordError, LogConfig, PartitionLog, parse_batches,
    validate_client_batches,
)
from reference_broker.producer_state import (
    BATCHES_TO_RETAIN, DuplicateSequence, InvalidProducerEpoch, OutOfOrderSequence, ProducerState,
)
from reference_broker.replication import AlterIsr, FetchedPartition, FollowerState, LeaderState
from reference_broker.txn.partition_txns import (
    AbortedTxn, Marker, PartitionTxns, encode_marker, marker_of,
)
from reference_broker.txn.verification_state import Verifications

_log = logging.getLogger("reference_broker")

READ_COMMITTED = 1  # Fetch and ListOffsets isolation_level


def now_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True)
class ProduceResult:
    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None     # for the log: Kafka's answer carries none (produce.py)
    last_offset: int = -1
    log_append_time: int = -1       # a duplicate's: its cached batch's max timestamp


@dataclass(frozen=True)
class ReplicationConfig:
    """The settings a leader needs (Kafka's names): min.insync.replicas is
    the topic's, replica.lag.time.max.ms the broker's."""
    min_insync_replicas: int = 1
    replica_lag_time_max_ms: int = 30000


class Partition:
    def __init__(self, topic: str, index: int, log: PartitionLog, *, node_id: int = 0,
                 replication: ReplicationConfig = ReplicationConfig(),
                 bugs: frozenset[str] = frozenset(), high_watermark: int = 0):
        self.topic = topic
        self.index = index
        self.log = log
        self.node_id = node_id
        self.replication = replication
        self.bugs = bugs
        self.fence_epochs = NO_LEADER_EPOCH_FENCING not in bugs
        self._unfenced: set[tuple[int, int]] = set()    # (asked, ours) let through, logged
        self.deduplicate = NO_IDEMPOTENT_DEDUP not in bugs
        self._retain = 1 if DEDUP_WINDOW_ONE in bugs else BATCHES_TO_RETAIN
        # KIP-98: producer state lives with the log and is rebuilt from it.
        self.producers = ProducerState.rebuild(log.headers(), retain=self._retain)
        self.txns = PartitionTxns.of_log(log)
        # KIP-890 part 1: the verifications of producers' first
        # transactional batches here (Kafka's VerificationStateEntry).
        self._verifying = Verifications()
        self.state: PartitionState | None = None     # as the metadata image has it
        self.leader_epoch = -1
        self.leader: LeaderState | None = None
        self.follower: FollowerState | None = None
        self._checkpoint_hw = high_watermark
        self._waiters: list[asyncio.Future] = []

    def __repr__(self) -> str:
        return f"{self.topic}-{self.index}"

    # -- roles (Partition.makeLeader / makeFollower) ---------------------

    def become_leader(self, state: PartitionState, now: int) -> None:
        """Lead in `state.leader_epoch`. The epoch's start offset is our LEO,
        cached now so OffsetForLeaderEpoch answers for the new epoch before
        any append (KAFKA-7415)."""
        high_watermark = self.high_watermark
        self.resign()
        self.state, self.leader_epoch = state, state.leader_epoch
        end = self.log.log_end_offset
        self.log.assign_epoch_start_offset(state.leader_epoch, end)
        self.leader = LeaderState(
            replica_id=self.node_id, replicas=state.replicas, isr=state.isr,
            leader_epoch=state.leader_epoch, partition_epoch=state.partition_epoch,
            log_end_offset=end, high_watermark=high_watermark, epoch_start_offset=end,
            min_insync_replicas=self.replication.min_insync_replicas,
            replica_lag_time_max_ms=self.replication.replica_lag_time_max_ms,
            now_ms=now, bugs=self.bugs)
        self._wake()

    def become_follower(self, state: PartitionState) -> None:
        """Follow `state.leader` (-1: nobody to fetch from yet). The log is
        kept whole; truncation happens on fetch (KIP-320)."""
        high_watermark = self.high_watermark
        self.resign()
        self.state, self.leader_epoch = state, state.leader_epoch
        end = self.log.log_end_offset
        self.follower = FollowerState(leader_id=state.leader, leader_epoch=state.leader_epoch,
                                      log=self.log, high_watermark=high_watermark,
                                      bugs=self.bugs)
        if self.log.log_end_offset != end:
            self._rebuild_producers()   # truncate-to-local-hw cut the log

    def configure(self, replication: ReplicationConfig, log_config: LogConfig, now: int) -> None:
        """The topic's configs changed (Kafka's TopicConfigHandler): the log
        takes its new config for the next append, flush and roll
        (UnifiedLog.updateConfig); a leader applies the new
        min.insync.replicas at once, to acks=all and to its high watermark."""
        self.replication = replication
        self.log.config = log_config
        if self.leader is not None:
            self.leader.set_min_insync_replicas(replication.min_insync_replicas, now)
            self._wake()    # the HW may have moved

    def isr_committed(self, isr: tuple[int, ...], partition_epoch: int, now: int) -> None:
        """The controller committed an ISR in this leader epoch (our own
        AlterPartition, or newer metadata); older partition epochs are ignored."""
        if self.leader is not None and partition_epoch > self.leader.partition_epoch:
            self.leader.on_isr_committed(isr, partition_epoch, now)
            self._wake()    # the HW may have moved

    def resign(self) -> None:
        """No role at all (before a new one, or the topic is being deleted):
        acks=all waiters and long-polling fetches are answered."""
        if self.leader is not None:
            self.leader.step_down()
        self.leader = self.follower = None
        self._wake()    # long-polling fetches re-check and answer NOT_LEADER_OR_FOLLOWER

    @property
    def is_leader(self) -> bool:
        return self.leader is not None

    @property
    def high_watermark(self) -> int:
        if self.leader is not None:
            return self.leader.high_watermark
        if self.follower is not None:
            return self.follower.high_watermark
        return max(self.log.log_start_offset, min(self._checkpoint_hw, self.log.log_end_offset))

    @property
    def last_stable_offset(self) -> int:
        return self.txns.last_stable_offset(self.high_watermark)

    def aborted_transactions(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        return self.txns.aborted_between(fetch_offset, upper)

    def readable_end(self, isolation_level: int) -> int:
        """Where a consumer's reads stop: the last stable offset under
        read_committed (isolation level 1), else the high watermark — or,
        under the `fetch-above-hw` bug, the log end: records no ISR has
        confirmed, which a failover can take back; under `lso-inclusive`,
        one record into the earliest open transaction."""
        if FETCH_ABOVE_HW in self.bugs:
            return self.log.log_end_offset
        if isolation_level != READ_COMMITTED:
            return self.high_watermark
        stable = self.last_stable_offset
        if LSO_INCLUSIVE in self.bugs and stable < self.high_watermark:
            # Redpanda PR #3036: the exclusive bound used as an inclusive one.
            return stable + 1
        return stable

    # -- checks ----------------------------------------------------------

    def check_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: a request that names an epoch must name ours."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return ErrorCode.none
        if not self.fence_epochs:
            # The switch at work: say so once per pair of epochs, so a run
            # shows whether stale requests reached this replica at all.
            if (current_leader_epoch, self.leader_epoch) not in self._unfenced:
                self._unfenced.add((current_leader_epoch, self.leader_epoch))
                _log.warning("%s: answered a request naming leader epoch %d in epoch %d "
                             "(bug switch %s)", self, current_leader_epoch, self.leader_epoch,
                             NO_LEADER_EPOCH_FENCING)
            return ErrorCode.none
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch

    def leader_error(self, current_leader_epoch: int = -1) -> ErrorCode:
        """ReplicaManager.getPartitionOrException + localLogWithEpochOrException:
        the epoch first, then leadership."""
        return self.check_epoch(current_leader_epoch) or (
            ErrorCode.none if self.is_leader else ErrorCode.not_leader_or_follower)

    def replica_error(self, current_leader_epoch: int = -1) -> ErrorCode:
        """The same check without leadership (requireLeader=false): what a
        consumer's fetch from a follower meets (KIP-392)."""
        return self.check_epoch(current_leader_epoch) or (
            ErrorCode.none if self.is_leader or self.follower is not None
            else ErrorCode.not_leader_or_follower)

    # -- the leader's side -----------------------------------------------

    def append(self, records: bytes, max_batch_bytes: int, acks: int = 1,
               verified: object | None = None, *, coordinator: bool = False) -> ProduceResult:
        """Append one Produce request's batches for this partition, all or
        none: every batch is validated (framing, CRC, size, sequence) before
        any is written. acks=all is refused before anything is written when
        the ISR is below min.insync.replicas (NOT_ENOUGH_REPLICAS).
        `verified` is the guard of a transactional batch's verification
        (`begin_verification`), or UNVERIFIED where none covers it: a batch
        that opens a transaction must find it still standing; None when
        verification is off. A `coordinator`'s
        own batches (AppendOrigin.COORDINATOR) skip the client-only rules:
        they carry a producer id without sequences."""
        if self.leader is None:
            return ProduceResult(ErrorCode.not_leader_or_follower)
        # The log start offset of an error answer is Kafka's: -1 for the
        # errors ReplicaManager.appendToLocalLog lists (unknown partition, not
        # leader, record too large, corrupt records) and for those
        # KafkaApis finds before the log (ProduceRequest.validateRecords: one
        # batch per partition); the partition's own for every other error
        # (its generic branch, processFailedRecord).
        headers = []
        try:
            headers = parse_batches(records)
            # Kafka's LogValidator: one v2 batch per partition, counts that
            # match the offsets, no control batches from clients.
            if not coordinator:
                validate_client_batches(headers)
        except CorruptRecordError as e:
            return ProduceResult(ErrorCode.corrupt_message, message=str(e))
        except InvalidRecordError as e:
            start = -1 if len(headers) > 1 else self.log.log_start_offset
            return ProduceResult(ErrorCode.invalid_record, start, message=str(e))
        if not headers:
            # ProduceRequest.validateRecords (v3+): at least one batch, else
            # InvalidRecordException, which KafkaApis answers INVALID_RECORD.
            return ProduceResult(ErrorCode.invalid_record, message="no record batch")
        for header in headers:
            if header.size > max_batch_bytes:
                return ProduceResult(ErrorCode.message_too_large,
                                     message=f"batch of {header.size} bytes > "
                                             f"max.message.bytes {max_batch_bytes}")
        if acks == -1:
            error = self.leader.acks_all_check()
            if error:
                return ProduceResult(error, -1, self.log.log_start_offset,
                                     message="the ISR is below min.insync.replicas")
        txn_error = self._txn_error(headers, verified)
        if txn_error:
            return ProduceResult(txn_error, -1, self.log.log_start_offset,
                                 message="record was not part of an ongoing transaction")
        retry = False
        try:
            for header in headers:
                self.producers.check(header, sequence=not coordinator)
        except DuplicateSequence as dup:
            # A retry of a batch already in the log gets its original
            # offsets and nothing is appended (KIP-98; like UnifiedLog's
            # analyzeAndValidateProducerState, the first duplicate answers
            # for the whole request). acks=all still waits for it.
            if self.deduplicate:
                return ProduceResult(ErrorCode.none, dup.first_offset, self.log.log_start_offset,
                                     last_offset=dup.last_offset,
                                     log_append_time=dup.max_timestamp)
            retry = True  # bug switch no-idempotent-dedup: written again
        except OutOfOrderSequence as e:
            return ProduceResult(ErrorCode.out_of_order_sequence_number, -1,
                                 self.log.log_start_offset, message=str(e))
        except InvalidProducerEpoch as e:
            return ProduceResult(ErrorCode.invalid_producer_epoch, -1,
                                 self.log.log_start_offset, message=str(e))
        for header in headers if not coordinator else ():
            behind = self._verifying.sequence_error(header.producer_id, header.base_sequence) \
                if header.has_producer_id else None
            if behind is not None:
                return ProduceResult(ErrorCode.out_of_order_sequence_number, -1,
                                     self.log.log_start_offset, message=behind)
        try:
            info = self.log.append_as_leader(records, self.leader_epoch, headers)
        except OSError as e:
            return self._storage_error(e)
        if not retry:  # a re-written retry leaves the producer's sequence where it was
            for header in info.batches:
                self.producers.record(header)
                self.txns.record(header)
                if header.is_transactional:
                    self._verifying.end(header.producer_id)
        self.leader.on_append(self.log.log_end_offset, now_ms())
        self._wake()
        return ProduceResult(ErrorCode.none, info.first_offset, self.log.log_start_offset,
                             last_offset=info.last_offset)

    def _storage_error(self, error: OSError) -> ProduceResult:
        """A disk error (EIO) failed the append, which changed nothing
        (Segment.append): KAFKA_STORAGE_ERROR, which producers, the
        coordinators and their marker writes retry. Kafka would also take
        the log directory offline (KIP-112); here the error is transient
        (docs/broker.md)."""
        _log.warning("%s: append failed: %s", self, error)
        return ProduceResult(ErrorCode.kafka_storage_error, -1, self.log.log_start_offset,
                             message=str(error))

    def _txn_error(self, headers, verified: object | None) -> ErrorCode:
        """ProducerAppendInfo.appendDataBatch: a producer with a transaction
        open here may only write transactionally; and (KIP-890 part 1,
        UnifiedLog.maybeStartTransactionVerification) a transactional batch
        that opens a transaction needs its verification to still stand:
        a marker in between ends it, so a stale verification cannot
        append into the next transaction (the ABA case)."""
        for header in headers:
            if not header.has_producer_id:
                continue
            open_here = self.txns.is_open(header.producer_id)
            if open_here and not header.is_transactional:
                return ErrorCode.invalid_txn_state
            if header.is_transactional and not open_here and verified is not None \
                    and not self._verifying.stands(header.producer_id, verified):
                return ErrorCode.invalid_txn_state
        return ErrorCode.none

    def begin_verification(self, producer_id: int, sequence: int, epoch: int) -> object:
        """The guard of a verification about to be asked of the coordinator
        for a batch of this first sequence and epoch."""
        return self._verifying.begin(producer_id, sequence, epoch)

    def append_marker(self, producer_id: int, producer_epoch: int, marker: Marker
                      ) -> tuple[ErrorCode, int]:
        """Write a transaction marker as leader (WriteTxnMarkers):
        (error, its offset). Checked as ProducerAppendInfo.appendEndTxnMarker."""
        if self.leader is None:
            return ErrorCode.not_leader_or_follower, -1
        entry = self.producers.producers.get(producer_id)
        error = self.txns.check_marker(producer_epoch, -1 if entry is None else entry.epoch,
                                       producer_id, marker.coordinator_epoch)
        if error:
            _log.warning("%s: refused %s marker of producer %d epoch %d coordinator epoch %d: %s",
                         self, "COMMIT" if marker.result else "ABORT", producer_id,
                         producer_epoch, marker.coordinator_epoch, error.name)
            return error, -1
        try:
            info = self.log.append_as_leader(encode_marker(producer_id, producer_epoch, marker),
                                             self.leader_epoch)
        except OSError as e:
            return self._storage_error(e).error, -1
        self._verifying.end(producer_id)
        header, = info.batches
        self.producers.record(header)
        self.txns.record(header, marker)
        self.leader.on_append(self.log.log_end_offset, now_ms())
        self._wake()
        return ErrorCode.none, header.last_offset

    async def wait_replicated(self, last_offset: int, timeout_s: float) -> ErrorCode:
        """acks=all: until the HW passes `last_offset` (DelayedProduce)."""
        if self.leader is None:
            return ErrorCode.not_leader_or_follower
        future = self.leader.wait_for(last_offset)
        try:
            return await asyncio.wait_for(future, timeout_s)
        except asyncio.TimeoutError:
            return ErrorCode.request_timed_out

    def on_follower_fetch(self, follower_id: int, fetch_offset: int) -> AlterIsr | None:
        """A follower fetched at its LEO; wakes consumers if the HW moved."""
        before = self.leader.high_watermark
        expansion = self.leader.on_follower_fetch(follower_id, fetch_offset, now_ms())
        if self.leader.high_watermark != before:
            self._wake()
        return expansion

    # -- the follower's side ---------------------------------------------

    def apply_fetched(self, fetched: FetchedPartition) -> None:
        """The leader's answer to our fetch, applied to the log and producers."""
        end = self.log.log_end_offset
        self.follower.apply(fetched)
        if self.log.log_end_offset < end:
            self._rebuild_producers()   # cut at a divergence
        elif self.log.log_end_offset > end:
            view, position = memoryview(fetched.records), 0
            for header in parse_batches(fetched.records, verify_crc=False):
                self.producers.record(header)
                raw = view[position:position + header.size]
                position += header.size
                self.txns.record(header, marker_of(header, raw))
        self._wake()    # a consumer long-polling this follower (KIP-392) re-reads

    def truncate_out_of_range(self, leader_log_end_offset: int) -> None:
        end = self.log.log_end_offset
        self.follower.on_out_of_range(leader_log_end_offset)
        if self.log.log_end_offset != end:
            self._rebuild_producers()

    def _rebuild_producers(self) -> None:
        self.producers = ProducerState.rebuild(self.log.headers(), retain=self._retain)
        self.txns = PartitionTxns.of_log(self.log)

    # -- waiting for data ------------------------------------------------

    def data_waiter(self) -> asyncio.Future:
        """A future done at the next append, HW move or role change
        (long-polling fetches)."""
        future = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return future

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)
