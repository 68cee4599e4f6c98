"""A transactional producer over Apache Kafka's Java client (KafkaProducer
with a transactional.id; KIP-98), in a JVM of its own as every Java
adapter is (java.py).

One operation is one transaction: begin, send every record and wait for
each, then commit or abort. What the history can claim (docs/history.md),
as for confluent-kafka (confluent_txn.py):
- `ok`: commitTransaction() returned — the transaction is committed;
- `fail`: certainly not committed. The worker chose to abort; or a send
  failed, or the producer refused the commit because of an earlier error
  (an abortable state: KafkaProducer checks it before it sends EndTxn),
  and the abort was made; or the JVM went away before the commit was
  asked for. No EndTxn(commit) was ever sent;
- `info`: unknown — the commit timed out (commitTransaction retried until
  the operation's deadline, as the Javadoc allows), hit a fatal error
  (fenced by a newer producer of the same transactional.id) or lost its
  JVM after it may have reached the coordinator.

After a fatal error the producer cannot go on (`usable` is false): the
worker makes a new one with the same transactional.id, whose
initTransactions fences whatever the old one left open.
"""

from __future__ import annotations

import time
from typing import Callable

from py4j.protocol import Py4JJavaError

from workloads.clients.base import (FAIL, INFO, OK, ClientSettings, Consumed, Outcome,
                                    Stall, encode_value, stalled_parts, txn_value)
from workloads.clients.java import (GRACE, JavaError, JvmClient, describe,
                                    producer_config)
from workloads.clients.jvm import JvmGone, JvmStartError

_TIMED_OUT = "REQUEST_TIMED_OUT"


class JavaTransactionalProducer(JvmClient):
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str,
                 transactional_id: str, transaction_timeout_ms: int):
        super().__init__({**producer_config(bootstrap, settings, client_id),
                          "transactional.id": transactional_id,
                          "transaction.timeout.ms": transaction_timeout_ms})
        self._max_block = settings.max_block_ms / 1000
        self._initialised = False
        self.usable = True

    def _make(self, c):
        return c.KafkaProducer(self._properties(c, self._config))

    def transaction(self, sends: list[tuple[str, int, int]], commit: bool,
                    timeout: float, clock: Callable[[], int],
                    stall: Stall | None = None, consumed: Consumed | None = None) -> Outcome:
        if consumed is not None:    # QueueConfig.problems() refuses --pipeline here first
            raise ValueError("the Java client's transactions do not commit consumed offsets "
                             "here yet: run --pipeline with confluent-kafka")
        if not self.usable:
            raise RuntimeError("this transactional producer had a fatal error: close it and "
                               "make a new one with the same transactional.id")
        offsets: list[int | None] = [None] * len(sends)
        try:
            self._run(self._begin, self._max_block + GRACE)
        except (JavaError, JvmStartError, JvmGone) as e:
            # Nothing of this transaction was sent: certainly not committed.
            self.usable = isinstance(e, JavaError) and not _fatal(str(e))
            return Outcome(FAIL, txn_value(sends, None, None), str(e))
        deadline = time.monotonic() + timeout
        for indexes, deadline in stalled_parts(len(sends), stall, deadline):
            try:
                refused = self._run(
                    lambda c, p, indexes=indexes: _send(c, p, sends, indexes, offsets, deadline),
                    max(0.0, deadline - time.monotonic()) + GRACE)
            except (JavaError, JvmStartError, JvmGone) as e:
                refused = str(e)
            if refused:
                return self._abort(sends, f"a send was refused: {refused}")
        if not commit:
            return self._abort(sends, "by choice")
        committing = clock()
        try:
            self._run(lambda c, p: _commit(c, p, deadline),
                      max(0.0, deadline - time.monotonic()) + self._max_block + GRACE)
            return Outcome(OK, txn_value(sends, offsets, committing))
        except (JvmStartError, JvmGone) as e:
            self.usable = False
            return Outcome(INFO, txn_value(sends, offsets, committing), str(e))
        except JavaError as e:
            error = str(e)
        if not error.startswith(_TIMED_OUT) and self._aborted():
            return Outcome(FAIL, txn_value(sends, None, committing), f"ABORTED: {error}")
        self.usable = False
        return Outcome(INFO, txn_value(sends, offsets, committing), error)

    def _begin(self, c, producer) -> None:
        if not self._initialised:
            producer.initTransactions()     # fences the id's previous producer
            self._initialised = True
        producer.beginTransaction()

    def _abort(self, sends, reason: str) -> Outcome:
        """Abort. Whatever the abort's own fate, the transaction was never
        asked to commit: `fail`."""
        self._aborted()
        return Outcome(FAIL, txn_value(sends, None, None), f"ABORTED: {reason}")

    def _aborted(self) -> bool:
        """abortTransaction(): whether it was made. A producer that cannot
        abort (fenced, its commit in doubt, its JVM gone) is spent."""
        try:
            self._run(lambda c, producer: producer.abortTransaction(), self._max_block + GRACE)
            return True
        except (JavaError, JvmStartError, JvmGone):
            self.usable = False
            return False

    def close(self) -> None:
        # An open transaction is the next producer's to fence: no waiting.
        self._close(lambda c, producer: producer.close(c.Duration.ZERO), 0)


def _send(c, producer, sends, indexes, offsets, deadline: float) -> str | None:
    """Send the records at `indexes` and wait for each; the first refusal
    (its error), or None when every one was acknowledged."""
    futures = []
    for i in indexes:
        topic, partition, value = sends[i]
        try:
            futures.append((i, producer.send(c.ProducerRecord(topic, partition, None,
                                                              encode_value(value)))))
        except Py4JJavaError as e:
            return describe(c, e.java_exception)
    for i, future in futures:
        wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
        try:
            offsets[i] = future.get(wait_ms, c.MILLISECONDS).offset()
        except Py4JJavaError as e:
            return describe(c, e.java_exception, "no acknowledgement within the operation's "
                                                 "timeout")
    return None


def _commit(c, producer, deadline: float) -> None:
    """commitTransaction(), again after each timeout until `deadline` (a
    retried call awaits the same commit: KafkaProducer's Javadoc)."""
    while True:
        try:
            producer.commitTransaction()
            return
        except Py4JJavaError as e:
            if describe(c, e.java_exception).startswith(_TIMED_OUT) \
                    and time.monotonic() < deadline:
                continue
            raise


def _fatal(error: str) -> bool:
    return error.split(":", 1)[0] in ("PRODUCER_FENCED", "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                                      "UNSUPPORTED_VERSION", "INVALID_PRODUCER_EPOCH")
