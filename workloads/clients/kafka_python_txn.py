"""A transactional producer over kafka-python (KafkaProducer with a
transactional_id; KIP-98, kafka-python 2.1 and later).

One operation is one transaction: begin, send every record and wait for
each, then commit or abort. What the history can claim (docs/history.md),
as for the other libraries (confluent_txn.py, java_txn.py):
- `ok`: commit_transaction() returned — the transaction is committed;
- `fail`: certainly not committed. The worker chose to abort, or the
  producer could not begin (it is then spent, unless its init only timed
  out), or a send failed and the abort was asked for: no EndTxn(commit)
  was ever sent;
- `info`: unknown — commit_transaction() raised or did not return. Its
  errors do not say whether EndTxn(commit) was sent before the failure
  (the client keeps that in its transaction manager's state), so none of
  them is taken as certain.

kafka-python's commit, abort and init wait on a result without a bound of
their own once the request is queued (TransactionManager.TransactionalRequestResult),
so each runs bounded (base.within); one that does not return leaves the
producer to its thread (`usable` false, the outcome `info`). After an
`info`, or an abort that failed, the worker makes a new producer with the
same transactional_id, whose init_transactions fences what this one left open.
"""

from __future__ import annotations

import time
from typing import Callable

from kafka import KafkaProducer
from kafka import errors as Errors

from workloads.clients.base import (FAIL, INFO, OK, ClientSettings, Consumed, Outcome,
                                    Stall, encode_value, stalled_parts, txn_value, within)
from workloads.clients.kafka_python import bounded_config, common_config, describe

_ABORT_S = 10.0     # how long an abort after a failed send may take
_CLOSE_S = 5.0
_GRACE_S = 5.0      # past the operation's own deadline, for the client's own timeouts


class _Stuck(Exception):
    """A client call that did not return within its bound."""


class KafkaPythonTransactionalProducer:
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str,
                 transactional_id: str, transaction_timeout_ms: int):
        self._config = {
            **common_config(bootstrap, settings, client_id),
            "transactional_id": transactional_id,
            "transaction_timeout_ms": transaction_timeout_ms,
            # What transactions require (KIP-98): the idempotent producer.
            "enable_idempotence": True, "acks": "all",
            "max_in_flight_requests_per_connection": min(settings.max_in_flight, 5),
            "linger_ms": settings.linger_ms, "batch_size": settings.batch_size,
            "delivery_timeout_ms": settings.delivery_timeout_ms,
            # init_transactions and send() block at most this long.
            "max_block_ms": settings.max_block_ms,
        }
        self._max_block = settings.max_block_ms / 1000
        self._producer: KafkaProducer | None = None
        self._initialised = False
        self._abandoned = False
        self._closed = False
        self.usable = True

    def transaction(self, sends: list[tuple[str, int, int]], commit: bool,
                    timeout: float, clock: Callable[[], int],
                    stall: Stall | None = None, consumed: Consumed | None = None) -> Outcome:
        if consumed is not None:    # QueueConfig.problems() refuses --pipeline here first
            raise ValueError("kafka-python's transactions do not commit consumed offsets "
                             "here yet: run --pipeline with confluent-kafka")
        if not self.usable:
            raise RuntimeError("this transactional producer is spent: close it and make a new "
                               "one with the same transactional_id")
        try:
            return self._transaction(sends, commit, timeout, clock, stall)
        except _Stuck as e:
            self.usable, self._abandoned = False, True
            return Outcome(INFO, txn_value(sends, None, None), f"{e}; producer abandoned")

    def _transaction(self, sends, commit, timeout, clock, stall) -> Outcome:
        deadline = time.monotonic() + timeout
        offsets: list[int | None] = [None] * len(sends)
        try:
            if self._producer is None:
                self._producer = KafkaProducer(**bounded_config(self._config, timeout))
            if not self._initialised:
                # Bounded by max_block_ms; retried by the next call after a timeout.
                self._bounded(self._producer.init_transactions, self._max_block + _GRACE_S)
                self._initialised = True
            self._producer.begin_transaction()
        except Errors.KafkaError as e:
            # Nothing was sent: certainly not committed. An init that timed
            # out goes on waiting when asked again (KafkaProducer.init_transactions);
            # after any other error whether the client can go on is its
            # transaction manager's secret (a fatal error refuses every
            # later init), so a new producer takes over.
            self.usable = isinstance(e, Errors.KafkaTimeoutError) and not self._initialised
            return Outcome(FAIL, txn_value(sends, None, None), describe(e))
        for indexes, deadline in stalled_parts(len(sends), stall, deadline):
            futures = []
            try:
                for i in indexes:
                    topic, partition, value = sends[i]
                    futures.append((i, self._producer.send(topic, encode_value(value),
                                                           partition=partition)))
            except (Errors.KafkaError, ValueError) as e:
                return self._abort(sends, f"a send was refused: {describe(e)}")
            for i, future in futures:
                try:
                    offsets[i] = future.get(timeout=max(0.0, deadline - time.monotonic())).offset
                except Errors.KafkaError as e:
                    return self._abort(sends, describe(e, f"no acknowledgement within {timeout} s"))
        if not commit:
            return self._abort(sends, "by choice")
        committing = clock()
        try:
            self._bounded(self._producer.commit_transaction,
                          max(0.1, deadline - time.monotonic()) + _GRACE_S)
        except Errors.KafkaError as e:
            self.usable = False
            return Outcome(INFO, txn_value(sends, offsets, committing), describe(e))
        return Outcome(OK, txn_value(sends, offsets, committing))

    def _abort(self, sends, reason: str) -> Outcome:
        """Abort. Whatever the abort's own fate, the transaction was never
        asked to commit: `fail`."""
        try:
            self._bounded(self._producer.abort_transaction, _ABORT_S)
        except Errors.KafkaError:
            self.usable = False
        except _Stuck:
            self.usable, self._abandoned = False, True
        return Outcome(FAIL, txn_value(sends, None, None), f"ABORTED: {reason}")

    @staticmethod
    def _bounded(call: Callable[[], object], bound: float) -> None:
        returned, _ = within(call, bound)
        if not returned:
            raise _Stuck(f"the client did not return within {bound:.0f} s")

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        producer, self._producer = self._producer, None
        if producer is None or self._abandoned:     # its thread may still be in the client
            return
        # An open transaction is left to the coordinator's timeout or to the
        # next producer of this transactional_id, which fences it.
        try:
            within(lambda: producer.close(timeout=_CLOSE_S), _CLOSE_S + _GRACE_S)
        except Errors.KafkaError:
            pass        # records still in flight: they belong to an aborted or fenced transaction
