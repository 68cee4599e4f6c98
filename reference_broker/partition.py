"""One partition replica: its log, its producers, its leader epoch and high
watermark, and who is waiting for it to grow.

On a single node the leader is the whole ISR, so the high watermark is the
log end offset after every append (Kafka: HW = min LEO over the ISR). The
replication issue replaces that with follower state; the rest of the broker
only ever asks `high_watermark`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from reference_broker.log import (
    CorruptRecordError, InvalidRecordError, PartitionLog, parse_batches, validate_client_batches,
)
from reference_broker.bugs import DEDUP_WINDOW_ONE, NO_IDEMPOTENT_DEDUP, NO_LEADER_EPOCH_FENCING
from reference_broker.producer_state import (
    BATCHES_TO_RETAIN, DuplicateSequence, InvalidProducerEpoch, OutOfOrderSequence, ProducerState,
)


READ_COMMITTED = 1  # Fetch and ListOffsets isolation_level


@dataclass(frozen=True)
class ProduceResult:
    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    message: str | None = None


class Partition:
    def __init__(self, topic: str, index: int, log: PartitionLog, leader_epoch: int,
                 bugs: frozenset[str] = frozenset()):
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = leader_epoch
        self.fence_epochs = NO_LEADER_EPOCH_FENCING not in bugs
        self.deduplicate = NO_IDEMPOTENT_DEDUP not in bugs
        # KIP-98: producer state lives with the log and is rebuilt from it.
        self.producers = ProducerState.rebuild(
            log.headers(), retain=1 if DEDUP_WINDOW_ONE in bugs else BATCHES_TO_RETAIN)
        self._waiters: list[asyncio.Future] = []

    @property
    def high_watermark(self) -> int:
        return self.log.log_end_offset

    @property
    def last_stable_offset(self) -> int:
        # No transactions: everything below the high watermark is stable.
        return self.high_watermark

    def readable_end(self, isolation_level: int) -> int:
        """Where a consumer's reads stop: the last stable offset under
        read_committed (isolation level 1), else the high watermark."""
        return self.last_stable_offset if isolation_level == READ_COMMITTED \
            else self.high_watermark

    def append(self, records: bytes, max_batch_bytes: int) -> ProduceResult:
        """Append one Produce request's batches for this partition, all or
        none: every batch is validated (framing, CRC, size, sequence) before
        any is written."""
        try:
            headers = parse_batches(records)
            # Kafka's LogValidator: one v2 batch per partition, counts that
            # match the offsets, no control batches from clients.
            validate_client_batches(headers)
        except CorruptRecordError as e:
            return ProduceResult(ErrorCode.corrupt_message, message=str(e))
        except InvalidRecordError as e:
            return ProduceResult(ErrorCode.invalid_record, message=str(e))
        if not headers:
            # ProduceRequest.validateRecords (v3+): at least one batch, else
            # InvalidRecordException, which KafkaApis answers INVALID_RECORD.
            return ProduceResult(ErrorCode.invalid_record, message="no record batch")
        for header in headers:
            if header.size > max_batch_bytes:
                return ProduceResult(ErrorCode.message_too_large,
                                     message=f"batch of {header.size} bytes > message.max.bytes")
        retry = False
        try:
            for header in headers:
                self.producers.check(header)
        except DuplicateSequence as dup:
            # A retry of a batch already in the log gets its original
            # offsets and nothing is appended (KIP-98; like UnifiedLog's
            # analyzeAndValidateProducerState, the first duplicate answers
            # for the whole request).
            if self.deduplicate:
                return ProduceResult(ErrorCode.none, dup.first_offset, self.log.log_start_offset)
            retry = True  # bug switch no-idempotent-dedup: written again
        except OutOfOrderSequence as e:
            return ProduceResult(ErrorCode.out_of_order_sequence_number, message=str(e))
        except InvalidProducerEpoch as e:
            return ProduceResult(ErrorCode.invalid_producer_epoch, message=str(e))
        info = self.log.append_as_leader(records, self.leader_epoch, headers)
        if not retry:  # a re-written retry leaves the producer's sequence where it was
            for header in info.batches:
                self.producers.record(header)
        self._wake()
        return ProduceResult(ErrorCode.none, info.first_offset, self.log.log_start_offset)

    def data_waiter(self) -> asyncio.Future:
        """A future done at the next append (long-polling fetches)."""
        future = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return future

    def _wake(self) -> None:
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(None)

    def check_epoch(self, current_leader_epoch: int) -> ErrorCode:
        """KIP-320: a request that names an epoch must name ours."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch \
                or not self.fence_epochs:
            return ErrorCode.none
        if current_leader_epoch < self.leader_epoch:
            return ErrorCode.fenced_leader_epoch
        return ErrorCode.unknown_leader_epoch
