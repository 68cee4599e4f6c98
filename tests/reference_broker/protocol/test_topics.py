"""CreateTopics, DeleteTopics and Metadata over the wire: per-topic
errors as Kafka answers them, and auto-creation on Metadata only when
both the broker (auto.create.topics.enable) and the request allow it."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.reference_broker.protocol import entities
from tests.reference_broker.record_batches import values_batch


def created(response):
    [topic] = response.topics
    return topic


@pytest.mark.parametrize("version", [2, 3, 4])
def test_create_topic_then_duplicate(run_on_node, version):
    async def scenario(node):
        client = node.connect()
        first = created(await client.call(entities.create_topics(
            "orders", partitions=3, version=version)))
        again = created(await client.call(entities.create_topics(
            "orders", partitions=5, version=version)))
        assert (first.name, first.error_code) == ("orders", ErrorCode.none)
        assert again.error_code == ErrorCode.topic_already_exists
        meta = await client.call(entities.metadata(["orders"]))
        assert [p.partition_index for p in meta.topics[0].partitions] == [0, 1, 2]
    run_on_node(scenario)


@pytest.mark.parametrize("name", ["", ".", "..", "a/b", "has space", "ünïcode", "x" * 250,
                                  "x" * 32700, "é" * 16000],
                         ids=lambda name: name if len(name) < 20 else f"{len(name)} chars")
def test_create_topic_with_an_illegal_name(run_on_node, name):
    async def scenario(node):
        answer = created(await node.connect().call(entities.create_topics(name)))
        assert answer.error_code == ErrorCode.invalid_topic_exception
        assert answer.error_message
        assert not node.broker.topics
    run_on_node(scenario)


@pytest.mark.parametrize("partitions,replication_factor,error", [
    (1, 3, ErrorCode.invalid_replication_factor),
    (1, 0, ErrorCode.invalid_replication_factor),
    (0, 1, ErrorCode.invalid_partitions),
    (-5, 1, ErrorCode.invalid_partitions),
])
def test_create_topic_with_impossible_sizes(run_on_node, partitions, replication_factor, error):
    async def scenario(node):
        answer = created(await node.connect().call(entities.create_topics(
            "t", partitions=partitions, replication_factor=replication_factor)))
        assert answer.error_code == error
        assert not node.broker.topics
    run_on_node(scenario)


@pytest.mark.parametrize("names,partitions", [
    (["huge"], 2 ** 31 - 1),
    (["half", "other-half"], 5000),
])
def test_create_topics_producing_too_many_records_is_refused_whole(run_on_node, tmp_path, names,
                                                                    partitions):
    # QuorumController.MAX_RECORDS_PER_USER_OP: a TopicRecord and a
    # PartitionRecord per partition, 10000 at most per request.
    async def scenario(node):
        response = await node.connect().call(entities.create_topics(
            names, partitions=partitions))
        assert [(t.name, t.error_code) for t in response.topics] == \
            [(name, ErrorCode.policy_violation) for name in names]
        assert not node.broker.topics
        assert not [p.name for p in tmp_path.iterdir() if p.is_dir()]  # no partition logs
    run_on_node(scenario)


def test_create_topic_with_broker_defaults(run_on_node):
    async def scenario(node):
        client = node.connect()
        answer = created(await client.call(entities.create_topics(
            "t", partitions=-1, replication_factor=-1)))
        assert answer.error_code == ErrorCode.none
        assert len(node.broker.topics["t"].partitions) == 4
    run_on_node(scenario, "num.partitions=4")


def test_validate_only_creates_nothing(run_on_node):
    async def scenario(node):
        client = node.connect()
        good = created(await client.call(entities.create_topics("t", validate_only=True)))
        bad = created(await client.call(entities.create_topics(
            "t", replication_factor=3, validate_only=True)))
        assert good.error_code == ErrorCode.none
        assert bad.error_code == ErrorCode.invalid_replication_factor
        assert not node.broker.topics
    run_on_node(scenario)


def test_delete_topic_then_it_is_unknown(run_on_node, tmp_path):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        await client.call(entities.produce("t", 0, values_batch(1)))
        deleted = await client.call(entities.delete_topics(["t", "missing"]))
        assert [(r.name, r.error_code) for r in deleted.responses] == \
            [("t", ErrorCode.none), ("missing", ErrorCode.unknown_topic_or_partition)]
        meta = await client.call(entities.metadata(["t"]))
        assert meta.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        assert not (tmp_path / "t-0").exists()
    run_on_node(scenario, "auto.create.topics.enable=false")


@pytest.mark.parametrize("version", [1, 4, 8, 9])
def test_metadata_auto_creates_a_named_topic(run_on_node, version):
    async def scenario(node):
        client = node.connect()
        meta = await client.call(entities.metadata(["fresh"], version=version))
        [topic] = meta.topics
        assert (topic.name, topic.error_code, topic.is_internal) == \
            ("fresh", ErrorCode.none, False)
        assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes)
                for p in topic.partitions] == [(0, 1, (1,), (1,)), (1, 1, (1,), (1,))]
        assert [b.node_id for b in meta.brokers] == [1] and meta.controller_id == 1
        assert "fresh" in node.broker.topics
    run_on_node(scenario, "num.partitions=2")


def test_metadata_does_not_create_when_the_broker_forbids_it(run_on_node):
    async def scenario(node):
        meta = await node.connect().call(entities.metadata(["fresh"]))
        assert [(t.name, t.error_code, t.partitions) for t in meta.topics] == \
            [("fresh", ErrorCode.unknown_topic_or_partition, ())]
        assert not node.broker.topics
    run_on_node(scenario, "auto.create.topics.enable=false")


def test_metadata_does_not_create_when_the_request_forbids_it(run_on_node):
    async def scenario(node):
        meta = await node.connect().call(entities.metadata(
            ["fresh"], allow_auto_topic_creation=False))
        assert meta.topics[0].error_code == ErrorCode.unknown_topic_or_partition
        assert not node.broker.topics
    run_on_node(scenario)


@pytest.mark.parametrize("auto_create", ["true", "false"])
def test_metadata_for_an_illegal_name_is_invalid_topic(run_on_node, auto_create):
    # KafkaApis.getTopicMetadata: Topic.validate fails -> INVALID_TOPIC_EXCEPTION,
    # whether or not the topic could have been auto-created.
    async def scenario(node):
        meta = await node.connect().call(entities.metadata(["a/b", ""]))
        assert [(t.name, t.error_code) for t in meta.topics] == \
            [("a/b", ErrorCode.invalid_topic_exception),
             ("", ErrorCode.invalid_topic_exception)]
        assert not node.broker.topics
    run_on_node(scenario, f"auto.create.topics.enable={auto_create}")


def test_metadata_for_all_topics_lists_every_topic_without_creating(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("b", partitions=2))
        await client.call(entities.create_topics("a"))
        meta = await client.call(entities.metadata(None))
        assert [(t.name, len(t.partitions)) for t in meta.topics] == [("a", 1), ("b", 2)]
        assert meta.cluster_id == node.broker.cluster_id
    run_on_node(scenario)
