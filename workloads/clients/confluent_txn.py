"""A transactional producer over confluent-kafka (librdkafka; KIP-98).

One operation is one transaction: begin, produce every record, flush, then
commit or abort. What the history can claim (docs/history.md):
- `ok`: commit_transaction() returned — the transaction is committed;
- `fail`: certainly not committed. The worker chose to abort, or a send or
  the commit failed with an error that requires an abort
  (txn_requires_abort) and the abort was made, or a send failed fatally
  (the producer fenced half-way, as a stalled transaction is: `stall`)
  before the commit was asked for. No EndTxn(commit) was ever sent, so no
  correct broker can commit it;
- `info`: unknown — the commit timed out or hit a fatal error (fenced by a
  newer producer of the same transactional.id, an epoch problem) after it
  may have reached the coordinator.

After a fatal error the producer cannot go on (`usable` is false): the
worker makes a new one with the same transactional.id, whose
init_transactions fences any transaction the old one left open.
"""

from __future__ import annotations

import time
import warnings
from typing import Callable

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

from workloads.clients.base import (FAIL, INFO, OK, ClientSettings, Consumed, Outcome,
                                    Stall, encode_value, stalled_parts, txn_value, within)
from workloads.clients.confluent import describe, producer_config

# A fenced producer's close() tries to abort and warns that it cannot: the
# fence is in the history already. (A filter, not catch_warnings: the
# workers are threads.)
warnings.filterwarnings("ignore", "Producer abort_transaction failed during close",
                        RuntimeWarning)


# How long close() tries to abort an open transaction (none open: at once).
_CLOSE_ABORT_S = 5.0
_ABORT_S = 10.0     # how long an abort after a failed send or commit may take
_GRACE_S = 5.0


class ConfluentTransactionalProducer:
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str,
                 transactional_id: str, transaction_timeout_ms: int):
        conf = producer_config(bootstrap, settings, client_id)
        self._producer = Producer({
            **conf,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": transaction_timeout_ms,
            # librdkafka lowers these two to the transaction timeout when
            # they are not set, and refuses them set above it (a record or a
            # request outliving its transaction): a short timeout caps them.
            "message.timeout.ms": min(conf["message.timeout.ms"], transaction_timeout_ms),
            "socket.timeout.ms": min(conf["socket.timeout.ms"], transaction_timeout_ms),
        })
        self._initialised = False
        self._consumed: Consumed | None = None
        self._abandoned = False
        self.usable = True
        self._closed = False

    def transaction(self, sends: list[tuple[str, int, int]], commit: bool,
                    timeout: float, clock: Callable[[], int],
                    stall: Stall | None = None, consumed: Consumed | None = None) -> Outcome:
        """`clock`: the history's time, read as the commit is asked for
        (the completion's `committing`). With `stall`, the first sends are
        flushed, then the stall, then the rest: to partitions not yet in the
        transaction, so librdkafka sends AddPartitionsToTxn again. With
        `consumed`, its offsets join the transaction after the sends
        (AddOffsetsToTxn, then TxnOffsetCommit with the group metadata)."""
        self._consumed = consumed
        if consumed is not None:
            return self._bounded(lambda: self._transaction(sends, commit, timeout, clock),
                                 sends, timeout + _ABORT_S + _GRACE_S)
        return self._transaction(sends, commit, timeout, clock, stall)

    def _bounded(self, run: Callable[[], Outcome], sends, bound: float) -> Outcome:
        """`run` for at most `bound` seconds (base.within). A pipeline's
        transaction was seen to outlive every timeout it was given when the
        node leading both coordinators was killed as it began (librdkafka
        2.16). The producer is then left to its thread and never touched
        again (`usable` false; close drops it); the outcome is `info`,
        since the commit may have been sent."""
        returned, outcome = within(run, bound)
        if returned:
            return outcome
        self.usable, self._abandoned = False, True
        return Outcome(INFO, txn_value(sends, None, None, self._consumed),
                       f"the client did not return within {bound:.0f} s; producer abandoned")

    def _transaction(self, sends, commit, timeout, clock, stall=None) -> Outcome:
        if not self.usable:
            raise RuntimeError("this transactional producer had a fatal error: close it and "
                               "make a new one with the same transactional.id")
        deadline = time.monotonic() + timeout
        offsets: list[int | None] = [None] * len(sends)
        try:
            if not self._initialised:
                self._producer.init_transactions(timeout)
                self._initialised = True
            self._producer.begin_transaction()
        except KafkaException as e:
            # Nothing was sent: certainly not committed.
            return self._ended(FAIL, sends, None, e.args[0])
        problems: list[KafkaError] = []

        def delivered(i: int, err: KafkaError | None, msg) -> None:
            if err is not None:
                problems.append(err)
            else:
                offsets[i] = msg.offset()
        for indexes, deadline in stalled_parts(len(sends), stall, deadline):
            try:
                for i in indexes:
                    topic, partition, value = sends[i]
                    self._producer.produce(
                        topic, encode_value(value), partition=partition,
                        on_delivery=lambda err, msg, i=i: delivered(i, err, msg))
                left = self._producer.flush(max(0.0, deadline - time.monotonic()))
            except (BufferError, KafkaException) as e:
                return self._abort(sends, f"a send was refused: {e}")
            except SystemError as e:
                # flush() raises a fatal error (a fenced producer) and then runs
                # the delivery callbacks with it still set, so they fail
                # (confluent-kafka-python #865): the fatal error is the cause.
                if not isinstance(e.__cause__, KafkaException):
                    raise
                return self._abort(sends, f"a send was refused: {e.__cause__}")
            if problems or left:
                reason = describe(problems[0]) if problems else f"{left} record(s) undelivered"
                return self._abort(sends, reason)
        if (consumed := self._consumed) is not None:
            try:
                self._producer.send_offsets_to_transaction(
                    [TopicPartition(t, p, o) for t, p, o in consumed.offsets], consumed.metadata,
                    max(0.1, deadline - time.monotonic()))
            except KafkaException as e:
                # Before any EndTxn(commit): certainly not committed. A
                # zombie's generation is refused here (KIP-447).
                if e.args[0].fatal():
                    return self._ended(FAIL, sends, None, e.args[0])
                return self._abort(sends, f"the offsets were refused: {describe(e.args[0])}")
        if not commit:
            return self._abort(sends, "by choice")
        return self._commit(sends, offsets, deadline, clock())

    def _commit(self, sends, offsets, deadline, committing: int) -> Outcome:
        while True:
            try:
                self._producer.commit_transaction(max(0.1, deadline - time.monotonic()))
                return Outcome(OK, txn_value(sends, offsets, committing, self._consumed))
            except KafkaException as e:
                error = e.args[0]
                if error.txn_requires_abort():
                    # The commit was refused before it could happen (a send
                    # failed, the coordinator answered an abortable error).
                    return self._abort(sends, describe(error), committing)
                if error.retriable() and time.monotonic() < deadline:
                    continue    # librdkafka: call commit_transaction() again
                return self._ended(INFO, sends, offsets, error, committing)

    def _abort(self, sends, reason: str, committing: int | None = None) -> Outcome:
        """Abort. Whatever the abort's own fate, the transaction was never
        asked to commit: `fail`."""
        try:
            self._producer.abort_transaction(_ABORT_S)
        except KafkaException as e:
            self.usable = not e.args[0].fatal() and not e.args[0].retriable()
        return Outcome(FAIL, txn_value(sends, None, committing, self._consumed),
                       f"ABORTED: {reason}")

    def _ended(self, type_: str, sends, offsets, error: KafkaError,
               committing: int | None = None) -> Outcome:
        if error.fatal() or type_ == INFO:
            self.usable = False
        return Outcome(type_, txn_value(sends, offsets, committing, self._consumed),
                       describe(error))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._abandoned:         # its own thread may still be inside librdkafka
            self._producer = None
            return
        self._producer.purge()
        try:
            self._producer.abort_transaction(_CLOSE_ABORT_S)
        except KafkaException as e:
            if e.args[0].retriable():
                # The coordinator is out of reach and a transaction may be
                # open: close() would abort it again and wait without a
                # bound (confluent-kafka 2.16). Dropped, the handle is
                # destroyed at once; the next producer of this
                # transactional.id fences whatever it left open.
                self._producer = None
                return
        self._producer.close()

