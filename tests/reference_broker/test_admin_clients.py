"""Real admin clients against a broker process: confluent-kafka's AdminClient
and kafka-python's KafkaAdminClient create topics with per-topic configs
and with a manual replica assignment, describe and incrementally alter the
configs, and get Kafka's error codes for a bad config name, a bad value and
a bad assignment; the configs survive a restart."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewTopic,
)
from kafka.admin import ConfigResource as KConfigResource
from kafka.admin import ConfigResourceType, KafkaAdminClient
from kafka.admin import NewTopic as KNewTopic
from kafka.errors import InvalidConfigurationError, InvalidReplicationAssignmentError

TIMEOUT = 10


def outcomes(futures) -> dict:
    """name -> None, or the KafkaError code it failed with."""
    result = {}
    for name, future in futures.items():
        try:
            future.result(TIMEOUT)
            result[name] = None
        except KafkaException as e:
            result[name] = e.args[0].code()
    return result


def topic_configs(admin: AdminClient, name: str) -> dict:
    [future] = admin.describe_configs([ConfigResource("topic", name)]).values()
    return future.result(TIMEOUT)


def test_confluent_admin_client(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert outcomes(admin.create_topics([
        NewTopic("strict", 1, 1, config={"min.insync.replicas": "2",
                                         "unclean.leader.election.enable": "false",
                                         "cleanup.policy": "delete"}),
        NewTopic("placed", 2, replica_assignment=[[1], [1]]),
        NewTopic("unknown", 1, 1, config={"no.such.config": "1"}),
        NewTopic("zero", 1, 1, config={"min.insync.replicas": "0"}),
        NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"}),
        NewTopic("nowhere", 1, replica_assignment=[[7]]),
    ], request_timeout=TIMEOUT)) == {
        "strict": None, "placed": None, "unknown": KafkaError.INVALID_CONFIG,
        "zero": KafkaError.INVALID_CONFIG, "compacted": KafkaError.INVALID_CONFIG,
        "nowhere": KafkaError.INVALID_REPLICA_ASSIGNMENT}
    metadata = admin.list_topics(timeout=TIMEOUT).topics
    assert "unknown" not in metadata and len(metadata["placed"].partitions) == 2

    configs = topic_configs(admin, "strict")
    assert (configs["min.insync.replicas"].value, configs["min.insync.replicas"].source) == \
        ("2", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert (configs["retention.ms"].value, configs["retention.ms"].source) == \
        ("604800000", ConfigSource.DEFAULT_CONFIG.value)

    changes = ConfigResource("topic", "strict", incremental_configs=[
        ConfigEntry("min.insync.replicas", "1", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", None, incremental_operation=AlterConfigOpType.DELETE)])
    assert outcomes(admin.incremental_alter_configs([changes])) == {changes: None}
    bad = ConfigResource("topic", "strict", incremental_configs=[
        ConfigEntry("min.insync.replicas", "x", incremental_operation=AlterConfigOpType.SET)])
    assert outcomes(admin.incremental_alter_configs([bad])) == {bad: KafkaError.INVALID_CONFIG}
    overridden = {name: entry.value for name, entry in topic_configs(admin, "strict").items()
                  if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}
    assert overridden == {"min.insync.replicas": "1", "unclean.leader.election.enable": "false"}

    [described] = admin.describe_configs([ConfigResource("broker", "1")]).values()
    assert described.result(TIMEOUT)["num.partitions"].value == "4"

    broker.stop()
    broker.start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert topic_configs(admin, "strict")["min.insync.replicas"].value == "1"


def test_kafka_python_admin_client(broker):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        admin.create_topics([KNewTopic("t", 1, 1, topic_configs={"min.insync.replicas": "2"}),
                             KNewTopic("placed", replica_assignments={0: [1], 1: [1]})])
        with pytest.raises(InvalidConfigurationError, match="Unknown topic config name: nope"):
            admin.create_topics([KNewTopic("bad", 1, 1, topic_configs={"nope": "1"})])
        with pytest.raises(InvalidReplicationAssignmentError, match="more than once"):
            admin.create_topics([KNewTopic("twice", replica_assignments={0: [1, 1]})])
        resource = KConfigResource(ConfigResourceType.TOPIC, "t")
        described = admin.describe_configs([resource])["topic"]["t"]     # modified keys only
        assert {name: entry["value"] for name, entry in described.items()} == {
            "min.insync.replicas": "2"}
        altered = admin.alter_configs([KConfigResource(
            ConfigResourceType.TOPIC, "t", configs={"min.insync.replicas": "1",
                                                    "retention.ms": "-1"})])
        assert altered == {"topic": {"t": "OK"}}
        described = admin.describe_configs([resource])["topic"]["t"]
        assert {name: entry["value"] for name, entry in described.items()} == {
            "min.insync.replicas": "1", "retention.ms": "-1"}
        refused = admin.alter_configs([KConfigResource(
            ConfigResourceType.TOPIC, "t", configs={"retention.ms": "1000"})])
        assert "InvalidConfigurationError" in refused["topic"]["t"]
    finally:
        admin.close()
