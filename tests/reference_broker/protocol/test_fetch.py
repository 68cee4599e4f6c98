"""Fetch over the wire: offsets out of range, leader epoch fencing
(KIP-320), long polls woken by another connection's produce, and the
first batch returned whole however small the limits (KIP-74)."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from tests.reference_broker.protocol import entities
from tests.reference_broker.protocol.wire import settle
from tests.reference_broker.record_batches import records_in, values_batch


def answer(response):
    """The one partition's data of a one-partition fetch."""
    assert response.error_code == ErrorCode.none and response.session_id == 0
    [topic] = response.responses
    [partition] = topic.partitions
    return partition


async def topic_with_records(node, count: int = 5):
    client = node.connect()
    await client.call(entities.create_topics("t"))
    produced = await client.call(entities.produce("t", 0, values_batch(count)))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    return client


@pytest.mark.parametrize("offset", [6, 1000, -1])
def test_fetch_outside_the_log_is_offset_out_of_range(run_on_node, offset):
    async def scenario(node):
        client = await topic_with_records(node)
        # Errors answer at once, however long the client would wait.
        loop = asyncio.get_running_loop()
        started = loop.time()
        data = answer(await client.call(entities.fetch("t", 0, offset, max_wait_ms=5000,
                                                       min_bytes=1)))
        assert loop.time() - started < 2.5
        assert data.error_code == ErrorCode.offset_out_of_range
        assert (data.high_watermark, data.log_start_offset, data.records) == (5, 0, b"")
    run_on_node(scenario)


def test_fetch_at_the_log_end_is_empty_not_an_error(run_on_node):
    async def scenario(node):
        client = await topic_with_records(node)
        data = answer(await client.call(entities.fetch("t", 0, 5)))
        assert (data.error_code, data.records, data.high_watermark) == (ErrorCode.none, b"", 5)
    run_on_node(scenario)


@pytest.mark.parametrize("topic,partition", [("missing", 0), ("t", 3)])
def test_fetch_of_an_unknown_partition_answers_at_once(run_on_node, topic, partition):
    async def scenario(node):
        client = await topic_with_records(node)
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await client.call(entities.fetch(topic, partition, 0, max_wait_ms=5000,
                                                    min_bytes=1))
        assert loop.time() - started < 2.5
        data = answer(response)
        assert (data.error_code, data.high_watermark) == \
            (ErrorCode.unknown_topic_or_partition, -1)
        assert sorted(node.broker.topics) == ["t"]  # fetch never creates topics
    run_on_node(scenario)


def test_fetch_with_a_stale_or_future_leader_epoch_is_fenced(run_on_node):
    async def first_term(node):
        await topic_with_records(node)

    async def second_term(node):
        # A restart is a new leadership term: the controller fences the old
        # registration (no leader, epoch 1) and elects the broker again when
        # it is unfenced (epoch 2), as KRaft does.
        client = node.connect()
        meta = await client.call(entities.metadata(["t"]))
        assert meta.topics[0].partitions[0].leader_epoch == 2
        stale = answer(await client.call(entities.fetch("t", 0, 0, current_leader_epoch=1)))
        future = answer(await client.call(entities.fetch("t", 0, 0, current_leader_epoch=3)))
        current = answer(await client.call(entities.fetch("t", 0, 0, current_leader_epoch=2)))
        assert (stale.error_code, stale.records) == (ErrorCode.fenced_leader_epoch, b"")
        assert (future.error_code, future.records) == (ErrorCode.unknown_leader_epoch, b"")
        assert current.error_code == ErrorCode.none
        assert len(records_in(current.records)) == 5
        # Fetch v4-v8 carry no epoch: never fenced.
        old = answer(await client.call(entities.fetch("t", 0, 0, version=8)))
        assert old.error_code == ErrorCode.none

    run_on_node(first_term)
    run_on_node(second_term)


def test_long_poll_returns_as_soon_as_another_connection_appends(run_on_node):
    async def scenario(node):
        consumer = await topic_with_records(node, count=2)
        loop = asyncio.get_running_loop()
        started = loop.time()
        consumer.send(entities.fetch("t", 0, 2, max_wait_ms=2000, min_bytes=1))
        await settle()
        assert consumer.unread() == b""  # waiting for data
        producer = node.connect()
        await producer.call(entities.produce("t", 0, values_batch(3, start=2)))
        data = answer(await consumer.receive())
        # Behaviour, not speed: it did not sit out its 2 s max wait.
        assert loop.time() - started < 1.5
        assert [offset for offset, _ in records_in(data.records)] == [2, 3, 4]
        assert data.high_watermark == 5
    run_on_node(scenario)


def test_long_poll_without_data_waits_its_max_wait(run_on_node):
    async def scenario(node):
        client = await topic_with_records(node, count=2)
        loop = asyncio.get_running_loop()
        started = loop.time()
        data = answer(await client.call(entities.fetch("t", 0, 2, max_wait_ms=200,
                                                       min_bytes=1)))
        assert loop.time() - started >= 0.15
        assert (data.error_code, data.records) == (ErrorCode.none, b"")
    run_on_node(scenario)


def test_first_batch_is_returned_whole_beyond_the_byte_limits(run_on_node):
    async def scenario(node):
        client = await topic_with_records(node, count=3)
        await client.call(entities.produce("t", 0, values_batch(3, start=3)))
        data = answer(await client.call(entities.fetch("t", 0, 0, max_bytes=10)))
        # KIP-74: the whole first batch, nothing of the second.
        assert [offset for offset, _ in records_in(data.records)] == [0, 1, 2]
        # From the middle of a batch, the batch containing the offset.
        middle = answer(await client.call(entities.fetch("t", 0, 4)))
        assert [offset for offset, _ in records_in(middle.records)] == [3, 4, 5]
    run_on_node(scenario)
