"""Per-topic configs over the wire on one node: CreateTopics with configs
and manual assignments, DescribeConfigs (v1–v4) with sources, synonyms,
types and documentation, IncrementalAlterConfigs (v0–v1) — each refused
as Kafka refuses it — and the configs taking effect and surviving a
restart."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.config import SETTINGS
from reference_broker.topic_configs import APPEND, DELETE, SET, SUBTRACT, TOPIC_CONFIGS
from tests.reference_broker.protocol import entities
from tests.reference_broker.protocol.entities import BROKER_RESOURCE, TOPIC_RESOURCE
from tests.reference_broker.record_batches import values_batch

DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5


def created(response):
    [topic] = response.topics
    return topic.error_code, topic.error_message


async def describe(client, name, keys=None, **options):
    response = await client.call(entities.describe_configs([(TOPIC_RESOURCE, name, keys)],
                                                           **options))
    [result] = response.results
    return result


def by_name(result):
    return {entry.name: entry for entry in result.configs}


async def alter(client, name, *changes, validate_only=False, version=1):
    response = await client.call(entities.incremental_alter_configs(
        [(TOPIC_RESOURCE, name, list(changes))], validate_only=validate_only, version=version))
    [answer] = response.responses
    return answer.error_code, answer.error_message


@pytest.mark.parametrize("version", [1, 2, 3, 4])
def test_describe_a_topic_created_with_configs(run_on_node, version):
    async def scenario(node):
        client = node.connect()
        assert created(await client.call(entities.create_topics("t", configs={
            "min.insync.replicas": "2", "cleanup.policy": " delete ",
            "retention.ms": "-1"}))) == (ErrorCode.none, None)
        result = await describe(client, "t", synonyms=True, documentation=True)
        entries = by_name(result)
        assert (result.error_code, list(entries)) == (ErrorCode.none, list(TOPIC_CONFIGS))
        seen = {name: (e.value, e.config_source, e.read_only)
                for name, e in entries.items()}
        assert seen["min.insync.replicas"] == ("2", DYNAMIC_TOPIC_CONFIG, False)
        assert seen["cleanup.policy"] == ("delete", DYNAMIC_TOPIC_CONFIG, False)
        assert seen["segment.bytes"] == ("2000000", STATIC_BROKER_CONFIG, False)
        assert seen["unclean.leader.election.enable"] == ("false", DEFAULT_CONFIG, False)
        assert seen["compression.type"] == ("producer", DEFAULT_CONFIG, False)
        assert [(s.name, s.value, s.source)
                for s in entries["min.insync.replicas"].synonyms] == [
            ("min.insync.replicas", "2", DYNAMIC_TOPIC_CONFIG),
            ("min.insync.replicas", "1", DEFAULT_CONFIG)]
        assert [(s.name, s.source) for s in entries["segment.bytes"].synonyms] == [
            ("log.segment.bytes", STATIC_BROKER_CONFIG)]
        if version >= 3:
            assert entries["min.insync.replicas"].config_type == 3      # INT
            assert entries["cleanup.policy"].config_type == 7           # LIST
            assert entries["min.insync.replicas"].documentation.startswith("applied here")
            assert "not implemented" in entries["cleanup.policy"].documentation
    run_on_node(scenario, "log.segment.bytes=2000000")


def test_describe_picks_keys_and_refuses_what_kafka_refuses(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        picked = await describe(client, "t", ["retention.ms", "no.such.key"])
        assert [(e.name, e.value) for e in picked.configs] == [("retention.ms", "604800000")]
        response = await client.call(entities.describe_configs([
            (TOPIC_RESOURCE, "missing", None), (TOPIC_RESOURCE, "a/b", None),
            (BROKER_RESOURCE, "1", None), (BROKER_RESOURCE, "", None),
            (BROKER_RESOURCE, "7", None), (8, "1", None)]))
        errors = [(r.error_code, len(r.configs)) for r in response.results]
        assert errors == [
            (ErrorCode.unknown_topic_or_partition, 0), (ErrorCode.invalid_topic_exception, 0),
            (ErrorCode.none, len(SETTINGS)), (ErrorCode.none, 0),
            (ErrorCode.invalid_request, 0), (ErrorCode.invalid_request, 0)]
        broker = by_name(response.results[2])
        assert (broker["num.partitions"].value, broker["num.partitions"].config_source,
                broker["num.partitions"].read_only) == ("3", STATIC_BROKER_CONFIG, True)
        assert broker["log.flush.interval.ms"].value == str(2 ** 63 - 1)
    run_on_node(scenario, "num.partitions=3")


@pytest.mark.parametrize("configs, error, says", [
    ({"foo.bar": "1"}, ErrorCode.invalid_config, "Unknown topic config name: foo.bar"),
    ({"min.insync.replicas": "0"}, ErrorCode.invalid_config, "must be at least 1"),
    ({"min.insync.replicas": "two"}, ErrorCode.invalid_config, "Not a number of type INT"),
    ({"min.insync.replicas": None}, ErrorCode.invalid_config, "Null value not supported"),
    ({"unclean.leader.election.enable": "yes"}, ErrorCode.invalid_config, "true or false"),
    ({"cleanup.policy": "shred"}, ErrorCode.invalid_config, "must be one of: compact, delete"),
    ({"cleanup.policy": "compact"}, ErrorCode.invalid_config, "compaction is not implemented"),
    ({"retention.ms": "60000"}, ErrorCode.invalid_config, "never deletes records"),
    ({"compression.type": "zstd"}, ErrorCode.invalid_config, "only producer is accepted"),
    ({"message.timestamp.type": "LogAppendTime"}, ErrorCode.invalid_config, "CreateTime"),
    ({"segment.ms": "1000", "preallocate": "true", "min.cleanable.dirty.ratio": "0.9",
      "leader.replication.throttled.replicas": "0:1, 1:1", "message.format.version": "2.8",
      "retention.ms": "2592000000", "max.message.bytes": "500"}, ErrorCode.none, None),
], ids=lambda v: "-".join(v) if isinstance(v, dict) else None)
def test_create_topic_configs_are_checked(run_on_node, configs, error, says):
    async def scenario(node):
        answer, message = created(await node.connect().call(
            entities.create_topics("t", configs=configs)))
        assert answer == error
        assert (says in message) if says else message is None
        assert ("t" in node.broker.topics) == (error == ErrorCode.none)
    run_on_node(scenario)


@pytest.mark.parametrize("partitions, replication_factor, assignments, error, says", [
    (-1, -1, {1: [1], 0: [1]}, ErrorCode.none, None),
    (2, -1, {0: [1], 1: [1]}, ErrorCode.invalid_request, "numPartitions was not set to -1"),
    (-1, 1, {0: [1]}, ErrorCode.invalid_request, "replication factor was not set to -1"),
    (-1, -1, {0: [1, 1]}, ErrorCode.invalid_replica_assignment, "broker 1 more than once"),
    (-1, -1, {0: [2]}, ErrorCode.invalid_replica_assignment, "no such broker is registered"),
    (-1, -1, {0: []}, ErrorCode.invalid_replica_assignment, "empty replica list"),
    (-1, -1, {1: [1]}, ErrorCode.invalid_replica_assignment, "consecutive 0-based"),
])
def test_manual_assignments(run_on_node, partitions, replication_factor, assignments, error, says):
    async def scenario(node):
        answer, message = created(await node.connect().call(entities.create_topics(
            "t", partitions=partitions, replication_factor=replication_factor,
            assignments=assignments)))
        assert answer == error and ((says in message) if says else message is None)
        if error == ErrorCode.none:
            assert {p: s.replicas for p, s in node.broker.topics["t"].partitions.items()} \
                == {0: (1,), 1: (1,)}
        else:
            assert "t" not in node.broker.topics
    run_on_node(scenario)


@pytest.mark.parametrize("version", [0, 1])
def test_incremental_alter_configs(run_on_node, version):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t", configs={"retention.ms": "-1"}))
        throttled = "leader.replication.throttled.replicas"
        assert await alter(client, "t", ("min.insync.replicas", SET, "2"),
                           ("retention.ms", DELETE, None), (throttled, APPEND, "0:1,1:1"),
                           version=version) == (ErrorCode.none, None)
        assert node.broker.topics["t"].configs == {
            "min.insync.replicas": "2", throttled: "0:1,1:1"}
        assert await alter(client, "t", (throttled, SUBTRACT, "0:1"),
                           version=version) == (ErrorCode.none, None)
        entries = by_name(await describe(client, "t"))
        assert (entries[throttled].value, entries["retention.ms"].value,
                entries["retention.ms"].config_source) == ("1:1", "604800000", DEFAULT_CONFIG)
        assert node.broker.partition("t", 0).leader.min_insync_replicas == 2
    run_on_node(scenario)


@pytest.mark.parametrize("resource, changes, error, says", [
    ((TOPIC_RESOURCE, "missing"), [("min.insync.replicas", SET, "2")],
     ErrorCode.unknown_topic_or_partition, "does not exist"),
    ((TOPIC_RESOURCE, "t"), [("min.insync.replicas", SET, "0")], ErrorCode.invalid_config,
     "must be at least 1"),
    ((TOPIC_RESOURCE, "t"), [("nope", SET, "1")], ErrorCode.invalid_config,
     "Unknown topic config name: nope"),
    ((TOPIC_RESOURCE, "t"), [("min.insync.replicas", APPEND, "2")], ErrorCode.invalid_config,
     "Can't APPEND to key min.insync.replicas because its type is not LIST"),
    ((TOPIC_RESOURCE, "t"), [("cleanup.policy", APPEND, "compact")], ErrorCode.invalid_config,
     "compaction is not implemented"),
    ((TOPIC_RESOURCE, "t"), [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)],
     ErrorCode.invalid_request, "duplicate config keys"),
    ((TOPIC_RESOURCE, "t"), [("retention.ms", 7, "1")], ErrorCode.invalid_request,
     "Unknown alter config operation 7"),
    ((BROKER_RESOURCE, "1"), [("min.insync.replicas", SET, "2")], ErrorCode.invalid_config,
     "Cannot update these configs dynamically: min.insync.replicas"),
    ((16, "x"), [], ErrorCode.invalid_request, "Unsupported resource type: 16"),
])
def test_incremental_alter_configs_refusals(run_on_node, resource, changes, error, says):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t", configs={"min.insync.replicas": "1"}))
        response = await client.call(entities.incremental_alter_configs(
            [(*resource, changes)]))
        [answer] = response.responses
        assert answer.error_code == error and says in answer.error_message
        assert node.broker.topics["t"].configs == {"min.insync.replicas": "1"}
        # validate_only checks the same and changes nothing.
        assert await alter(client, "t", ("min.insync.replicas", SET, "3"),
                           validate_only=True) == (ErrorCode.none, None)
        assert node.broker.topics["t"].configs == {"min.insync.replicas": "1"}
    run_on_node(scenario)


def test_max_message_bytes_and_segment_bytes_take_effect_per_topic(run_on_node, tmp_path):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("small", configs={
            "max.message.bytes": "200", "segment.bytes": "300"}))
        await client.call(entities.create_topics("plain"))
        large = values_batch(20, 20)

        async def produce(topic):
            response = await client.call(entities.produce(topic, 0, large))
            return response.responses[0].partition_responses[0].error_code
        assert await produce("small") == ErrorCode.message_too_large
        assert await produce("plain") == ErrorCode.none
        assert await alter(client, "small", ("max.message.bytes", DELETE, None)) == \
            (ErrorCode.none, None)
        for _ in range(3):
            assert await produce("small") == ErrorCode.none
        # segment.bytes=300: each batch of ~400 bytes gets its own segment.
        assert len(list((tmp_path / "small-0").glob("*.log"))) == 3
        assert len(list((tmp_path / "plain-0").glob("*.log"))) == 1
    run_on_node(scenario)


def test_configs_survive_a_restart(run_on_node):
    async def first(node):
        client = node.connect()
        await client.call(entities.create_topics("t", configs={"min.insync.replicas": "3"}))
        await alter(client, "t", ("unclean.leader.election.enable", SET, "true"))

    async def second(node):
        entries = by_name(await describe(node.connect(), "t"))
        return {name: entries[name].value for name in ("min.insync.replicas",
                                                       "unclean.leader.election.enable")}
    run_on_node(first)
    assert run_on_node(second) == {"min.insync.replicas": "3",
                                   "unclean.leader.election.enable": "true"}
