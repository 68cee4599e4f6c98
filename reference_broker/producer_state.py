"""Idempotent producer state of one partition (KIP-98).

One idea, Kafka's ProducerStateManager: per producer id, the current epoch
and the metadata of its last 5 batches (ProducerStateEntry.NUM_BATCHES_TO_RETAIN).
Before an append, `check` tells a retry of one of those 5 batches
(DuplicateSequence: answer with the original offsets, append nothing)
from a batch that does not follow the last sequence (OutOfOrderSequence)
or comes from a fenced epoch (InvalidProducerEpoch); after the append,
`record` adds the batch with its final offsets. The state is a pure
function of the log's batches, so `rebuild` replays them: on open and
after every truncation.

Rules, in the order Kafka applies them (UnifiedLog.analyzeAndValidateProducerState,
ProducerAppendInfo.checkProducerEpoch/checkSequence):
1. same epoch and the exact (first, last) sequence range of a cached
   batch -> duplicate;
2. epoch below the current one -> invalid epoch;
3. a new epoch must start at sequence 0 (unless the producer had no epoch);
4. the same epoch must continue at last sequence + 1, wrapping from
   2**31-1 to 0; a producer without state accepts any sequence (KIP-360).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from reference_broker.log.batch import MAX_SEQUENCE, NO_SEQUENCE, BatchHeader

BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_PRODUCER_EPOCH = -1


class DuplicateSequence(Exception):
    """A retry of a batch already in the log: answer with its offsets."""

    def __init__(self, producer_id: int, first_offset: int, last_offset: int,
                 max_timestamp: int = -1):
        super().__init__(f"duplicate batch of producer {producer_id}, already at offsets "
                         f"{first_offset}..{last_offset}")
        self.first_offset = first_offset
        self.last_offset = last_offset
        # Kafka answers a duplicate with the cached batch's timestamp as its
        # log append time (UnifiedLog.append: appendInfo.setLogAppendTime(
        # duplicate.timestamp), BatchMetadata.timestamp = the batch's max).
        self.max_timestamp = max_timestamp


class OutOfOrderSequence(Exception):
    """-> ErrorCode.out_of_order_sequence_number"""


class InvalidProducerEpoch(Exception):
    """-> ErrorCode.invalid_producer_epoch"""


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    max_timestamp: int = -1


@dataclass(slots=True)
class ProducerEntry:
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=BATCHES_TO_RETAIN))
    # The last batch's max timestamp, or a transaction marker's: Kafka's
    # ProducerStateEntry.lastTimestamp, which DescribeProducers reports.
    last_timestamp: int = -1

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def update_epoch(self, epoch: int) -> None:
        # ProducerStateEntry.maybeUpdateProducerEpoch: a new epoch forgets the batches.
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch


@dataclass
class ProducerState:
    producers: dict[int, ProducerEntry] = field(default_factory=dict)
    # Batches kept per producer for deduplication; 1 only under the
    # `dedup-window-one` bug switch (Kafka 0.11.0's single-batch cache).
    retain: int = BATCHES_TO_RETAIN

    def check(self, header: BatchHeader, *, sequence: bool = True) -> None:
        """Raise DuplicateSequence, InvalidProducerEpoch or OutOfOrderSequence
        for a client's batch about to be appended; nothing for a batch
        without producer id. Without `sequence`, the epoch only: a
        coordinator's own transactional batch (TxnOffsetCommit) has no
        sequence (ProducerAppendInfo checks sequences for clients only)."""
        if not header.has_producer_id:
            return
        entry = self.producers.get(header.producer_id)
        current_epoch = entry.epoch if entry is not None else NO_PRODUCER_EPOCH
        if not sequence:
            if header.producer_epoch < current_epoch:
                raise InvalidProducerEpoch(
                    f"epoch of producer {header.producer_id} is {header.producer_epoch}, "
                    f"below the last seen epoch {current_epoch}")
            return
        if entry is not None and header.producer_epoch == current_epoch:
            # ProducerStateEntry.findDuplicateBatch
            for batch in entry.batches:
                if batch.first_sequence == header.base_sequence and batch.last_sequence == header.last_sequence:
                    raise DuplicateSequence(header.producer_id, batch.first_offset,
                                            batch.last_offset, batch.max_timestamp)
        if header.producer_epoch < current_epoch:
            raise InvalidProducerEpoch(
                f"epoch of producer {header.producer_id} is {header.producer_epoch}, "
                f"below the last seen epoch {current_epoch}")
        sequence = header.base_sequence
        if header.producer_epoch != current_epoch:
            if sequence != 0 and current_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequence(
                    f"invalid sequence number for new epoch {header.producer_epoch} of producer "
                    f"{header.producer_id}: {sequence} (must be 0; current epoch {current_epoch})")
        elif current_epoch != NO_PRODUCER_EPOCH and not _in_sequence(entry.last_sequence, sequence):
            raise OutOfOrderSequence(
                f"out of order sequence number for producer {header.producer_id}: {sequence} "
                f"(incoming), {entry.last_sequence} (current end sequence number)")

    def record(self, header: BatchHeader) -> None:
        """Add an appended batch (offsets final) to its producer's window of 5."""
        if not header.has_producer_id:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(
                batches=deque(maxlen=self.retain))
        entry.update_epoch(header.producer_epoch)
        entry.last_timestamp = header.max_timestamp
        if header.is_control or header.base_sequence == NO_SEQUENCE:
            # A transaction marker moves the epoch and the last timestamp
            # only (appendEndTxnMarker: updatedEntry.update).
            return
        entry.batches.append(BatchMetadata(
            header.base_sequence, header.last_sequence, header.base_offset, header.last_offset,
            header.max_timestamp))

    @classmethod
    def rebuild(cls, batches: Iterable[BatchHeader], retain: int = BATCHES_TO_RETAIN
                ) -> ProducerState:
        """The state after the log's batches, in order (producer state
        recovery replays the log as REPLICATION appends: no checks)."""
        state = cls(retain=retain)
        for header in batches:
            state.record(header)
        return state


def _in_sequence(last_sequence: int, next_sequence: int) -> bool:
    """ProducerAppendInfo.inSequence: +1, or 2**31-1 wrapping to 0."""
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == MAX_SEQUENCE)
