"""A transactional id's state at its coordinator, and its record in
`__transaction_state` (Kafka's TransactionMetadata and TransactionLog).

States and the transitions allowed into each (TransactionMetadata.scala,
TransactionState): the names are those DescribeTransactions and
ListTransactions report. Kafka's in-memory PrepareEpochFence is written
here as what it leads to, a PrepareAbort at the bumped epoch.

The record: key `int16 version 0, string transactional_id`; value v0
`int16 version, int64 producer_id, int16 producer_epoch, int32
timeout_ms, int8 state, [string topic, [int32 partition]], int64
last_update_ms, int64 start_ms` (TransactionLogValue v0). A tombstone
deletes the id.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

NO_EPOCH = -1
MAX_EPOCH = 32767 - 1       # Short.MaxValue - 1: past it a new producer id (KIP-360)


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def is_prepare(self) -> bool:
        return self in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT)

    @property
    def is_complete(self) -> bool:
        return self in (TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)

    @property
    def can_begin(self) -> bool:
        """A new transaction (or an epoch bump) may start from here."""
        return self in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)


_ALLOWED_FROM = {
    TxnState.EMPTY: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
    TxnState.ONGOING: {TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT,
                       TxnState.COMPLETE_ABORT},
    TxnState.PREPARE_COMMIT: {TxnState.ONGOING},
    TxnState.PREPARE_ABORT: {TxnState.ONGOING},
    TxnState.COMPLETE_COMMIT: {TxnState.PREPARE_COMMIT},
    TxnState.COMPLETE_ABORT: {TxnState.PREPARE_ABORT},
    TxnState.DEAD: {TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT},
}

Partition = tuple[str, int]


def by_topic(partitions: Iterable[Partition]) -> dict[str, list[int]]:
    """Partitions grouped as the protocol lists them: topic -> indexes, sorted."""
    topics: dict[str, list[int]] = {}
    for topic, index in sorted(partitions):
        topics.setdefault(topic, []).append(index)
    return topics


@dataclass(frozen=True)
class TxnMetadata:
    """One transactional id's durable state; every change is a new value,
    written before it counts."""
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[Partition] = frozenset()
    last_update_ms: int = -1
    start_ms: int = -1
    # The epoch before the producer's own last bump: an InitProducerId
    # retried after its answer was lost names it (KIP-360). A new producer
    # (an InitProducerId naming no epoch) and a fence set it to NO_EPOCH,
    # so a zombie naming its old epoch is fenced. With the producer id
    # before the last rotation, not persisted, as in Kafka's record v0.
    last_producer_epoch: int = NO_EPOCH
    previous_producer_id: int = -1

    def names_this_producer(self, producer_id: int, producer_epoch: int) -> bool:
        """May an InitProducerId naming this producer go on (Kafka's
        isValidProducerId)? Yes for an id just created, for the current
        producer id (its epoch is judged by `init_changes`), and for the id
        before a rotation named with its exhausted epoch (a retry)."""
        return (self.producer_epoch == NO_EPOCH or producer_id == self.producer_id
                or (producer_id == self.previous_producer_id and producer_epoch >= MAX_EPOCH))

    def init_changes(self, expected_epoch: int | None,
                     new_producer_id: Callable[[], int]) -> dict | None:
        """What InitProducerId changes from Empty or Complete*, or None when
        the producer naming `expected_epoch` is fenced
        (prepareIncrementProducerEpoch, prepareProducerIdRotation; KIP-360)."""
        if self.producer_epoch >= MAX_EPOCH and expected_epoch in (None, self.producer_epoch):
            return dict(producer_id=new_producer_id(), producer_epoch=0,
                        previous_producer_id=self.producer_id,
                        last_producer_epoch=(NO_EPOCH if expected_epoch is None
                                             else self.producer_epoch))
        if expected_epoch is None:      # a new producer: the old one is fenced
            return dict(producer_epoch=self.producer_epoch + 1, last_producer_epoch=NO_EPOCH)
        if self.producer_epoch == NO_EPOCH or expected_epoch == self.producer_epoch:
            return dict(producer_epoch=self.producer_epoch + 1,
                        last_producer_epoch=self.producer_epoch)
        if expected_epoch == self.last_producer_epoch:
            return {}                   # a retry of a bump whose answer was lost
        return None

    def to(self, state: TxnState, now_ms: int, **changes) -> TxnMetadata:
        if self.state not in _ALLOWED_FROM[state]:
            raise IllegalTransition(f"{self.transactional_id}: {self.state.kafka_name} -> "
                                    f"{state.kafka_name} is not a transition Kafka allows")
        return replace(self, state=state, last_update_ms=now_ms, **changes)


class IllegalTransition(RuntimeError):
    """A coordinator bug: a transition TransactionMetadata would refuse."""


_SHORT = struct.Struct(">h")
_VALUE_HEAD = struct.Struct(">hqhib")
_INT = struct.Struct(">i")
_TIMES = struct.Struct(">qq")


def _string(text: str) -> bytes:
    raw = text.encode()
    return _SHORT.pack(len(raw)) + raw


def _read_string(data: bytes, at: int) -> tuple[str, int]:
    (size,) = _SHORT.unpack_from(data, at)
    at += 2
    return data[at:at + size].decode(), at + size


def encode(meta: TxnMetadata) -> tuple[bytes, bytes]:
    key = _SHORT.pack(0) + _string(meta.transactional_id)
    topics = by_topic(meta.partitions)
    value = [_VALUE_HEAD.pack(0, meta.producer_id, meta.producer_epoch, meta.timeout_ms,
                              meta.state), _INT.pack(len(topics))]
    for topic, indexes in topics.items():
        value += [_string(topic), _INT.pack(len(indexes)), *(_INT.pack(i) for i in indexes)]
    value.append(_TIMES.pack(meta.last_update_ms, meta.start_ms))
    return key, b"".join(value)


def tombstone(transactional_id: str) -> tuple[bytes, None]:
    return _SHORT.pack(0) + _string(transactional_id), None


def decode(key: bytes, value: bytes | None) -> tuple[str, TxnMetadata | None]:
    transactional_id, _ = _read_string(key, 2)
    if value is None:
        return transactional_id, None
    _, producer_id, epoch, timeout_ms, state = _VALUE_HEAD.unpack_from(value)
    at = _VALUE_HEAD.size
    (count,) = _INT.unpack_from(value, at)
    at += 4
    partitions = set()
    for _ in range(max(count, 0)):
        topic, at = _read_string(value, at)
        (n,) = _INT.unpack_from(value, at)
        at += 4
        partitions.update((topic, i) for i in struct.unpack_from(f">{n}i", value, at))
        at += 4 * n
    last_update_ms, start_ms = _TIMES.unpack_from(value, at)
    return transactional_id, TxnMetadata(
        transactional_id, producer_id, epoch, timeout_ms, TxnState(state),
        frozenset(partitions), last_update_ms, start_ms)


def replay(records: Iterable[tuple[bytes, bytes | None]]) -> dict[str, TxnMetadata]:
    """The ids of one `__transaction_state` partition after its records, in
    log order (TransactionStateManager.loadTransactionMetadata)."""
    state: dict[str, TxnMetadata] = {}
    for key, value in records:
        transactional_id, meta = decode(key, value)
        if meta is None:
            state.pop(transactional_id, None)
        else:
            state[transactional_id] = meta
    return state

