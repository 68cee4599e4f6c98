"""The client adapters without a broker: the settings' checks, the error
tables with each library's own error objects (one rule, one case per
library; the Java client's exceptions made in a real JVM), and the shared
pieces of docs/history.md's values."""

from __future__ import annotations

import base64
import dataclasses
import json
import re

import pytest
from confluent_kafka import KafkaError
from kafka import errors as KErrors

from workloads.clients import ClientSettings, Outcome, make_producer
from workloads.clients import confluent, java, kafka_python
from workloads.clients import jvm as jvms
from workloads.clients.base import read, verdict


def test_unknown_library_names_the_known_ones():
    with pytest.raises(ValueError, match="'confluent-kafka', 'kafka-python', 'java'"):
        make_producer("librdkafka", "127.0.0.1:9", ClientSettings(), "p")


# -- settings ------------------------------------------------------------------

def test_settings_serialise_whole():
    settings = ClientSettings(acks="1", idempotence=False, retries=0)
    assert json.loads(json.dumps(dataclasses.asdict(settings)))["retries"] == 0


@pytest.mark.parametrize("kwargs, fragment", [
    ({"acks": 1}, "acks=1 (int)"),
    ({"acks": "1"}, "idempotence=True conflicts with acks='1'"),
    ({"retries": 0}, "conflicts with retries=0"),
    ({"max_in_flight": 6}, "conflicts with max_in_flight=6"),
    ({"fetch_max_wait_ms": 3000}, "fetch_max_wait_ms=3000"),
    ({"heartbeat_interval_ms": 6000}, "heartbeat_interval_ms"),
    ({"auto_offset_reset": "none"}, "auto_offset_reset='none'"),
])
def test_settings_refuse_what_the_clients_would(kwargs, fragment):
    with pytest.raises(ValueError, match=re.escape(fragment)):
        ClientSettings(**kwargs)


# -- the error tables, with each library's own error objects ----------------------------

# (rule, confluent-kafka error, kafka-python error, retries, expected)
RULES = [
    ("invalid config", KafkaError(KafkaError.INVALID_CONFIG),
     KErrors.KafkaConfigurationError("bad"), None, "fail"),
    ("invalid argument", KafkaError(KafkaError._INVALID_ARG),
     KErrors.IllegalArgumentError("bad"), None, "fail"),
    ("topic authorization", KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED),
     KErrors.TopicAuthorizationFailedError(), None, "fail"),
    ("group authorization", KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED),
     KErrors.GroupAuthorizationFailedError(), None, "fail"),
    ("unknown topic", KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART),
     KErrors.UnknownTopicOrPartitionError(), None, "fail"),
    ("unknown partition (client)", KafkaError(KafkaError._UNKNOWN_PARTITION),
     KErrors.UnknownTopicOrPartitionError(), None, "fail"),
    ("record too large", KafkaError(KafkaError.MSG_SIZE_TOO_LARGE),
     KErrors.MessageSizeTooLargeError(), None, "fail"),
    ("invalid record", KafkaError(KafkaError.INVALID_RECORD),
     KErrors.InvalidRecordError(), None, "fail"),
    ("corrupt record, no retries", KafkaError(KafkaError.INVALID_MSG),
     KErrors.CorruptRecordError(), 0, "fail"),
    ("corrupt record, retried", KafkaError(KafkaError.INVALID_MSG),
     KErrors.CorruptRecordError(), None, "info"),
    ("not enough replicas, no retries", KafkaError(KafkaError.NOT_ENOUGH_REPLICAS),
     KErrors.NotEnoughReplicasError(), 0, "fail"),
    ("not enough replicas, retried", KafkaError(KafkaError.NOT_ENOUGH_REPLICAS),
     KErrors.NotEnoughReplicasError(), 3, "info"),
    ("not enough replicas, default retries", KafkaError(KafkaError.NOT_ENOUGH_REPLICAS),
     KErrors.NotEnoughReplicasError(), None, "info"),
    ("rebalance in progress", KafkaError(KafkaError.REBALANCE_IN_PROGRESS),
     KErrors.RebalanceInProgressError(), None, "fail"),
    ("illegal generation", KafkaError(KafkaError.ILLEGAL_GENERATION),
     KErrors.CommitFailedError(KErrors.IllegalGenerationError()), None, "fail"),
    ("unknown member", KafkaError(KafkaError.UNKNOWN_MEMBER_ID),
     KErrors.CommitFailedError(KErrors.UnknownMemberIdError()), None, "fail"),
    ("fenced instance", KafkaError(KafkaError.FENCED_INSTANCE_ID),
     KErrors.FencedInstanceIdError(), None, "fail"),
    ("delivery timeout", KafkaError(KafkaError._MSG_TIMED_OUT),
     KErrors.KafkaTimeoutError("Expiring 1 record(s)"), None, "info"),
    ("local timeout", KafkaError(KafkaError._TIMED_OUT),
     KErrors.KafkaTimeoutError(), 0, "info"),
    ("request timed out", KafkaError(KafkaError.REQUEST_TIMED_OUT),
     KErrors.RequestTimedOutError(), 0, "info"),
    ("disconnect", KafkaError(KafkaError._TRANSPORT),
     KErrors.KafkaConnectionError("closed"), 0, "info"),
    ("all brokers down", KafkaError(KafkaError._ALL_BROKERS_DOWN),
     KErrors.NodeNotReadyError(), 0, "info"),
    ("not leader", KafkaError(KafkaError.NOT_LEADER_FOR_PARTITION),
     KErrors.NotLeaderForPartitionError(), 0, "info"),
    ("appended, not replicated", KafkaError(KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND),
     KErrors.NotEnoughReplicasAfterAppendError(), 0, "info"),
    ("coordinator moved", KafkaError(KafkaError.NOT_COORDINATOR),
     KErrors.NotCoordinatorError(), 0, "info"),
    ("idempotence: out of order", KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER),
     KErrors.OutOfOrderSequenceNumberError(), 0, "info"),
    ("fatal, whatever the code", KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, fatal=True),
     KErrors.UnknownProducerIdError(), 0, "info"),
    ("unknown error", KafkaError(12345), KErrors.for_code(12345)(), 0, "info"),
    ("unlisted client error", KafkaError(KafkaError._STATE), KErrors.KafkaError("?"), 0, "info"),
]


@pytest.mark.parametrize("library", ["confluent-kafka", "kafka-python"])
@pytest.mark.parametrize("rule, confluent_error, kafka_python_error, retries, expected",
                         RULES, ids=[rule[0] for rule in RULES])
def test_error_tables(library, rule, confluent_error, kafka_python_error, retries, expected):
    if library == "confluent-kafka":
        assert confluent.classify(confluent_error, retries) == expected
    else:
        assert kafka_python.classify(kafka_python_error, retries) == expected


E = "org.apache.kafka.common.errors."
# The same rules with the Java client's exceptions: (rule, exception class,
# retries, the name the history gives it, expected). The one difference:
# the Java producer retries UNKNOWN_TOPIC_OR_PARTITION, so it is certain
# only without retries.
JAVA_RULES = [
    ("invalid config", "org.apache.kafka.common.config.ConfigException", None,
     "ConfigException", "fail"),
    ("invalid argument", "java.lang.IllegalArgumentException", None,
     "IllegalArgumentException", "fail"),
    ("closed client", "java.lang.IllegalStateException", None, "IllegalStateException", "fail"),
    ("topic authorization", E + "TopicAuthorizationException", None,
     "TOPIC_AUTHORIZATION_FAILED", "fail"),
    ("group authorization", E + "GroupAuthorizationException", None,
     "GROUP_AUTHORIZATION_FAILED", "fail"),
    ("unknown topic, no retries", E + "UnknownTopicOrPartitionException", 0,
     "UNKNOWN_TOPIC_OR_PARTITION", "fail"),
    ("unknown topic, retried", E + "UnknownTopicOrPartitionException", None,
     "UNKNOWN_TOPIC_OR_PARTITION", "info"),
    ("record too large", E + "RecordTooLargeException", None, "MESSAGE_TOO_LARGE", "fail"),
    ("invalid record", "org.apache.kafka.common.InvalidRecordException", None, "INVALID_RECORD",
     "fail"),
    ("corrupt record, no retries", E + "CorruptRecordException", 0, "CORRUPT_MESSAGE", "fail"),
    ("corrupt record, retried", E + "CorruptRecordException", None, "CORRUPT_MESSAGE", "info"),
    ("not enough replicas, no retries", E + "NotEnoughReplicasException", 0,
     "NOT_ENOUGH_REPLICAS", "fail"),
    ("not enough replicas, retried", E + "NotEnoughReplicasException", 3,
     "NOT_ENOUGH_REPLICAS", "info"),
    ("rebalance in progress", E + "RebalanceInProgressException", None,
     "REBALANCE_IN_PROGRESS", "fail"),
    ("illegal generation", E + "IllegalGenerationException", None, "ILLEGAL_GENERATION", "fail"),
    ("unknown member", E + "UnknownMemberIdException", None, "UNKNOWN_MEMBER_ID", "fail"),
    ("commit refused", "org.apache.kafka.clients.consumer.CommitFailedException", None,
     "CommitFailedException", "fail"),
    ("fenced instance", E + "FencedInstanceIdException", None, "FENCED_INSTANCE_ID", "fail"),
    ("delivery timeout", E + "TimeoutException", None, "REQUEST_TIMED_OUT", "info"),
    ("a Future's wait ran out", "java.util.concurrent.TimeoutException", 0,
     "REQUEST_TIMED_OUT", "info"),
    ("disconnect", E + "DisconnectException", 0, "DisconnectException", "info"),
    ("network exception", E + "NetworkException", 0, "NETWORK_EXCEPTION", "info"),
    ("not leader", E + "NotLeaderOrFollowerException", 0, "NOT_LEADER_OR_FOLLOWER", "info"),
    ("appended, not replicated", E + "NotEnoughReplicasAfterAppendException", 0,
     "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "info"),
    ("coordinator moved", E + "NotCoordinatorException", 0, "NOT_COORDINATOR", "info"),
    ("idempotence: out of order", E + "OutOfOrderSequenceException", 0,
     "OUT_OF_ORDER_SEQUENCE_NUMBER", "info"),
    ("unknown server error", E + "UnknownServerException", 0, "UNKNOWN_SERVER_ERROR", "info"),
    ("unlisted client error", "org.apache.kafka.common.KafkaException", 0, "KafkaException",
     "info"),
]


@pytest.fixture(scope="module")
def java_classes():
    """A real client JVM, for the Java client's own exception objects."""
    jvm = jvms.acquire()
    yield jvm, jvm.call(lambda: java._classes(jvm), 60)
    jvms.release(jvm)


def make(jvm, name: str, *args):
    cls = jvm.jvm
    for part in name.split("."):
        cls = getattr(cls, part)
    return cls(*args)


@pytest.mark.parametrize("rule, exception, retries, name, expected", JAVA_RULES,
                         ids=[rule[0] for rule in JAVA_RULES])
def test_java_error_table(java_classes, rule, exception, retries, name, expected):
    jvm, c = java_classes
    error = jvm.call(lambda: java.describe(c, make(jvm, exception, "what happened")), 10)
    assert error.split(": ")[0] == name
    assert java.classify(error, retries) == expected


def test_java_error_descriptions(java_classes):
    # A Future's ExecutionException stands for its cause, another's cause is
    # told in the message; a Future's own wait that ran out, and an
    # exception without a message, get the caller's words.
    jvm, c = java_classes
    cause = make(jvm, E + "NotLeaderOrFollowerException", "moved")
    wrapped = make(jvm, "java.util.concurrent.ExecutionException", cause)
    assert jvm.call(lambda: java.describe(c, wrapped), 10) == "NOT_LEADER_OR_FOLLOWER: moved"
    admin = make(jvm, "org.apache.kafka.common.KafkaException", "Failed to create", cause)
    assert jvm.call(lambda: java.describe(c, admin), 10) \
        == "KafkaException: Failed to create (caused by NotLeaderOrFollowerException: moved)"
    waited = make(jvm, "java.util.concurrent.TimeoutException", "Timeout after waiting for 0 ms")
    assert jvm.call(lambda: java.describe(c, waited, "no answer within 1 s"), 10) \
        == "REQUEST_TIMED_OUT: no answer within 1 s"
    silent = make(jvm, E + "DisconnectException")
    assert jvm.call(lambda: java.describe(c, silent, "no answer within 1 s"), 10) \
        == "DisconnectException: no answer within 1 s"


def test_error_descriptions():
    assert confluent.describe(KafkaError(KafkaError.UNKNOWN_MEMBER_ID)) \
        == "UNKNOWN_MEMBER_ID: Broker: Unknown member"
    assert kafka_python.describe(KErrors.KafkaTimeoutError(), "no answer within 1 s") \
        == "KafkaTimeoutError: no answer within 1 s"
    assert kafka_python.describe(KErrors.CommitFailedError(KErrors.UnknownMemberIdError())) \
        == "CommitFailedError: [Error 25] UnknownMemberIdError"


# -- shared pieces --------------------------------------------------------------

def test_verdict_fails_only_when_every_item_certainly_failed():
    fail, info = ("fail", "A: a"), ("info", "B: b")
    assert verdict({}, [None, None]) == Outcome("ok", {})
    assert verdict({}, [fail, fail]) == Outcome("fail", {}, "A: a")
    assert verdict({}, [None, fail]) == Outcome("info", {}, "A: a")  # some written
    assert verdict({}, [fail, info]) == Outcome("info", {}, "A: a")


@pytest.mark.parametrize("raw, value", [
    (b"17", 17), (b"-3", -3), (b"9223372036854775807", 9223372036854775807),
    (b"9223372036854775808", None), (b" 17", None), (b"1.5", None), (b"", None),
    (None, None), ("١٢".encode(), None)])
def test_read_decodes_ascii_decimal_int64(raw, value):
    got = read("t", 0, 5, raw)
    assert got["value"] == value
    assert ("raw" in got) == (value is None)
    if value is None:
        assert base64.b64decode(got["raw"]) == (raw or b"")
