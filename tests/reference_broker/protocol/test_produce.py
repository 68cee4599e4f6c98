"""Produce over the wire: per-partition errors that append nothing (unknown
partition, CRC, Kafka's one-batch rule, size), acks=0 silence, and the
idempotent producer (KIP-98): sequence gaps, fenced epochs, retries
answered with the original offsets — also after a restart."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.txn.partition_txns import ABORT, Marker
from tests.reference_broker.protocol import entities
from tests.reference_broker.protocol.wire import ConnectionClosed, encode_request
from tests.reference_broker.record_batches import kio_batch, records_in, values_batch


def answer(response):
    """The one partition's answer of a one-partition produce."""
    [topic] = response.responses
    [partition] = topic.partition_responses
    return partition


async def fetched_values(client, topic: str = "t") -> list[bytes]:
    response = await client.call(entities.fetch(topic, 0, 0))
    return [value for _, value in records_in(response.responses[0].partitions[0].records)]


async def new_topic(client, name: str = "t") -> None:
    created = await client.call(entities.create_topics(name))
    assert created.topics[0].error_code == ErrorCode.none


async def producer_id(client) -> int:
    response = await client.call(entities.init_producer_id())
    assert response.error_code == ErrorCode.none and response.producer_epoch == 0
    return response.producer_id


async def init_transactional(node, transactional_id: str = "tx"):
    """InitProducerId at the node's own coordinator, once it has loaded."""
    await node.broker.transaction_state.ensure()
    for _ in range(100):
        init = await node.broker.transactions.init_producer_id(transactional_id, 60000)
        if init.error == ErrorCode.none:
            return init
        await asyncio.sleep(0.05)   # the coordinator is loading its partition
    raise AssertionError(f"InitProducerId: {init.error.name}")


def transactional(request, transactional_id: str = "tx"):
    """A Produce request sent as a transactional producer's."""
    return type(request)(transactional_id=transactional_id, acks=request.acks,
                         timeout=request.timeout, topic_data=request.topic_data)


def test_produce_appends_and_answers_base_offsets(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        first = answer(await client.call(entities.produce("t", 0, values_batch(3))))
        second = answer(await client.call(entities.produce("t", 0, values_batch(2, start=3),
                                                          acks=1)))
        assert (first.error_code, first.base_offset) == (ErrorCode.none, 0)
        assert (second.error_code, second.base_offset, second.log_start_offset) == \
            (ErrorCode.none, 3, 0)
        assert await fetched_values(client) == [b"%010d" % n for n in range(5)]
    run_on_node(scenario)


@pytest.mark.parametrize("topic,partition", [("missing", 0), ("t", 1), ("t", -1)])
def test_produce_to_an_unknown_partition_is_refused_and_creates_nothing(run_on_node, topic,
                                                                        partition):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        response = answer(await client.call(
            entities.produce(topic, partition, values_batch(1))))
        assert (response.error_code, response.base_offset) == \
            (ErrorCode.unknown_topic_or_partition, -1)
        # Produce never auto-creates (only Metadata does), even with auto-creation on.
        assert sorted(node.broker.topics) == ["t"]
        assert node.broker.partition("t", 0).high_watermark == 0
    run_on_node(scenario)


def test_batch_with_a_bad_crc_is_corrupt_and_appends_nothing(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        batch = bytearray(values_batch(3))
        batch[-1] ^= 0xFF  # inside the records, covered by the CRC-32C
        response = answer(await client.call(entities.produce("t", 0, bytes(batch))))
        assert response.error_code == ErrorCode.corrupt_message
        assert node.broker.partition("t", 0).high_watermark == 0
        assert await fetched_values(client) == []
    run_on_node(scenario)


@pytest.mark.parametrize("records", [b"", None, values_batch(1) + values_batch(1, start=1)],
                         ids=["empty", "null", "two-batches"])
def test_produce_must_carry_exactly_one_batch_per_partition(run_on_node, records):
    # ProduceRequest.validateRecords (v3+): at least one batch, and exactly one.
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        response = answer(await client.call(entities.produce("t", 0, records)))
        assert response.error_code == ErrorCode.invalid_record
        assert node.broker.partition("t", 0).high_watermark == 0
    run_on_node(scenario)


def test_batch_above_message_max_bytes_is_too_large(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        small = answer(await client.call(entities.produce("t", 0, values_batch(1))))
        large = answer(await client.call(entities.produce("t", 0, values_batch(20, 20))))
        assert small.error_code == ErrorCode.none
        assert large.error_code == ErrorCode.message_too_large
        assert node.broker.partition("t", 0).high_watermark == 1
    run_on_node(scenario, "message.max.bytes=200")


def test_acks_other_than_0_1_all_are_refused(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        response = answer(await client.call(entities.produce("t", 0, values_batch(1), acks=2)))
        assert response.error_code == ErrorCode.invalid_required_acks
        assert node.broker.partition("t", 0).high_watermark == 0
    run_on_node(scenario)


def test_acks_0_gets_no_response_and_the_next_request_is_answered(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        # Not registered as expecting an answer: the next response must be
        # the Metadata's (receive checks the correlation id).
        client.feed(encode_request(entities.produce("t", 0, values_batch(3), acks=0), 100))
        meta = await client.call(entities.metadata(["t"]))
        assert meta.topics[0].error_code == ErrorCode.none
        assert client.unread() == b""
        assert node.broker.partition("t", 0).high_watermark == 3
    run_on_node(scenario)


def test_acks_0_produce_that_fails_closes_the_connection(run_on_node):
    # KafkaApis.handleProduceRequest: the only way to tell an acks=0 producer.
    async def scenario(node):
        client = node.connect()
        client.feed(encode_request(entities.produce("missing", 0, values_batch(1), acks=0), 1))
        client.send(entities.api_versions())
        with pytest.raises(ConnectionClosed):
            await client.receive()
        await node.assert_serves()
    run_on_node(scenario)


def test_sequence_gap_is_out_of_order_and_appends_nothing(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        pid = await producer_id(client)
        ok = answer(await client.call(entities.produce("t", 0, values_batch(
            3, producer_id=pid, producer_epoch=0, base_sequence=0))))
        gap = answer(await client.call(entities.produce("t", 0, values_batch(
            2, start=3, producer_id=pid, producer_epoch=0, base_sequence=4))))
        next_ = answer(await client.call(entities.produce("t", 0, values_batch(
            2, start=3, producer_id=pid, producer_epoch=0, base_sequence=3))))
        assert (ok.error_code, ok.base_offset) == (ErrorCode.none, 0)
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        assert (next_.error_code, next_.base_offset) == (ErrorCode.none, 3)
        assert await fetched_values(client) == [b"%010d" % n for n in range(5)]
    run_on_node(scenario)


def test_retried_batch_gets_its_original_offsets_and_is_not_appended_twice(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        pid = await producer_id(client)
        first = values_batch(3, producer_id=pid, producer_epoch=0, base_sequence=0)
        second = values_batch(2, start=3, producer_id=pid, producer_epoch=0, base_sequence=3)
        assert answer(await client.call(entities.produce("t", 0, first))).base_offset == 0
        assert answer(await client.call(entities.produce("t", 0, second))).base_offset == 3
        for batch, offset in ((first, 0), (second, 3), (first, 0)):
            retry = answer(await node.connect().call(entities.produce("t", 0, batch)))
            assert (retry.error_code, retry.base_offset) == (ErrorCode.none, offset)
        assert node.broker.partition("t", 0).high_watermark == 5
        assert await fetched_values(client) == [b"%010d" % n for n in range(5)]
    run_on_node(scenario)


def test_older_producer_epoch_is_fenced(run_on_node):
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        pid = await producer_id(client)
        current = answer(await client.call(entities.produce("t", 0, kio_batch(
            [b"new"], producer_id=pid, producer_epoch=1, base_sequence=0))))
        zombie = answer(await client.call(entities.produce("t", 0, kio_batch(
            [b"old"], producer_id=pid, producer_epoch=0, base_sequence=1))))
        assert current.error_code == ErrorCode.none
        assert zombie.error_code == ErrorCode.invalid_producer_epoch
        assert await fetched_values(client) == [b"new"]
    run_on_node(scenario)


def test_producer_dedup_survives_a_restart_on_the_same_data_dir(run_on_node):
    # Node 1's producer ids start at 1 << 40: the node id in the high bits
    # keeps brokers' ids apart.
    pid = 1 << 40
    first = values_batch(3, base_sequence=0, producer_epoch=0, producer_id=pid)
    second = values_batch(2, start=3, base_sequence=3, producer_epoch=0, producer_id=pid)

    async def before(node):
        client = node.connect()
        await new_topic(client)
        assert await producer_id(client) == pid
        assert answer(await client.call(entities.produce("t", 0, first))).base_offset == 0
        assert answer(await client.call(entities.produce("t", 0, second))).base_offset == 3

    async def after(node):
        client = node.connect()
        # The producer state was rebuilt from the log: a retry is recognised...
        for batch, offset in ((second, 3), (first, 0)):
            retry = answer(await client.call(entities.produce("t", 0, batch)))
            assert (retry.error_code, retry.base_offset) == (ErrorCode.none, offset)
        # ...a gap is still a gap, and the sequence goes on where it was.
        gap = answer(await client.call(entities.produce("t", 0, values_batch(
            1, start=5, base_sequence=6, producer_epoch=0, producer_id=pid))))
        assert gap.error_code == ErrorCode.out_of_order_sequence_number
        following = answer(await client.call(entities.produce("t", 0, values_batch(
            1, start=5, base_sequence=5, producer_epoch=0, producer_id=pid))))
        assert (following.error_code, following.base_offset) == (ErrorCode.none, 5)
        assert await fetched_values(client) == [b"%010d" % n for n in range(6)]
        # Producer ids are never handed out twice across restarts.
        assert await producer_id(client) > pid

    run_on_node(before)
    run_on_node(after)


def test_a_transactional_batch_outside_its_transaction_is_refused(run_on_node):
    """KIP-890 part 1: the leader asks the coordinator before a batch opens
    a transaction. A batch of a partition the transaction does not hold (a
    late batch of an aborted transaction looks the same) is refused with
    INVALID_TXN_STATE and appends nothing; once the partition is added it
    is written."""
    async def scenario(node):
        client = node.connect()
        await new_topic(client)
        coordinator = node.broker.transactions
        init = await init_transactional(node)
        batch = values_batch(1, producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                             base_sequence=0, attributes=0x10)
        request = transactional(entities.produce("t", 0, batch))
        refused = answer(await client.call(request))
        assert refused.error_code == ErrorCode.invalid_txn_state
        assert node.broker.partition("t", 0).log.log_end_offset == 0
        assert await coordinator.add_partitions("tx", init.producer_id, init.producer_epoch,
                                                [("t", 0)]) == ErrorCode.none
        written = answer(await client.call(request))
        assert (written.error_code, written.base_offset) == (ErrorCode.none, 0)
        assert node.broker.partition("t", 0).last_stable_offset == 0   # open
    run_on_node(scenario)


def test_a_batch_its_request_did_not_verify_cannot_outlive_its_transaction(run_on_node):
    """KIP-890 part 1's sentinel guard. One request carries a batch for t-0,
    where the producer's transaction is open (so it is not verified), and one
    for t-1, which opens the transaction there (so the leader asks the
    coordinator). While it asks, the transaction is aborted and its marker
    lands in t-0. The t-0 batch must then be refused (Kafka: the request's
    guard is the sentinel and the transaction is no longer ongoing), not
    appended as a new transaction that no coordinator will ever end, which
    would hold t-0's last stable offset for good.

    The marker lands inside the verification, wrapped around the real one:
    only that places it between a request's check and its append."""
    async def scenario(node):
        client = node.connect()
        created = await client.call(entities.create_topics("t", partitions=2))
        assert created.topics[0].error_code == ErrorCode.none
        coordinator, broker = node.broker.transactions, node.broker
        init = await init_transactional(node)
        pid, epoch = init.producer_id, init.producer_epoch
        assert await coordinator.add_partitions("tx", pid, epoch, [("t", 0)]) == ErrorCode.none
        first = transactional(entities.produce("t", 0, values_batch(
            1, producer_id=pid, producer_epoch=epoch, base_sequence=0, attributes=0x10)))
        assert answer(await client.call(first)).error_code == ErrorCode.none
        t0 = broker.partition("t", 0)

        real_verify = broker.verifier.verify

        async def verify_after_an_abort(*args):
            # The abort's marker lands in t-0 (what WriteTxnMarkers does there).
            assert t0.append_marker(pid, epoch, Marker(ABORT, 0))[0] == ErrorCode.none
            return await real_verify(*args)
        broker.verifier.verify = verify_after_an_abort

        data = first.topic_data[0]
        both = type(first)(transactional_id="tx", acks=-1, timeout=first.timeout, topic_data=(
            type(data)(name="t", partition_data=tuple(
                type(data.partition_data[0])(index=index, records=values_batch(
                    1, producer_id=pid, producer_epoch=epoch, base_sequence=sequence,
                    attributes=0x10))
                for index, sequence in ((0, 1), (1, 0)))),))
        response = await client.call(both)
        errors = {p.index: p.error_code for p in response.responses[0].partition_responses}
        assert errors[0] == ErrorCode.invalid_txn_state
        assert not t0.txns.is_open(pid)
        assert t0.last_stable_offset == t0.high_watermark == t0.log.log_end_offset
    run_on_node(scenario)
