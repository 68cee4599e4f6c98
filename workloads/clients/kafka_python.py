"""Adapters over kafka-python.

kafka-python connects when a client is constructed (it bootstraps to learn
the broker's API versions), so the adapters construct theirs on first use:
a cluster that cannot be reached makes that first operation `fail` (nothing
was sent) instead of making the factory raise in the middle of a run.
Errors are exception classes; the table is looked up along the class's MRO,
so a subclass inherits its family's entry unless listed itself.
"""

from __future__ import annotations

import threading
import time

from kafka import (ConsumerRebalanceListener, KafkaConsumer, KafkaProducer,
                   OffsetAndMetadata, TopicPartition)
from kafka import errors as Errors

from history_analysis.history import schema as h
from workloads.clients.base import (FAIL, FAIL_UNLESS_RETRIED, INFO, OK, ClientSettings,
                                    ConsumedEpochs, end_at,
                                    Outcome, check_group, encode_value, offsets_value,
                                    partitions_value, read, rebalance, resolve, sends_outcome)

# Exception class -> FAIL (certainly not applied) or INFO. Classes not found
# along the MRO are INFO.
ERRORS: dict[type, str] = {
    # Refused by the client before anything was sent: configuration, state
    # (commit without a group_id), a broker too old for the request.
    Errors.KafkaConfigurationError: FAIL, Errors.IllegalArgumentError: FAIL,
    Errors.IllegalStateError: FAIL, Errors.UnsupportedVersionError: FAIL,
    Errors.InvalidTopicError: FAIL, Errors.InvalidRequiredAcksError: FAIL,
    # Authentication and authorization (AuthorizationError covers topic,
    # group, cluster and transactional-id failures).
    Errors.AuthorizationError: FAIL, Errors.SaslAuthenticationFailedError: FAIL,
    # The topic or partition does not exist. kafka-python's sender retries it
    # (it is an InvalidMetadataError) until delivery_timeout_ms, so it ends a
    # record only without retries — when the one attempt was refused.
    Errors.UnknownTopicOrPartitionError: FAIL,
    # The broker's record validation refused the batch before the append.
    Errors.MessageSizeTooLargeError: FAIL, Errors.RecordListTooLargeError: FAIL,
    Errors.InvalidRecordError: FAIL, Errors.InvalidTimestampError: FAIL,
    # Refused before the append, but retriable in Kafka: with retries an
    # earlier attempt of the same record may have timed out after its append.
    Errors.CorruptRecordError: FAIL_UNLESS_RETRIED,
    Errors.NotEnoughReplicasError: FAIL_UNLESS_RETRIED,
    # Group fencing and refused commits. kafka-python wraps UNKNOWN_MEMBER_ID,
    # ILLEGAL_GENERATION and REBALANCE_IN_PROGRESS answers, and its own
    # refusal to commit outside an active generation, in CommitFailedError.
    Errors.CommitFailedError: FAIL, Errors.RebalanceInProgressError: FAIL,
    Errors.IllegalGenerationError: FAIL, Errors.UnknownMemberIdError: FAIL,
    Errors.FencedInstanceIdError: FAIL, Errors.StaleMemberEpochError: FAIL,
    Errors.FencedMemberEpochError: FAIL, Errors.OffsetMetadataTooLargeError: FAIL,
    Errors.InvalidCommitOffsetSizeError: FAIL,
    # -- indefinite, listed to say so --
    # Timeouts (a future.get deadline, delivery_timeout_ms expiry, a commit
    # retried until its timeout): the request may have been applied.
    Errors.KafkaTimeoutError: INFO, Errors.RequestTimedOutError: INFO,
    # The connection went away with the request in flight.
    Errors.KafkaConnectionError: INFO, Errors.NodeNotReadyError: INFO,
    Errors.NetworkExceptionError: INFO, Errors.Cancelled: INFO,
    # Leadership or replication trouble; retried, so when one ends a record
    # the retries ran out and an earlier attempt may have landed.
    Errors.NotLeaderForPartitionError: INFO, Errors.LeaderNotAvailableError: INFO,
    Errors.NotEnoughReplicasAfterAppendError: INFO, Errors.KafkaStorageError: INFO,
    # The coordinator moved or is loading: a commit in flight may have landed.
    Errors.NotCoordinatorError: INFO, Errors.CoordinatorNotAvailableError: INFO,
    Errors.CoordinatorLoadInProgressError: INFO,
    # Idempotent producer state lost: records in flight have an unknown fate.
    Errors.OutOfOrderSequenceNumberError: INFO, Errors.UnknownProducerIdError: INFO,
    Errors.InvalidProducerEpochError: INFO,
}


def classify(error: BaseException, retries: int | None = None) -> str:
    """FAIL or INFO for a kafka-python exception seen by an operation made with `retries`."""
    for cls in type(error).__mro__:
        if cls in ERRORS:
            return resolve(ERRORS[cls], retries)
    return INFO


def describe(error: BaseException, default: str = "no message") -> str:
    """Name: message. Some errors come without a message: a broker error has
    its description; a commit's KafkaTimeoutError gets the caller's `default`."""
    message = ": ".join(str(arg) for arg in error.args if arg is not None)
    return f"{type(error).__name__}: {message or getattr(error, 'description', None) or default}"


def common_config(bootstrap: str, settings: ClientSettings, client_id: str) -> dict:
    return {
        "bootstrap_servers": bootstrap, "client_id": client_id,
        "request_timeout_ms": settings.request_timeout_ms,
        "retry_backoff_ms": settings.retry_backoff_ms,
        "reconnect_backoff_ms": settings.reconnect_backoff_ms,
        "reconnect_backoff_max_ms": settings.reconnect_backoff_max_ms,
        # Construction blocks on this bootstrap (default 30 s); operations
        # with a timeout of their own lower it for the client they construct.
        "bootstrap_timeout_ms": settings.default_api_timeout_ms,
    }


def bounded_config(config: dict, timeout: float | None) -> dict:
    if timeout is None:
        return config
    return {**config, "bootstrap_timeout_ms": min(config["bootstrap_timeout_ms"],
                                                  max(1, int(timeout * 1000)))}


class KafkaPythonProducer:
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str):
        self._retries = settings.retries
        # With acks=0 there is no answer to take an offset from, yet
        # kafka-python 3.0 reports one: its sender completes the batch with a
        # synthetic response whose base_offset is the schema default, 0
        # (sender.py, "acks=0: ... synthesize a success response"), so
        # records show offsets 0, 1, 2, ... whatever the log holds.
        self._acks_zero = settings.acks == "0"
        self._config = {
            **common_config(bootstrap, settings, client_id),
            "acks": settings.acks if settings.acks == "all" else int(settings.acks),
            "enable_idempotence": settings.idempotence,
            "max_in_flight_requests_per_connection": settings.max_in_flight,
            "linger_ms": settings.linger_ms,
            "batch_size": settings.batch_size,
            "delivery_timeout_ms": settings.delivery_timeout_ms,
            # send() blocks this long for the topic's metadata, then raises
            # KafkaTimeoutError without having queued the record.
            "max_block_ms": settings.max_block_ms,
        }
        if settings.retries is not None:
            self._config["retries"] = settings.retries
        # Every record has an outcome within delivery_timeout_ms (KIP-91).
        self._settle_s = settings.delivery_timeout_ms / 1000
        self._producer: KafkaProducer | None = None
        self._spent = False

    def send(self, sends: list[tuple[str, int, int]], timeout: float) -> Outcome:
        if self._spent:
            raise RuntimeError("this producer had an indeterminate send: records may still be "
                               "delivered; close it and make a new one (a new process)")
        deadline = time.monotonic() + timeout
        offsets: list[int | None] = [None] * len(sends)
        errors: list[tuple[str, str] | None] = [None] * len(sends)
        futures = []
        try:
            if self._producer is None:
                self._producer = KafkaProducer(**bounded_config(self._config, timeout))
            for topic, partition, value in sends:
                futures.append(self._producer.send(topic, encode_value(value),
                                                   partition=partition))
        except (Errors.KafkaError, ValueError) as e:
            # Raised by send() itself (no metadata for the topic within
            # max_block_ms, a partition it does not have) or by the
            # bootstrap: this record and the ones after it were never queued.
            # ValueError is send()'s "Unrecognized partition".
            errors[len(futures):] = [(FAIL, describe(e))] * (len(sends) - len(futures))
        for i, future in enumerate(futures):
            try:
                metadata = future.get(timeout=max(0.0, deadline - time.monotonic()))
            except Errors.KafkaError as e:
                errors[i] = (classify(e, self._retries),
                             describe(e, f"no acknowledgement within {timeout} s"))
            else:
                offsets[i] = None if self._acks_zero else metadata.offset
        outcome = sends_outcome(sends, offsets, errors)
        self._spent = outcome.type == INFO
        return outcome

    def close(self) -> None:
        producer, self._producer = self._producer, None
        if producer is None:
            return
        try:
            producer.close(timeout=0)
        except Errors.KafkaTimeoutError:
            # Records of an `info` send are still in flight. close() flushes
            # first and, on its timeout, raises *without* stopping the sender
            # thread (which then delivers them anyway): close it for real once
            # they have an outcome, off the caller's thread.
            threading.Thread(target=producer.close, kwargs={"timeout": self._settle_s + 1},
                             name="close-when-settled", daemon=True).start()


class _Recorder(ConsumerRebalanceListener):
    """Rebalance callbacks, kept for the next poll. kafka-python may call
    them on its network thread, hence the lock.

    Under the eager protocol kafka-python 3 revokes every partition before
    a rejoin, but keeps the position of each one the new assignment gives
    back (SubscriptionState.assign_from_subscribed), where the Java client
    clears its assignment first (ConsumerCoordinator.onJoinPrepare) and
    starts a partition it gets back from the group's committed offset. So
    the revocation is held until the assignment, and only the difference is
    recorded, as a cooperative rebalance would report it: a partition kept
    was neither given up nor newly assigned, and its next read continues
    the member's own position. (Recorded as revoked and assigned, the
    member's first read after such a rejoin, past the committed offset
    where it had read on without committing, was a false `resume-skip`.)"""

    def __init__(self, group: str, sink: list[dict], lock: threading.Lock):
        self.group, self.sink, self.lock = group, sink, lock
        self._revoking: set = set()

    def _record(self, kind: str, partitions) -> None:
        if not partitions:
            return  # kafka-python calls the listener with empty sets on every join
        self.sink.append(rebalance(kind, self.group,
                                   sorted((tp.topic, tp.partition) for tp in partitions)))

    def on_partitions_assigned(self, assigned):
        with self.lock:
            assigned, revoking, self._revoking = set(assigned), self._revoking, set()
            self._record("revoked", revoking - assigned)
            self._record("assigned", assigned - revoking)

    def on_partitions_revoked(self, revoked):
        with self.lock:
            self._revoking |= set(revoked)

    def on_partitions_lost(self, lost):
        with self.lock:
            self._record("revoked", self._revoking - set(lost))
            self._revoking = set()
            self._record("lost", lost)


class KafkaPythonConsumer:
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str,
                 group: str | None):
        self._group = group
        self._api_timeout_ms = settings.default_api_timeout_ms
        self._epochs = ConsumedEpochs()
        self._rebalances: list[dict] = []
        self._lock = threading.Lock()
        # kafka-python 2.x refused request_timeout_ms <= session_timeout_ms;
        # 3.0 only needs fetch_max_wait_ms < request_timeout_ms (checked by
        # ClientSettings) and times JoinGroup by the rebalance timeout itself.
        self._config = {
            **common_config(bootstrap, settings, client_id),
            "group_id": group,
            "enable_auto_commit": False,
            "auto_offset_reset": settings.auto_offset_reset,
            "isolation_level": settings.isolation_level,
            "session_timeout_ms": settings.session_timeout_ms,
            "heartbeat_interval_ms": settings.heartbeat_interval_ms,
            "max_poll_interval_ms": settings.max_poll_interval_ms,
            "fetch_max_wait_ms": settings.fetch_max_wait_ms,
        }
        self._consumer: KafkaConsumer | None = None

    def _client(self, timeout: float | None = None) -> KafkaConsumer:
        if self._consumer is None:
            self._consumer = KafkaConsumer(**bounded_config(self._config, timeout))
        return self._consumer

    def assign(self, partitions: list[tuple[str, int]], seek_to_beginning: bool) -> Outcome:
        value = h.invocation("assign", partitions=partitions_value(partitions),
                             seek_to_beginning=seek_to_beginning)
        tps = [TopicPartition(t, p) for t, p in partitions]
        try:
            consumer = self._client()
            consumer.assign(tps)
            if seek_to_beginning:
                consumer.seek_to_beginning(*tps)
        except Errors.KafkaError as e:  # bootstrap or local state: nothing changed
            return Outcome(FAIL, value, describe(e))
        return Outcome(OK, value)

    def subscribe(self, group: str, topics: list[str]) -> Outcome:
        check_group(self._group, group)
        value = h.invocation("subscribe", group=group, topics=list(topics))
        try:
            self._client().subscribe(list(topics),
                                     listener=_Recorder(group, self._rebalances, self._lock))
        except Errors.KafkaError as e:
            return Outcome(FAIL, value, describe(e))
        return Outcome(OK, value)

    def poll(self, timeout: float, max_records: int = 500) -> Outcome:
        reads: list[dict] = []
        error: str | None = None
        try:
            batches = self._client(timeout).poll(timeout_ms=int(timeout * 1000),
                                          max_records=max_records)
        except Errors.KafkaError as e:
            # poll() raises when the consumer cannot go on by itself (a
            # listener failure, an offset out of range without reset, ...).
            error = describe(e)
        else:
            for tp, records in batches.items():
                reads += [read(r.topic, r.partition, r.offset, r.value, r.leader_epoch)
                          for r in records]
                for r in records:
                    self._epochs.read(r.topic, r.partition, r.offset, r.leader_epoch)
        with self._lock:
            rebalances = self._rebalances[:]
            self._rebalances.clear()
        value = h.completion("poll", reads=reads, rebalances=rebalances)
        return Outcome(INFO, value, error) if error else Outcome(OK, value)

    def commit(self, group: str, offsets: list[tuple[str, int, int]]) -> Outcome:
        check_group(self._group, group)
        value = h.invocation("commit", group=group, offsets=offsets_value(offsets))
        try:
            # Without timeout_ms, commit retries retriable errors forever.
            self._client().commit(
                offsets={TopicPartition(t, p): OffsetAndMetadata(
                    o, "", self._epochs.for_commit(t, p, o))
                         for t, p, o in offsets},
                timeout_ms=self._api_timeout_ms)
        except Errors.KafkaError as e:
            return Outcome(classify(e), value, describe(
                e, f"no OffsetCommit answer within {self._api_timeout_ms / 1000} s"))
        return Outcome(OK, value)

    def committed(self, group: str, partitions: list[tuple[str, int]],
                  timeout: float) -> Outcome:
        check_group(self._group, group)
        deadline = time.monotonic() + timeout
        found = []
        try:
            consumer = self._client(timeout)
            for topic, partition in partitions:
                remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
                found.append((topic, partition, consumer.committed(
                    TopicPartition(topic, partition), timeout_ms=remaining_ms)))
        except Errors.KafkaError as e:  # a read: a failure changes nothing
            return Outcome(FAIL, h.completion("committed", group=group, offsets=offsets_value(
                ((t, p, None) for t, p in partitions), h.OFFSET_FOUND)),
                describe(e, f"no OffsetFetch answer within {timeout} s"))
        return Outcome(OK, h.completion("committed", group=group,
                                        offsets=offsets_value(found, h.OFFSET_FOUND)))

    def end_offsets(self, partitions: list[tuple[str, int]], timeout: float) -> Outcome:
        tps = [TopicPartition(t, p) for t, p in partitions]
        try:
            ends = self._client(timeout).end_offsets(tps, timeout_ms=int(timeout * 1000))
        except Errors.KafkaError as e:
            return Outcome(FAIL, h.invocation("end-offsets",
                                              partitions=partitions_value(partitions)),
                           describe(e))
        # kafka-python's end_offsets keeps the answering leader's epoch to itself.
        return Outcome(OK, h.completion("end-offsets", offsets=[
            end_at(tp.topic, tp.partition, ends[tp]) for tp in tps]))

    def positions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        if self._consumer is None:
            return {}
        assigned = self._consumer.assignment()
        found = {}
        for t, p in partitions:
            tp = TopicPartition(t, p)
            if tp in assigned:
                try:
                    found[(t, p)] = self._consumer.position(tp, timeout_ms=1000)
                except Errors.KafkaError:
                    pass    # no position it can tell now: left out
        return found

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close(autocommit=False, timeout_ms=self._api_timeout_ms)
            self._consumer = None
