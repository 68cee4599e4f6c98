"""Adapters over Apache Kafka's Java client (kafka-clients: KafkaProducer,
KafkaConsumer, Admin), driven through Py4J in a JVM of their own
(workloads/clients/jvm.py): every operation is one bounded call into that
JVM, and a JVM that exits or stops answering makes the operation `info`.

A client is made on its first operation, in a JVM from the pool, so that a
JVM that cannot start makes that operation `fail` (nothing reached Kafka)
instead of making the factory raise in the middle of a run. Java exceptions
are named as Kafka names errors (`Errors.forException`), those outside its
table by their class; the table is keyed by those names.
"""

from __future__ import annotations

import time
from types import SimpleNamespace

from py4j.protocol import Py4JJavaError

from workloads.clients import jvm as jvms
from workloads.clients.base import (FAIL, FAIL_UNLESS_RETRIED, INFO, ClientSettings, Outcome,
                                    encode_value, resolve, sends_outcome)
from workloads.clients.jvm import JvmGone, JvmStartError

# s a healthy JVM may take beyond the Kafka timeout it was given (a loaded
# machine, a GC) before it counts as hung and is killed.
GRACE = 10.0
MAKE_TIMEOUT = 30.0     # s to make a client: the first one of a JVM loads its classes
WARM_UP_TIMEOUT = 10.0  # s a fresh JVM's warm-up may wait for the cluster (JvmClient._warm_up)
LOCAL_TIMEOUT = 10.0    # s for a call that does not wait for a broker (assign, subscribe)
MAX_POLL_RECORDS = 500  # Kafka's default, fixed when a consumer is made

# Error name -> FAIL (certainly not applied) or INFO. Names not listed are INFO.
ERRORS: dict[str, str] = {
    # Refused by the client before anything was sent: configuration,
    # arguments, state (a closed producer), a broker too old for the request.
    "ConfigException": FAIL, "IllegalArgumentException": FAIL,
    "IllegalStateException": FAIL, "INVALID_CONFIG": FAIL, "INVALID_TOPIC_EXCEPTION": FAIL,
    "INVALID_REQUIRED_ACKS": FAIL, "UNSUPPORTED_VERSION": FAIL, "INVALID_GROUP_ID": FAIL,
    # Authentication and authorization: the broker refused the whole request.
    "SASL_AUTHENTICATION_FAILED": FAIL, "TOPIC_AUTHORIZATION_FAILED": FAIL,
    "GROUP_AUTHORIZATION_FAILED": FAIL, "CLUSTER_AUTHORIZATION_FAILED": FAIL,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": FAIL,
    # The broker's record validation refused the batch before the append
    # (LogValidator); the producer does not retry these.
    "MESSAGE_TOO_LARGE": FAIL, "RECORD_LIST_TOO_LARGE": FAIL, "INVALID_RECORD": FAIL,
    "INVALID_TIMESTAMP": FAIL,
    # Refused before the append but retriable: the producer retries them
    # (UNKNOWN_TOPIC_OR_PARTITION as a metadata error), so one that ends a
    # record means the retries ran out, and an earlier attempt may have
    # timed out after its append. Certain only without retries.
    "CORRUPT_MESSAGE": FAIL_UNLESS_RETRIED, "NOT_ENOUGH_REPLICAS": FAIL_UNLESS_RETRIED,
    "UNKNOWN_TOPIC_OR_PARTITION": FAIL_UNLESS_RETRIED,
    # Group fencing and refused commits: the coordinator did not store the
    # offsets of a member outside the current generation. The classic
    # consumer turns UNKNOWN_MEMBER_ID and ILLEGAL_GENERATION answers, and
    # its own refusal to commit outside an active generation, into
    # CommitFailedException.
    "CommitFailedException": FAIL, "REBALANCE_IN_PROGRESS": FAIL, "ILLEGAL_GENERATION": FAIL,
    "UNKNOWN_MEMBER_ID": FAIL, "FENCED_INSTANCE_ID": FAIL, "STALE_MEMBER_EPOCH": FAIL,
    "FENCED_MEMBER_EPOCH": FAIL, "OFFSET_METADATA_TOO_LARGE": FAIL,
    "INVALID_COMMIT_OFFSET_SIZE": FAIL,
    # -- indefinite, listed to say so --
    # Timeouts (TimeoutException: delivery.timeout.ms expired, a commit
    # retried until its timeout, a wait of ours): the request may have been
    # applied and only its answer lost.
    "REQUEST_TIMED_OUT": INFO,
    # The connection went away with the request in flight.
    "NETWORK_EXCEPTION": INFO, "DisconnectException": INFO,
    # Leadership or replication trouble; retried, so when one ends a record
    # the retries ran out and an earlier attempt may have landed.
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND: appended, just not replicated.
    "NOT_LEADER_OR_FOLLOWER": INFO, "LEADER_NOT_AVAILABLE": INFO, "FENCED_LEADER_EPOCH": INFO,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": INFO, "KAFKA_STORAGE_ERROR": INFO,
    # The coordinator moved or is loading: a commit in flight may have landed.
    "NOT_COORDINATOR": INFO, "COORDINATOR_NOT_AVAILABLE": INFO,
    "COORDINATOR_LOAD_IN_PROGRESS": INFO,
    # Idempotent producer state lost: records in flight have an unknown fate.
    "OUT_OF_ORDER_SEQUENCE_NUMBER": INFO, "UNKNOWN_PRODUCER_ID": INFO,
    "INVALID_PRODUCER_EPOCH": INFO,
    # The JVM exited, or was killed mid-call (jvm.py).
    "JVM_EXITED": INFO, "JVM_UNRESPONSIVE": INFO, "JVM_ERROR": INFO,
}


def classify(error: str, retries: int | None = None) -> str:
    """FAIL or INFO for an error "<NAME>: <message>" seen by an operation
    made with `retries`."""
    return resolve(ERRORS.get(error.split(":", 1)[0], INFO), retries)


def describe(c: SimpleNamespace, throwable, default: str = "no message") -> str:
    """"<NAME>: <message>" for a Java exception: a Future's ExecutionException
    stands for its cause; Kafka's exceptions are named by Errors, others (a
    client's own: CommitFailedException, IllegalStateException) by their
    class, and a Future's own wait running out is REQUEST_TIMED_OUT, as
    Kafka's TimeoutException is, told in `default`'s words. A cause is
    named in the message."""
    cls = throwable.getClass().getName()
    if cls == "java.util.concurrent.ExecutionException" and throwable.getCause() is not None:
        throwable = throwable.getCause()
        cls = throwable.getClass().getName()
    name = c.Errors.forException(throwable).name()
    message = throwable.getMessage() or default
    if cls == "java.util.concurrent.TimeoutException":
        # Its message names the wait that was left ("Timeout after waiting
        # for 0 ms"), the caller's the operation's.
        name, message = "REQUEST_TIMED_OUT", default
    elif name == "UNKNOWN_SERVER_ERROR" and not cls.endswith(".UnknownServerException"):
        name = cls.rsplit(".", 1)[-1]
    # What a wrapper does not say ("Failed to create new KafkaAdminClient").
    if (cause := throwable.getCause()) is not None:
        message += f" (caused by {cause.getClass().getSimpleName()}: {cause.getMessage()})"
    return f"{name}: {message}"


class JavaError(Exception):
    """A Java exception that ended a call, as describe() names it."""


def _classes(jvm: jvms.Jvm) -> SimpleNamespace:
    """The Java classes the adapters use, looked up once per JVM (each
    lookup is a round trip)."""
    if "classes" not in jvm.cache:
        j = jvm.jvm
        kafka = j.org.apache.kafka
        # Records leave the JVM as one JSON document per poll, not one Py4J
        # round trip per field: measured on 10,000 records on a loaded
        # machine, 1.5 s against 16 s. ConsumerRecord has accessors but no
        # getters, so Jackson (on the classpath with Kafka's jars) reads its
        # fields: topic, partition, offset, value (base64), leaderEpoch.
        mapper = j.com.fasterxml.jackson.databind.ObjectMapper()
        mapper.registerModule(j.com.fasterxml.jackson.datatype.jdk8.Jdk8Module())
        seen = j.com.fasterxml.jackson.annotation.JsonAutoDetect.Visibility
        accessor = j.com.fasterxml.jackson.annotation.PropertyAccessor
        mapper.setVisibility(accessor.ALL, seen.NONE)
        mapper.setVisibility(accessor.FIELD, seen.ANY)
        jvm.cache["classes"] = SimpleNamespace(
            Properties=j.java.util.Properties, Duration=j.java.time.Duration,
            MILLISECONDS=j.java.util.concurrent.TimeUnit.MILLISECONDS,
            Optional=j.java.util.Optional, HashMap=j.java.util.HashMap,
            HashSet=j.java.util.HashSet, Errors=kafka.common.protocol.Errors,
            TopicPartition=kafka.common.TopicPartition,
            ProducerRecord=kafka.clients.producer.ProducerRecord,
            KafkaProducer=kafka.clients.producer.KafkaProducer,
            # The Future of a record in the accumulator; send() answers a
            # record it refused with another (KafkaProducer's FutureFailure).
            Queued=j.java.lang.Class.forName(
                "org.apache.kafka.clients.producer.internals.FutureRecordMetadata"),
            KafkaConsumer=kafka.clients.consumer.KafkaConsumer,
            OffsetAndMetadata=kafka.clients.consumer.OffsetAndMetadata,
            CloseOptions=kafka.clients.consumer.CloseOptions,
            AdminClient=kafka.clients.admin.AdminClient, OffsetSpec=kafka.clients.admin.OffsetSpec,
            toList=kafka.common.utils.Utils.toList, mapper=mapper)
    return jvm.cache["classes"]


def common_config(bootstrap: str, settings: ClientSettings, client_id: str) -> dict:
    return {
        "bootstrap.servers": bootstrap, "client.id": client_id,
        "request.timeout.ms": settings.request_timeout_ms,
        "retry.backoff.ms": settings.retry_backoff_ms,
        "reconnect.backoff.ms": settings.reconnect_backoff_ms,
        "reconnect.backoff.max.ms": settings.reconnect_backoff_max_ms,
    }


class JvmClient:
    """A Kafka client in a pooled JVM, made on first use; `jvm` is that
    JVM while the client has one (its `pid` is the process)."""

    def __init__(self, config: dict):
        jvms.classpath()        # java and Kafka's jars: raises now, saying how to fix it
        self._config = config
        self.jvm: jvms.Jvm | None = None
        self._client = None
        self._closed = False

    def _make(self, c: SimpleNamespace):
        raise NotImplementedError

    def _run(self, fn, timeout: float):
        """fn(c, client) in the JVM within `timeout` s. Raises JvmStartError
        (nothing asked of Kafka), JvmGone, or JavaError (a Java exception
        of making the client or of fn)."""
        if self._closed:
            raise RuntimeError("this client is closed: make a new one")
        if self.jvm is None:
            self.jvm = jvms.acquire()
        jvm = self.jvm

        def call():
            c = _classes(jvm)
            try:
                if self._client is None:
                    if "warm" not in jvm.cache:
                        self._warm_up(c)
                        jvm.cache["warm"] = True
                    self._client = self._make(c)
                return fn(c, self._client)
            except Py4JJavaError as e:
                raise JavaError(describe(c, e.java_exception,
                                         f"no answer within {timeout:g} s")) from None
        return jvm.call(call, timeout + (MAKE_TIMEOUT + WARM_UP_TIMEOUT
                                         if self._client is None else 0))

    def _warm_up(self, c: SimpleNamespace) -> None:
        """Ask the cluster for its brokers once from a fresh JVM, with a
        throwaway Admin, before its first client is made. A cold JVM runs
        its first requests slowly (classes to load, code to compile): at a
        run's start, with six JVMs starting on two cores, every producer's
        first send waited out max_block_ms for its topic's metadata and
        failed. Warmed up, the client's own first request is as quick as
        any; what the warm-up learns is thrown away."""
        admin = c.AdminClient.create(self._properties(c, {
            "bootstrap.servers": self._config["bootstrap.servers"],
            "client.id": f"{self._config['client.id']}-warm-up",
            "request.timeout.ms": int(WARM_UP_TIMEOUT * 1000),
            "default.api.timeout.ms": int(WARM_UP_TIMEOUT * 1000)}))
        try:
            admin.describeCluster().nodes().get(int(WARM_UP_TIMEOUT * 1000), c.MILLISECONDS)
        except Py4JJavaError:
            pass    # a cluster out of reach: the operation itself will say so
        finally:
            admin.close(c.Duration.ZERO)

    @staticmethod
    def _properties(c: SimpleNamespace, config: dict):
        props = c.Properties()
        for key, value in config.items():
            props.setProperty(key, str(value).lower() if isinstance(value, bool) else str(value))
        return props

    def _close(self, close, timeout: float) -> None:
        """close(c, client) in the JVM, then the JVM back to the pool; a JVM
        whose client did not close cleanly is killed."""
        if self._closed:
            return
        self._closed = True
        jvm, self.jvm = self.jvm, None
        if jvm is None:
            return
        if self._client is not None:
            try:
                c = _classes(jvm)
                jvm.call(lambda: close(c, self._client), timeout + GRACE)
            except (JvmGone, Py4JJavaError):
                jvm.kill()
                return
        jvms.release(jvm)


def jvm_outcome(value: dict, error: Exception) -> Outcome:
    """A call that never reached Kafka fails; one whose JVM went is unknown."""
    return Outcome(FAIL if isinstance(error, JvmStartError) else INFO, value, str(error))


def producer_config(bootstrap: str, settings: ClientSettings, client_id: str) -> dict:
    """KafkaProducer's configuration for `settings` (plain or transactional)."""
    config = {
        **common_config(bootstrap, settings, client_id),
        "acks": settings.acks, "enable.idempotence": settings.idempotence,
        "max.in.flight.requests.per.connection": settings.max_in_flight,
        "linger.ms": settings.linger_ms, "batch.size": settings.batch_size,
        "delivery.timeout.ms": settings.delivery_timeout_ms,
        # send() blocks this long for the topic's metadata, then fails
        # the record without having queued it.
        "max.block.ms": settings.max_block_ms,
        "key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        "value.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
    }
    if settings.retries is not None:
        config["retries"] = settings.retries
    return config


class JavaProducer(JvmClient):
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str):
        super().__init__(producer_config(bootstrap, settings, client_id))
        self._retries = settings.retries
        self._max_block = settings.max_block_ms / 1000
        self._spent = False

    def _make(self, c):
        return c.KafkaProducer(self._properties(c, self._config))

    def send(self, sends: list[tuple[str, int, int]], timeout: float) -> Outcome:
        if self._spent:
            raise RuntimeError("this producer had an indeterminate send: records may still be "
                               "delivered; close it and make a new one (a new process)")
        def run(c, producer):
            # From here: a JVM's start and warm-up do not count against it.
            deadline = time.monotonic() + timeout
            futures, refused = [], None
            for topic, partition, value in sends:
                try:
                    future = producer.send(c.ProducerRecord(topic, partition, None,
                                                            encode_value(value)))
                    if not c.Queued.isInstance(future):
                        future.get()    # raises the refusal
                except Py4JJavaError as e:
                    # Refused by send() itself (no metadata within
                    # max.block.ms, a partition the topic lacks, a record
                    # too large): KafkaProducer.doSend fails it before the
                    # append, so this record and the ones after it were
                    # never queued.
                    refused = describe(c, e.java_exception)
                    break
                futures.append(future)
            results = []
            for future in futures:
                wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
                try:
                    offset = future.get(wait_ms, c.MILLISECONDS).offset()
                except Py4JJavaError as e:
                    error = describe(c, e.java_exception,
                                     f"no acknowledgement within {timeout} s")
                    results.append((None, (classify(error, self._retries), error)))
                else:
                    # acks=0: no answer to take an offset from, -1.
                    results.append((offset if offset >= 0 else None, None))
            return results, refused

        try:
            results, refused = self._run(run, len(sends) * self._max_block + timeout + GRACE)
        except (JvmStartError, JvmGone, JavaError) as e:
            error = (FAIL if isinstance(e, (JvmStartError, JavaError)) else INFO, str(e))
            results, refused = [(None, error)] * len(sends), None
        offsets = [offset for offset, _ in results] + [None] * (len(sends) - len(results))
        errors = [error for _, error in results] + \
            [(FAIL, refused)] * (len(sends) - len(results))
        outcome = sends_outcome(sends, offsets, errors)
        self._spent = outcome.type == INFO
        return outcome

    def close(self) -> None:
        # Records still queued or in flight belong to an `info` send already
        # recorded: a zero timeout fails them rather than waiting for them.
        self._close(lambda c, producer: producer.close(c.Duration.ZERO), 0)
