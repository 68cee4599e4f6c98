"""The client adapters without a broker: the settings' checks, the error
tables with each library's own error objects (one rule, one case per
library), and the shared pieces of docs/history.md's values."""

from __future__ import annotations

import base64
import dataclasses
import json
import re

import pytest
from confluent_kafka import KafkaError
from kafka import errors as KErrors

from workloads.clients import LIBRARIES, ClientSettings, Outcome, make_producer
from workloads.clients import confluent, kafka_python
from workloads.clients.base import read, verdict


@pytest.fixture(params=LIBRARIES)
def library(request):
    return request.param


def test_unknown_library_names_the_known_ones():
    with pytest.raises(ValueError, match="'confluent-kafka', 'kafka-python'"):
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


@pytest.mark.parametrize("rule, confluent_error, kafka_python_error, retries, expected",
                         RULES, ids=[rule[0] for rule in RULES])
def test_error_tables(library, rule, confluent_error, kafka_python_error, retries, expected):
    if library == "confluent-kafka":
        assert confluent.classify(confluent_error, retries) == expected
    else:
        assert kafka_python.classify(kafka_python_error, retries) == expected


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
