"""The transactions of one partition, as its log tells them (KIP-98).

One idea, the transactional half of Kafka's ProducerStateManager: per
producer, the first offset of the transaction it has open here; the
transactions completed whose marker the high watermark has not yet passed;
and the index of aborted transactions (Kafka's `.txnindex`). Like the
producers' sequences (producer_state.py) it is a pure function of the log's
batches, rebuilt by replaying them after a truncation.

From it come:
- the last stable offset: `min(first unstable offset, HW)`, exclusive
  (UnifiedLog.lastStableOffset). A transaction is unstable from its first
  batch until its marker is below the high watermark
  (ProducerStateManager.unreplicatedTxns), so a committed transaction
  becomes visible to read_committed readers all at once;
- the aborted ranges a read_committed fetch returns: every aborted
  transaction with `last_offset >= fetch_offset` and `first_offset <
  upper` — also those that began before the fetch offset
  (TransactionIndex.collectAbortedTxns);
- the checks of a marker (ProducerAppendInfo.appendEndTxnMarker): an epoch
  below the producer's is INVALID_PRODUCER_EPOCH, a coordinator epoch below
  the last one seen TRANSACTION_COORDINATOR_FENCED.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from reference_broker.internal_batches import CONTROL, TRANSACTIONAL, decode_batch, encode_batch
from reference_broker.log.batch import BatchHeader

ABORT, COMMIT = 0, 1    # ControlRecordType


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int        # the ABORT marker's offset


@dataclass(frozen=True, slots=True)
class Marker:
    """A control batch's meaning: which transaction result, from which
    coordinator epoch (EndTransactionMarker)."""
    result: int             # ABORT or COMMIT
    coordinator_epoch: int


@dataclass
class PartitionTxns:
    ongoing: dict[int, int] = field(default_factory=dict)      # producer id -> first offset
    unreplicated: list[tuple[int, int]] = field(default_factory=list)  # (first, marker offset)
    aborted: list[AbortedTxn] = field(default_factory=list)    # by marker offset
    coordinator_epochs: dict[int, int] = field(default_factory=dict)   # producer id -> last

    # -- what the log says ----------------------------------------------

    def record(self, header: BatchHeader, marker: Marker | None = None) -> None:
        """A batch now in the log (offsets final); `marker` for a control batch.
        A batch without a producer id is no producer's, transactional flag
        or not (UnifiedLog.analyzeAndValidateProducerState looks only at
        batches with one; seen by tests/conformance/)."""
        if not header.is_transactional or not header.has_producer_id:
            return
        producer = header.producer_id
        if marker is None:
            self.ongoing.setdefault(producer, header.base_offset)
            return
        self.coordinator_epochs[producer] = max(
            marker.coordinator_epoch, self.coordinator_epochs.get(producer, -1))
        first = self.ongoing.pop(producer, None)
        if first is None:
            return      # no data of this producer here: the marker changes nothing
        self.unreplicated.append((first, header.base_offset))
        if marker.result == ABORT:
            self.aborted.append(AbortedTxn(producer, first, header.base_offset))

    @classmethod
    def rebuild(cls, batches: Iterable[tuple[BatchHeader, Marker | None]]) -> PartitionTxns:
        state = cls()
        for header, marker in batches:
            state.record(header, marker)
        return state

    @classmethod
    def of_log(cls, log) -> PartitionTxns:
        """Rebuilt from a PartitionLog, reading a batch's bytes only for the
        transaction markers."""
        def batches():
            for header in log.headers():
                if header.is_control and header.is_transactional:
                    _, raw = next(log.batches(header.base_offset))
                    yield header, decode_marker(raw)
                else:
                    yield header, None
        return cls.rebuild(batches())

    # -- what readers see -----------------------------------------------

    def last_stable_offset(self, high_watermark: int) -> int:
        # Completed transactions whose marker the HW has passed are stable
        # (ProducerStateManager.onHighWatermarkUpdated removes them).
        self.unreplicated = [(first, end) for first, end in self.unreplicated
                             if end >= high_watermark]
        firsts = [first for first, _ in self.unreplicated]
        firsts.extend(self.ongoing.values())
        return min(min(firsts, default=high_watermark), high_watermark)

    def aborted_between(self, fetch_offset: int, upper: int) -> list[AbortedTxn]:
        """Aborted transactions a read from `fetch_offset` up to `upper`
        (exclusive) must be told of."""
        start = bisect.bisect_left(self.aborted, fetch_offset, key=lambda t: t.last_offset)
        return [txn for txn in self.aborted[start:] if txn.first_offset < upper]

    def is_open(self, producer_id: int) -> bool:
        return producer_id in self.ongoing

    # -- checks before an append ------------------------------------------

    def check_marker(self, producer_epoch: int, current_epoch: int,
                     producer_id: int, coordinator_epoch: int) -> ErrorCode:
        if producer_epoch < current_epoch:
            return ErrorCode.invalid_producer_epoch
        if coordinator_epoch < self.coordinator_epochs.get(producer_id, -1):
            return ErrorCode.transaction_coordinator_fenced
        return ErrorCode.none


# MemoryRecords.writeEndTransactionalMarker: a one-record control batch of
# the transaction's producer id and epoch; the key is ControlRecordType
# (int16 version 0, int16 type: ABORT 0, COMMIT 1), the value
# EndTransactionMarker (int16 version 0, int32 coordinator epoch).
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


def encode_marker(producer_id: int, producer_epoch: int, marker: Marker) -> bytes:
    return encode_batch([(_CONTROL_KEY.pack(0, marker.result),
                          _MARKER_VALUE.pack(0, marker.coordinator_epoch))],
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        attributes=TRANSACTIONAL | CONTROL)


def decode_marker(raw: bytes) -> Marker:
    """The marker of a transactional control batch's bytes."""
    (key, value), = decode_batch(bytes(raw))
    _, result = _CONTROL_KEY.unpack_from(key)
    _, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    return Marker(result, coordinator_epoch)


def marker_of(header: BatchHeader, raw) -> Marker | None:
    """A batch's marker, or None for a batch of records."""
    return decode_marker(raw) if header.is_control and header.is_transactional else None
