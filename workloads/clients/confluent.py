"""Adapters over confluent-kafka (librdkafka).

librdkafka queues a produced record and reports its fate once, in a
delivery callback served by flush()/poll(); a consumer's rebalance
callbacks run inside consume(). A record with no report when send() gives
up may still be written later, so that send is `info` and the producer is
spent (the caller replaces it, as a new process — docs/history.md).
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import (OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, OFFSET_STORED,
                             Consumer, KafkaError, KafkaException, Producer, TopicPartition)

from history_analysis.history import schema as h
from workloads.clients.base import (FAIL, FAIL_UNLESS_RETRIED, INFO, OK, ClientSettings,
                                    ConsumedEpochs, end_at,
                                    Outcome, check_group, encode_value, offsets_value,
                                    partitions_value, read, rebalance, resolve, sends_outcome,
                                    verdict)
from workloads.clients.librdkafka_log import (CONSUMER_DEBUG, LIBRDKAFKA_LOG, PositionResets,
                                              Rewinds, consumer_log)

log = logging.getLogger("workloads.clients")

POLL_SLICE = 0.1  # s
LEAVE_WAIT = 3.0  # s a closing group member polls for its revocation (ConfluentConsumer.close)

E = KafkaError
# Error code -> FAIL (certainly not applied) or INFO. Codes not listed are INFO.
ERRORS: dict[int, str] = {
    # Refused by the client before anything was sent: bad arguments or
    # configuration, a partition or topic missing from the metadata.
    E._INVALID_ARG: FAIL, E._INVALID_TYPE: FAIL, E.INVALID_CONFIG: FAIL,
    E._UNKNOWN_PARTITION: FAIL, E._UNKNOWN_TOPIC: FAIL, E.INVALID_REQUIRED_ACKS: FAIL,
    E.TOPIC_EXCEPTION: FAIL,
    # Authentication and authorization: the broker refused the whole request.
    E._AUTHENTICATION: FAIL, E.SASL_AUTHENTICATION_FAILED: FAIL,
    E.TOPIC_AUTHORIZATION_FAILED: FAIL, E.GROUP_AUTHORIZATION_FAILED: FAIL,
    E.CLUSTER_AUTHORIZATION_FAILED: FAIL, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED: FAIL,
    # The topic does not exist. librdkafka retries UNKNOWN_TOPIC_OR_PART while
    # the topic is in its metadata and fails a record with it only once the
    # cluster says the topic is missing (after topic.metadata.propagation.max.ms).
    E.UNKNOWN_TOPIC_OR_PART: FAIL,
    # The broker's record validation refused the batch before the append
    # (LogValidator): too large, invalid, bad timestamp. These are not retried.
    E.MSG_SIZE_TOO_LARGE: FAIL, E.RECORD_LIST_TOO_LARGE: FAIL, E.INVALID_MSG_SIZE: FAIL,
    E.INVALID_RECORD: FAIL, E.INVALID_TIMESTAMP: FAIL,
    # Refused before the append, but retriable in Kafka (CorruptRecordException,
    # NotEnoughReplicasException): with retries an earlier attempt of the same
    # record may have timed out after its append.
    E.INVALID_MSG: FAIL_UNLESS_RETRIED, E.NOT_ENOUGH_REPLICAS: FAIL_UNLESS_RETRIED,
    # Group fencing and refused commits: the coordinator did not store the
    # offsets of a member outside the current generation (KIP-345 static
    # members: FENCED_INSTANCE_ID; KIP-848 member epochs) or a bad commit.
    E.REBALANCE_IN_PROGRESS: FAIL, E.ILLEGAL_GENERATION: FAIL, E.UNKNOWN_MEMBER_ID: FAIL,
    E.FENCED_INSTANCE_ID: FAIL, E.STALE_MEMBER_EPOCH: FAIL, E.FENCED_MEMBER_EPOCH: FAIL,
    E.OFFSET_METADATA_TOO_LARGE: FAIL, E.INVALID_COMMIT_OFFSET_SIZE: FAIL,
    # -- indefinite, listed to say so --
    # Timeouts: the request may have been applied and only its answer lost.
    E._MSG_TIMED_OUT: INFO, E._TIMED_OUT: INFO, E.REQUEST_TIMED_OUT: INFO,
    E._TIMED_OUT_QUEUE: INFO,
    # The connection went away with the request in flight.
    E._TRANSPORT: INFO, E._ALL_BROKERS_DOWN: INFO, E.NETWORK_EXCEPTION: INFO, E._RESOLVE: INFO,
    # Leadership or replication trouble. librdkafka retries these, so one that
    # ends a record means the retries ran out: an earlier attempt may have
    # landed. NOT_ENOUGH_REPLICAS_AFTER_APPEND: appended, just not replicated.
    E.NOT_LEADER_FOR_PARTITION: INFO, E.LEADER_NOT_AVAILABLE: INFO,
    E.FENCED_LEADER_EPOCH: INFO, E.NOT_ENOUGH_REPLICAS_AFTER_APPEND: INFO,
    E.KAFKA_STORAGE_ERROR: INFO,
    # The coordinator moved or is loading: a commit in flight may have landed.
    E.NOT_COORDINATOR: INFO, E.COORDINATOR_NOT_AVAILABLE: INFO,
    E.COORDINATOR_LOAD_IN_PROGRESS: INFO, E._WAIT_COORD: INFO,
    # Idempotent producer state lost: librdkafka raises a fatal error and stops;
    # its records in flight have an unknown fate.
    E._FATAL: INFO, E.OUT_OF_ORDER_SEQUENCE_NUMBER: INFO, E.UNKNOWN_PRODUCER_ID: INFO,
    E.INVALID_PRODUCER_EPOCH: INFO, E._GAPLESS_GUARANTEE: INFO,
}


def classify(error: KafkaError, retries: int | None = None) -> str:
    """FAIL or INFO for a librdkafka error seen by an operation made with `retries`."""
    if error.fatal():
        return INFO  # a fatal error stops the client whatever the code
    return resolve(ERRORS.get(error.code(), INFO), retries)


def describe(error: KafkaError) -> str:
    return f"{error.name()}: {error.str()}"


def _common(bootstrap: str, settings: ClientSettings, client_id: str) -> dict:
    return {
        "bootstrap.servers": bootstrap, "client.id": client_id,
        # Kafka's request.timeout.ms bounds every request; librdkafka's
        # request.timeout.ms is only the produce ack timeout, socket.timeout.ms
        # the one for all other requests.
        "socket.timeout.ms": settings.request_timeout_ms,
        "retry.backoff.ms": settings.retry_backoff_ms,
        "reconnect.backoff.ms": settings.reconnect_backoff_ms,
        "reconnect.backoff.max.ms": settings.reconnect_backoff_max_ms,
        # librdkafka's own log lines (a connection refused by a killed
        # broker, ...) go through Python logging, into the run's log
        # rather than onto the terminal.
        "logger": LIBRDKAFKA_LOG,
    }


def producer_config(bootstrap: str, settings: ClientSettings, client_id: str) -> dict:
    """librdkafka's names for a producer's settings (the transactional
    producer's too, confluent_txn.py)."""
    conf = {
        **_common(bootstrap, settings, client_id),
        "acks": settings.acks,
        "enable.idempotence": settings.idempotence,
        "max.in.flight.requests.per.connection": settings.max_in_flight,
        "linger.ms": settings.linger_ms,
        # A record larger than batch.size still goes, in a batch of its own.
        "batch.size": settings.batch_size,
        "message.timeout.ms": settings.delivery_timeout_ms,  # = delivery.timeout.ms
        "request.timeout.ms": settings.request_timeout_ms,
        # produce() never blocks, so Kafka's max.block.ms has no twin; this
        # is how long a record waits for its topic to appear in the
        # metadata before failing with UNKNOWN_TOPIC_OR_PART (default 30 s,
        # longer than a delivery timeout: the record would time out, `info`).
        "topic.metadata.propagation.max.ms": settings.max_block_ms,
    }
    if settings.retries is not None:
        conf["retries"] = settings.retries
    return conf


class ConfluentProducer:
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str):
        self._retries = settings.retries
        conf = producer_config(bootstrap, settings, client_id)
        self._producer = Producer(conf)
        self._spent = False
        self._closed = False

    def send(self, sends: list[tuple[str, int, int]], timeout: float) -> Outcome:
        if self._spent:
            raise RuntimeError("this producer had an indeterminate send: records may still be "
                               "delivered; close it and make a new one (a new process)")
        offsets: list[int | None] = [None] * len(sends)
        errors: list[tuple[str, str] | None] = [None] * len(sends)
        reported = [False] * len(sends)

        def delivered(i: int, err: KafkaError | None, msg) -> None:
            reported[i] = True
            if err is not None:
                errors[i] = (classify(err, self._retries), describe(err))
            elif msg.offset() is not None and msg.offset() >= 0:
                offsets[i] = msg.offset()  # acks=0: offset() is None (no answer to read it from)

        queued = 0
        for i, (topic, partition, value) in enumerate(sends):
            try:
                self._producer.produce(topic, encode_value(value), partition=partition,
                                       on_delivery=lambda err, msg, i=i: delivered(i, err, msg))
            except (BufferError, KafkaException) as e:
                # Refused by produce() itself: this record and the ones after
                # it never entered the queue.
                error = (f"_QUEUE_FULL: {e}" if isinstance(e, BufferError)
                         else describe(e.args[0]))
                errors[i:] = [(FAIL, error)] * (len(sends) - i)
                break
            queued += 1
        self._producer.flush(timeout)
        for i in range(queued):
            if not reported[i]:
                errors[i] = (INFO, f"_TIMED_OUT: no delivery report within {timeout} s")
        outcome = sends_outcome(sends, offsets, errors)
        self._spent = outcome.type == INFO
        return outcome

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            # Records still queued or in flight belong to an `info` send
            # already recorded: purge them rather than let close() flush them.
            self._producer.purge()
            self._producer.close()


class ConfluentConsumer:
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str,
                 group: str | None):
        self._group = group
        self._rebalances: list[dict] = []
        self._lock = threading.Lock()
        self._closed = False
        self._client_id = client_id
        self._commit_in_flight: threading.Thread | None = None
        self._subscribed = False
        self._commit_timeout = settings.default_api_timeout_ms / 1000
        self._epochs = ConsumedEpochs()
        resets = PositionResets()
        self._rewinds, self._held = Rewinds(resets), []
        self._consumer = Consumer({
            **_common(bootstrap, settings, client_id),
            # The positions librdkafka restarts by itself (librdkafka_log.py).
            "debug": CONSUMER_DEBUG, "logger": consumer_log(resets),
            # librdkafka insists on a group.id; an assign-only consumer gets
            # one of its own, never committed to (commit/committed refuse).
            "group.id": group if group is not None else f"{client_id}-assign-only",
            "enable.auto.commit": False,
            "auto.offset.reset": settings.auto_offset_reset,
            "isolation.level": settings.isolation_level,
            "enable.partition.eof": False,
            "session.timeout.ms": settings.session_timeout_ms,
            "heartbeat.interval.ms": settings.heartbeat_interval_ms,
            "max.poll.interval.ms": settings.max_poll_interval_ms,
            "fetch.wait.max.ms": settings.fetch_max_wait_ms,
        })

    def _check_usable(self) -> None:
        if self._commit_in_flight is not None:
            # Observed: while a commit waits for its coordinator, consume(),
            # committed() and get_watermark_offsets() on the same consumer
            # block too, whatever their timeouts.
            raise RuntimeError("this consumer had an unanswered commit and blocks every call "
                               "until it is answered: close it and make a new one")

    def assign(self, partitions: list[tuple[str, int]], seek_to_beginning: bool) -> Outcome:
        self._check_usable()
        value = h.invocation("assign", partitions=partitions_value(partitions),
                             seek_to_beginning=seek_to_beginning)
        # OFFSET_STORED: the group's committed offset, else auto.offset.reset.
        start = OFFSET_BEGINNING if seek_to_beginning else OFFSET_STORED
        try:
            self._consumer.assign([TopicPartition(t, p, start) for t, p in partitions])
        except KafkaException as e:  # local: nothing reached a broker
            return Outcome(FAIL, value, describe(e.args[0]))
        return Outcome(OK, value)

    def subscribe(self, group: str, topics: list[str]) -> Outcome:
        self._check_usable()
        check_group(self._group, group)
        value = h.invocation("subscribe", group=group, topics=list(topics))

        def recorder(kind: str):
            def record(consumer, partitions) -> None:
                if not partitions:
                    return  # nothing changed hands
                with self._lock:
                    self._rebalances.append(
                        rebalance(kind, group, [(tp.topic, tp.partition) for tp in partitions]))
            return record
        # Without a call to assign() in on_assign, confluent-kafka assigns
        # the partitions itself after the callback returns.
        try:
            self._consumer.subscribe(list(topics), on_assign=recorder("assigned"),
                                     on_revoke=recorder("revoked"), on_lost=recorder("lost"))
        except KafkaException as e:
            return Outcome(FAIL, value, describe(e.args[0]))
        self._subscribed = True
        return Outcome(OK, value)

    def poll(self, timeout: float, max_records: int = 500) -> Outcome:
        self._check_usable()
        reads, self._held = self._held, []       # cut from the last poll at a client's reset
        fatal: str | None = None
        deadline = time.monotonic() + timeout
        # consume() returns only when it has num_messages or its timeout has
        # passed; Kafka's poll() returns as soon as there are records. Short
        # slices give that: stop at the first slice that read something.
        while not reads and fatal is None:
            remaining = deadline - time.monotonic()
            try:
                messages = self._consumer.consume(num_messages=max_records,
                                                  timeout=max(0.0, min(remaining, POLL_SLICE)))
            except KafkaException as e:
                messages, fatal = [], describe(e.args[0])
            for msg in messages:
                err = msg.error()
                if err is None:
                    epoch = msg.leader_epoch()
                    reads.append(read(msg.topic(), msg.partition(), msg.offset(), msg.value(),
                                      epoch))
                    self._epochs.read(msg.topic(), msg.partition(), msg.offset(), epoch)
                elif err.fatal():
                    fatal = fatal or describe(err)
                elif err.code() != E._PARTITION_EOF:
                    # librdkafka: consumer errors are informational, the client
                    # recovers by itself (a broker down, a topic not yet known).
                    log.info("consumer event (not an error of the poll): %s", describe(err))
            if remaining <= POLL_SLICE:
                break
        with self._lock:
            rebalances, self._rebalances = self._rebalances, []
        moved = {(p["topic"], p["partition"]) for r in rebalances for p in r["partitions"]}
        reads, restarted, self._held = self._rewinds.place(reads, moved)
        rebalances += [rebalance("reset", self._group, [tp]) for tp in restarted]
        value = h.completion("poll", reads=reads, rebalances=rebalances)
        return Outcome(INFO, value, fatal) if fatal else Outcome(OK, value)

    def commit(self, group: str, offsets: list[tuple[str, int, int]]) -> Outcome:
        self._check_usable()
        check_group(self._group, group)
        value = h.invocation("commit", group=group, offsets=offsets_value(offsets))
        # librdkafka's synchronous commit has no timeout: like the Java
        # commitSync() of its time it retries until the coordinator answers
        # (confluent-kafka-python#260) — measured: 46 s under a 45 s pause.
        # So it runs on a thread of its own, waited for default_api_timeout_ms.
        answer: list = []

        def run() -> None:
            try:
                answer.append(self._consumer.commit(
                    offsets=[TopicPartition(t, p, o, leader_epoch=self._epochs.for_commit(t, p, o))
                             for t, p, o in offsets],
                    asynchronous=False))
            except KafkaException as e:
                answer.append(e)
        worker = threading.Thread(target=run, name=f"commit-{group}", daemon=True)
        worker.start()
        worker.join(self._commit_timeout)
        if not answer:
            self._commit_in_flight = worker
            return Outcome(INFO, value, f"_TIMED_OUT: no OffsetCommit answer within "
                                        f"{self._commit_timeout} s")
        if isinstance(answer[0], KafkaException):
            error = answer[0].args[0]
            return Outcome(classify(error), value, describe(error))
        return verdict(value, [None if tp.error is None
                               else (classify(tp.error), describe(tp.error))
                               for tp in answer[0]])

    def committed(self, group: str, partitions: list[tuple[str, int]],
                  timeout: float) -> Outcome:
        self._check_usable()
        check_group(self._group, group)
        unknown = h.completion("committed", group=group, offsets=offsets_value(
            ((t, p, None) for t, p in partitions), h.OFFSET_FOUND))
        try:
            result = self._consumer.committed([TopicPartition(t, p) for t, p in partitions],
                                              timeout=timeout)
        except KafkaException as e:  # a read: a failure changes nothing
            return Outcome(FAIL, unknown, describe(e.args[0]))
        for tp in result:
            if tp.error is not None:
                return Outcome(FAIL, unknown, describe(tp.error))
        return Outcome(OK, h.completion("committed", group=group, offsets=offsets_value(
            ((tp.topic, tp.partition, None if tp.offset == OFFSET_INVALID else tp.offset)
             for tp in result), h.OFFSET_FOUND)))

    def end_offsets(self, partitions: list[tuple[str, int]], timeout: float) -> Outcome:
        self._check_usable()
        asked = h.invocation("end-offsets", partitions=partitions_value(partitions))
        try:
            # ListOffsets(latest) for every partition at once: the high
            # watermark now, and the epoch of the leader that answered
            # (ListOffsets v4+, KIP-320), which stale-end's epoch rule needs.
            answers = self._consumer.offsets_for_times(
                [TopicPartition(t, p, OFFSET_END) for t, p in partitions], timeout=timeout)
        except KafkaException as e:
            return Outcome(FAIL, asked, describe(e.args[0]))
        for tp in answers:
            if tp.error is not None:
                return Outcome(FAIL, asked, describe(tp.error))
            if tp.offset < 0:
                return Outcome(FAIL, asked, f"no end of {tp.topic}-{tp.partition} in the answer")
        return Outcome(OK, h.completion("end-offsets", offsets=[
            end_at(tp.topic, tp.partition, tp.offset, tp.leader_epoch) for tp in answers]))

    def group_metadata(self) -> object:
        return self._consumer.consumer_group_metadata()

    def rewind(self, positions: list[tuple[str, int, int | None]]) -> None:
        self._check_usable()
        for t, p, offset in positions:     # librdkafka drops what it fetched beyond
            self._consumer.seek(TopicPartition(t, p, OFFSET_BEGINNING if offset is None
                                               else offset))
        moved = {(t, p) for t, p, _ in positions}
        self._held = [r for r in self._held if (r["topic"], r["partition"]) not in moved]
        with self._lock:
            self._rebalances += [rebalance("reset", self._group, [tp]) for tp in sorted(moved)]

    def positions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        found = self._consumer.position([TopicPartition(t, p) for t, p in partitions])
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0}

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self._commit_in_flight is not None and self._commit_in_flight.is_alive():
            # close() waits for the unanswered commit; let it finish (it
            # leaves the group then) without holding up the caller.
            threading.Thread(target=self._consumer.close,
                             name=f"close-after-commit-{self._client_id}", daemon=True).start()
        else:
            self._leave_group()
            self._consumer.close()  # sends LeaveGroup if still a member

    def _leave_group(self) -> None:
        """Unsubscribe and poll until the revocation is served, before close().

        A rebalance that close() itself must serve can hang the process for
        good: confluent-kafka's rebalance callback calls rd_kafka_assign(),
        which waits for a reply from the consumer group that close() is
        already terminating (librdkafka #4884), and it waits holding the GIL
        (confluent-kafka-python #1023), so every thread of the harness stops.
        Seen once in a 90-s generic run: packet loss on the coordinator, then
        the main phase's end. Unsubscribing first lets poll() serve the
        revocation while the group is alive (the workaround in librdkafka
        #4527); LEAVE_WAIT bounds it."""
        if not self._subscribed:
            return
        try:
            self._consumer.unsubscribe()
            deadline = time.monotonic() + LEAVE_WAIT
            self._consumer.poll(POLL_SLICE)     # records read now are dropped: never recorded
            while self._consumer.assignment() and time.monotonic() < deadline:
                self._consumer.poll(POLL_SLICE)
        except (KafkaException, RuntimeError) as e:
            log.info("%s: leaving the group before close: %s", self._client_id, e)
