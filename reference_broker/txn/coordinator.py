"""The transaction coordinator (KIP-98; Kafka's TransactionCoordinator and
TransactionStateManager): one transactional id's state machine, kept in
the `__transaction_state` partition the id hashes to and served by that
partition's leader.

Every transition is written first (acks=all) and counts only once the
write succeeded; meanwhile the id is pending and every other request on it
answers CONCURRENT_TRANSACTIONS, which clients retry. The coordinator epoch
is the leader epoch of the partition when this broker loaded it: markers
carry it, so a deposed coordinator's markers are refused (KAFKA-9144).

Fidelity to Kafka's semantics, each cited where it is built:
- InitProducerId bumps the epoch, fencing the previous producer; an
  ongoing transaction is aborted first, at a bumped epoch;
- EndTxn answers as soon as PrepareCommit/PrepareAbort is written: the
  markers land later, so a commit is durable before it is visible;
- a transaction open longer than its timeout is aborted with an epoch bump
  (KAFKA-6119: without it the producer is not fenced, and what it sends
  next opens a new transaction that commits; the `txn-expiry-no-bump`
  switch), checked every
  transaction.abort.timed.out.transaction.cleanup.interval.ms;
- the timeout starts at the first AddPartitionsToTxn, not at the client's
  beginTransaction.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from kio.schema.errors import ErrorCode

from reference_broker.bugs import TXN_EXPIRY_NO_BUMP
from reference_broker.group.records import partition_for
from reference_broker.txn.metadata import (
    NO_EPOCH, Partition, TxnMetadata, TxnState, encode, replay,
)
from reference_broker.txn.partition_txns import ABORT, COMMIT

if TYPE_CHECKING:
    from reference_broker.config import BrokerConfig

log = logging.getLogger(__name__)
NONE = ErrorCode.none
_RETRY_S = 0.1


@dataclass(frozen=True)
class TxnConfig:
    partitions: int = 50                    # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000           # transaction.max.timeout.ms
    abort_interval_ms: int = 10_000         # ...abort.timed.out.transaction.cleanup.interval.ms
    bump_epoch_on_timeout: bool = True      # False: the KAFKA-6119 bug

    @classmethod
    def of(cls, config: BrokerConfig) -> TxnConfig:
        """The broker's settings; `txn-expiry-no-bump` turns the bump off."""
        return cls(partitions=config["transaction.state.log.num.partitions"],
                   max_timeout_ms=config["transaction.max.timeout.ms"],
                   abort_interval_ms=config[
                       "transaction.abort.timed.out.transaction.cleanup.interval.ms"],
                   bump_epoch_on_timeout=TXN_EXPIRY_NO_BUMP not in config.bugs)


class TxnLog(Protocol):
    async def append(self, index: int, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        """Append to `__transaction_state` partition `index` with acks=all."""


class MarkerWriter(Protocol):
    async def write(self, producer_id: int, producer_epoch: int, result: int,
                    coordinator_epoch: int, partitions: Iterable[Partition],
                    still_coordinator: Callable[[], bool]) -> None:
        """Write the marker into every partition's log, retrying across
        leader changes, until all are written or abandoned, or
        `still_coordinator()` turns false."""


# TransactionStateManager.appendTransactionToLog: log errors -> client errors.
_APPEND_ERRORS = {
    ErrorCode.unknown_topic_or_partition: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas: ErrorCode.coordinator_not_available,
    ErrorCode.not_enough_replicas_after_append: ErrorCode.coordinator_not_available,
    ErrorCode.request_timed_out: ErrorCode.coordinator_not_available,
    ErrorCode.not_leader_or_follower: ErrorCode.not_coordinator,
    ErrorCode.kafka_storage_error: ErrorCode.not_coordinator,
}


@dataclass(frozen=True)
class InitResult:
    error: ErrorCode
    producer_id: int = -1
    producer_epoch: int = NO_EPOCH


class TransactionCoordinator:
    def __init__(self, txn_log: TxnLog, markers: MarkerWriter,
                 allocate_producer_id: Callable[[], int], config: TxnConfig = TxnConfig(),
                 clock: Callable[[], float] = time.time):
        self._log = txn_log
        self._markers = markers
        self._allocate = allocate_producer_id
        self.config = config
        self._clock = clock
        self._txns: dict[str, TxnMetadata] = {}
        self._owned: dict[int, int] = {}        # partition -> coordinator epoch
        self._loading: set[int] = set()
        self._pending: set[str] = set()
        self._tasks: set[asyncio.Task] = set()
        self._sweeper: asyncio.Task | None = None

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.partitions)

    # -- loading (TransactionStateManager.loadTransactionsForTxnTopicPartition) --

    def begin_load(self, partition: int) -> None:
        if partition not in self._owned:
            self._loading.add(partition)

    def load(self, partition: int, coordinator_epoch: int,
             records: Iterable[tuple[bytes, bytes | None]]) -> None:
        """Replay the partition, serve its ids, and finish every transaction
        left in PrepareCommit/PrepareAbort: its markers are sent again
        (TransactionMarkerChannelManager.addTxnMarkersToSend on load)."""
        loaded = replay(records)
        self._loading.discard(partition)
        self._owned[partition] = coordinator_epoch
        self._txns.update(loaded)
        for meta in loaded.values():
            if meta.state.is_prepare:
                self._spawn(self._complete(meta, coordinator_epoch))
        log.info("__transaction_state-%d loaded at coordinator epoch %d: %d ids", partition,
                 coordinator_epoch, len(loaded))
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = self._spawn(self._abort_expired())

    def unload(self, partition: int) -> None:
        self._owned.pop(partition, None)
        self._loading.discard(partition)
        for transactional_id in [t for t in self._txns if self.partition_of(t) == partition]:
            del self._txns[transactional_id]
            self._pending.discard(transactional_id)

    async def close(self) -> None:
        for partition in list(self._owned):
            self.unload(partition)
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def _spawn(self, coroutine: Coroutine) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _ownership_error(self, transactional_id: str) -> ErrorCode:
        partition = self.partition_of(transactional_id)
        if partition in self._loading:
            return ErrorCode.coordinator_load_in_progress
        return NONE if partition in self._owned else ErrorCode.not_coordinator

    def _coordinator_epoch(self, transactional_id: str) -> int | None:
        return self._owned.get(self.partition_of(transactional_id))

    # -- writing a transition -------------------------------------------

    async def _write(self, meta: TxnMetadata) -> ErrorCode:
        """Write `meta` as the id's new state, which then counts — unless
        this broker stopped coordinating the id meanwhile."""
        transactional_id = meta.transactional_id
        epoch = self._coordinator_epoch(transactional_id)
        self._pending.add(transactional_id)
        try:
            error = await self._log.append(self.partition_of(transactional_id), [encode(meta)])
        finally:
            self._pending.discard(transactional_id)
        if error:
            log.info("%s: writing %s failed: %s", transactional_id, meta.state.kafka_name,
                     error.name)
            return _APPEND_ERRORS.get(error, ErrorCode.unknown_server_error)
        if self._coordinator_epoch(transactional_id) != epoch:
            return ErrorCode.not_coordinator
        self._txns[transactional_id] = meta
        return NONE

    def _precheck(self, transactional_id: str, producer_id: int, producer_epoch: int
                  ) -> tuple[ErrorCode, TxnMetadata | None]:
        """The checks AddPartitionsToTxn, AddOffsetsToTxn and EndTxn share."""
        error = self._ownership_error(transactional_id)
        if error:
            return error, None
        meta = self._txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping, None
        if meta.producer_epoch != producer_epoch:
            return ErrorCode.producer_fenced, None
        if transactional_id in self._pending:
            return ErrorCode.concurrent_transactions, None
        return NONE, meta

    # -- InitProducerId (prepareInitProducerIdTransit) ------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               producer_id: int = -1, producer_epoch: int = NO_EPOCH
                               ) -> InitResult:
        if transactional_id == "":
            return InitResult(ErrorCode.invalid_request)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout)
        error = self._ownership_error(transactional_id)
        if error:
            return InitResult(error)
        if transactional_id in self._pending:
            return InitResult(ErrorCode.concurrent_transactions)
        now = self._now_ms()
        meta = self._txns.get(transactional_id) or TxnMetadata(
            transactional_id, self._allocate(), NO_EPOCH, timeout_ms, TxnState.EMPTY,
            last_update_ms=now)
        expected = producer_epoch if producer_id >= 0 else None
        if expected is not None and not meta.names_this_producer(producer_id, producer_epoch):
            return InitResult(ErrorCode.producer_fenced)
        if meta.state.is_prepare:
            return InitResult(ErrorCode.concurrent_transactions)
        if meta.state == TxnState.ONGOING:
            # Fence the producer and abort its transaction; the client asks
            # again, and its retry bumps once more ("never returned to the user").
            error = await self._abort(meta, bump=True)
            return InitResult(error or ErrorCode.concurrent_transactions)
        changes = meta.init_changes(expected, self._allocate)
        if changes is None:
            return InitResult(ErrorCode.producer_fenced)
        # Even a retry's answer is written first: it counts only once durable.
        new = meta.to(TxnState.EMPTY, now, timeout_ms=timeout_ms, partitions=frozenset(),
                      start_ms=-1, **changes)
        error = await self._write(new)
        if error:
            return InitResult(error)
        log.info("%s: producer %d epoch %d", transactional_id, new.producer_id,
                 new.producer_epoch)
        return InitResult(NONE, new.producer_id, new.producer_epoch)

    # -- AddPartitionsToTxn, AddOffsetsToTxn --------------------------------

    async def add_partitions(self, transactional_id: str, producer_id: int,
                             producer_epoch: int, partitions: Iterable[Partition]) -> ErrorCode:
        error, meta = self._precheck(transactional_id, producer_id, producer_epoch)
        if error:
            return error
        if meta.state.is_prepare:
            return ErrorCode.concurrent_transactions
        wanted = frozenset(partitions)
        if meta.state == TxnState.ONGOING and wanted <= meta.partitions:
            return NONE
        now = self._now_ms()
        # The timeout clock starts with the transaction's first partition.
        start = meta.start_ms if meta.state == TxnState.ONGOING else now
        return await self._write(meta.to(TxnState.ONGOING, now, start_ms=start,
                                         partitions=meta.partitions | wanted))

    def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
               partitions: Iterable[Partition]) -> dict[Partition, ErrorCode]:
        """KIP-890 part 1: is each partition in the producer's ongoing
        transaction? (AddPartitionsToTxn v4 with VerifyOnly.)"""
        error = self._ownership_error(transactional_id)
        meta = self._txns.get(transactional_id)
        if not error:
            if meta is None or meta.producer_id != producer_id:
                error = ErrorCode.invalid_producer_id_mapping
            elif meta.producer_epoch != producer_epoch:
                error = ErrorCode.producer_fenced
            elif meta.state.is_prepare:
                error = ErrorCode.concurrent_transactions
        return {p: error or (NONE if meta.state == TxnState.ONGOING and p in meta.partitions
                             else ErrorCode.transaction_abortable)
                for p in partitions}

    # -- EndTxn (endTransaction) ------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int,
                      commit: bool) -> ErrorCode:
        error, meta = self._precheck(transactional_id, producer_id, producer_epoch)
        if error:
            return error
        same = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        if meta.state == TxnState.ONGOING:
            new = meta.to(same, self._now_ms())
            error = await self._write(new)
            if not error:
                self._spawn(self._complete(new, self._coordinator_epoch(transactional_id)))
            return error
        if meta.state == same:
            return ErrorCode.concurrent_transactions
        if meta.state == done:
            return NONE         # a retry of an EndTxn that succeeded
        return ErrorCode.invalid_txn_state

    async def _abort(self, meta: TxnMetadata, bump: bool) -> ErrorCode:
        """Abort an ongoing transaction for the coordinator's own reasons
        (fencing, timeout): with `bump`, at the next epoch, so the old
        producer's late writes and EndTxn are refused."""
        # prepareFenceProducerEpoch: no retry may name the fenced epoch.
        changes = dict(producer_epoch=meta.producer_epoch + 1,
                       last_producer_epoch=NO_EPOCH) if bump else {}
        new = meta.to(TxnState.PREPARE_ABORT, self._now_ms(), **changes)
        error = await self._write(new)
        if not error:
            self._spawn(self._complete(new, self._coordinator_epoch(meta.transactional_id)))
        return error

    async def _complete(self, meta: TxnMetadata, coordinator_epoch: int) -> None:
        """Markers into every partition, then Complete*, while this broker
        still coordinates the id at `coordinator_epoch` (a new coordinator
        finishes the job on load)."""
        transactional_id = meta.transactional_id

        def still() -> bool:
            return self._coordinator_epoch(transactional_id) == coordinator_epoch

        result = COMMIT if meta.state == TxnState.PREPARE_COMMIT else ABORT
        await self._markers.write(meta.producer_id, meta.producer_epoch, result,
                                  coordinator_epoch, sorted(meta.partitions), still)
        done = TxnState.COMPLETE_COMMIT if result == COMMIT else TxnState.COMPLETE_ABORT
        while still():
            if transactional_id not in self._pending and self._txns.get(transactional_id) == meta:
                error = await self._write(meta.to(done, self._now_ms(), partitions=frozenset()))
                if not error:
                    return
                # NOT_COORDINATOR is also a disk error's (_APPEND_ERRORS):
                # only `still()` says whether the id moved on.
                log.warning("%s: writing %s failed (%s); retrying", transactional_id,
                            done.kafka_name, error.name)
            elif self._txns.get(transactional_id) != meta:
                return
            await asyncio.sleep(_RETRY_S)

    async def _abort_expired(self) -> None:
        """TransactionCoordinator.abortTimedOutTransactions."""
        while self._owned:
            await asyncio.sleep(self.config.abort_interval_ms / 1000)
            now = self._now_ms()
            for meta in list(self._txns.values()):
                if meta.state == TxnState.ONGOING and meta.transactional_id not in self._pending \
                        and meta.start_ms + meta.timeout_ms < now:
                    log.info("%s: transaction of producer %d epoch %d timed out after %d ms; "
                             "aborting%s", meta.transactional_id, meta.producer_id,
                             meta.producer_epoch, meta.timeout_ms,
                             "" if self.config.bump_epoch_on_timeout else
                             " at the same epoch (bug switch txn-expiry-no-bump, KAFKA-6119)")
                    self._spawn(self._abort(meta, bump=self.config.bump_epoch_on_timeout))

    # -- introspection (KIP-664) ------------------------------------------

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TxnMetadata | None]:
        error = self._ownership_error(transactional_id)
        if error:
            return error, None
        meta = self._txns.get(transactional_id)
        return (NONE, meta) if meta else (ErrorCode.transactional_id_not_found, None)

    def list(self) -> list[TxnMetadata]:
        return [meta for meta in self._txns.values()
                if self.partition_of(meta.transactional_id) in self._owned]
