"""Framing and routing at the connection: requests split or pipelined,
sizes out of range, bodies that do not decode, APIs and versions the
broker does not speak — each closes only its own connection — and
ApiVersions, which must be answered whatever its version (KIP-511)."""

from __future__ import annotations

import struct
from datetime import timedelta

import pytest
from kio.schema.delete_records.v1.request import (
    DeleteRecordsPartition, DeleteRecordsRequest, DeleteRecordsTopic,
)
from kio.schema.errors import ErrorCode

from reference_broker.protocol import metadata
from reference_broker.protocol.dispatch import VERSIONS
from reference_broker.protocol.shapes import Shapes
from tests.reference_broker.protocol import entities
from tests.reference_broker.protocol.wire import (
    ConnectionClosed, advertised, encode_request, header_prefix, settle, size_prefixed,
)
from tests.reference_broker.record_batches import records_in, values_batch


def test_request_fed_byte_by_byte_is_answered_once_complete(run_on_node):
    async def scenario(node):
        client = node.connect()
        frame = encode_request(entities.metadata(["t"]), correlation_id=42)
        client.expect(42, entities.METADATA, 8)
        client.feed(frame[:-1], chunk=1)
        await settle()
        assert client.unread() == b"" and not client.transport.closed
        client.feed(frame[-1:])
        meta = await client.receive()
        assert [t.name for t in meta.topics] == ["t"]
    run_on_node(scenario)


def test_pipelined_requests_in_one_chunk_are_answered_in_order(run_on_node):
    async def scenario(node):
        client = node.connect()
        requests = [(7, entities.create_topics("p")),
                    (3, entities.produce("p", 0, values_batch(3))),
                    (11, entities.fetch("p", 0, 0)),
                    (5, entities.api_versions(version=0))]
        for correlation_id, request in requests:
            client.expect(correlation_id, request.__api_key__, request.__version__)
        client.feed(b"".join(encode_request(r, c) for c, r in requests))
        created = await client.receive()
        produced = await client.receive()
        fetched = await client.receive()
        versions = await client.receive()
        assert created.topics[0].error_code == ErrorCode.none
        assert produced.responses[0].partition_responses[0].base_offset == 0
        # The fetch ran after the produce before it on the same connection.
        assert [v for _, v in records_in(fetched.responses[0].partitions[0].records)] == \
            [b"0000000000", b"0000000001", b"0000000002"]
        assert advertised(versions.api_keys) == VERSIONS
        assert client.unread() == b""
    run_on_node(scenario)


def test_many_pipelined_requests_pause_reading_until_drained(run_on_node):
    async def scenario(node):
        client = node.connect()
        count = 100
        for n in range(count):
            client.expect(n, entities.API_VERSIONS, 3)
        client.feed(b"".join(encode_request(entities.api_versions(), n) for n in range(count)))
        assert not client.transport.reading  # too many frames queued: flow control
        answers = [await client.receive() for _ in range(count)]
        assert all(a.error_code == ErrorCode.none for a in answers)
        assert client.transport.reading
    run_on_node(scenario)


def test_request_of_exactly_the_maximum_size_is_served_one_byte_more_closes(run_on_node):
    limit = 1000

    def padded(correlation_id: int) -> bytes:
        # A Metadata v1 body, with the client id padded to reach `limit` bytes.
        body = header_prefix(entities.METADATA, 1, correlation_id)
        pad = limit - len(body) - 2 - 4
        return size_prefixed(body + struct.pack(">h", pad) + b"c" * pad + struct.pack(">i", -1))

    async def scenario(node):
        client = node.connect()
        frame = padded(1)
        assert len(frame) == 4 + limit
        client.expect(1, entities.METADATA, 1)
        client.feed(frame)
        assert (await client.receive()).brokers[0].node_id == 1
        oversized = struct.pack(">i", limit + 1)
        client.feed(oversized)  # rejected on the size alone, before any body
        await client.closed()
        await node.assert_serves()
    run_on_node(scenario, f"socket.request.max.bytes={limit}")


@pytest.mark.parametrize("size", [-1, -(2 ** 31), 0, 7])
def test_size_below_a_request_header_closes_the_connection(run_on_node, size):
    async def scenario(node):
        client = node.connect()
        client.feed(struct.pack(">i", size) + b"\0" * 16)
        await client.closed()
        assert client.unread() == b""
        await node.assert_serves()
    run_on_node(scenario)


@pytest.mark.parametrize("request_entity", [
    entities.metadata(["t"]),
    entities.produce("t", 0, values_batch(2)),
    entities.fetch("t", 0, 0),
    entities.create_topics("truncated"),
], ids=["metadata", "produce", "fetch", "create_topics"])
@pytest.mark.parametrize("cut", [1, 3])
def test_truncated_body_cannot_be_decoded_and_closes(run_on_node, request_entity, cut):
    async def scenario(node):
        client = node.connect()
        body = encode_request(request_entity, 9)[4:]
        # The size is honest about the bytes sent, but they end mid-request.
        client.feed(size_prefixed(body[:-cut]))
        await client.closed()
        assert client.unread() == b""
        assert not node.broker.topics  # nothing was decoded, so nothing was created
        await node.assert_serves()
    run_on_node(scenario)


def test_trailing_bytes_after_the_request_are_ignored_as_kafka_does(run_on_node):
    # RequestContext.parseRequest reads what the schema says and no further.
    async def scenario(node):
        client = node.connect()
        request = entities.create_topics("trailing")
        body = encode_request(request, 9)[4:]
        client.expect(9, request.__api_key__, request.__version__)
        client.feed(size_prefixed(body + b"\0garbage"))
        [answer] = (await client.receive()).topics
        assert (answer.name, answer.error_code) == ("trailing", ErrorCode.none)
        await node.assert_serves()
    run_on_node(scenario)


def test_tagged_fields_the_schema_does_not_know_are_skipped(run_on_node):
    # Kafka keeps unknown tagged fields (KIP-482) and answers; kio's reader
    # refuses them, so the frame is read again skipping them.
    async def scenario(node):
        client = node.connect()
        request = entities.init_producer_id()
        body = encode_request(request, 9)[4:]
        header_end = 8 + 2 + len("wire-test")  # header v2: then its tagged fields
        assert body[header_end] == 0  # no tagged fields...
        # ...now one: tag 0, one byte long.
        client.expect(9, request.__api_key__, request.__version__)
        client.feed(size_prefixed(body[:header_end] + b"\x01\x00\x01\x00"
                                  + body[header_end + 1:]))
        answer = await client.receive()
        assert answer.error_code == ErrorCode.none and answer.producer_id >= 0
        await node.assert_serves()
    run_on_node(scenario)


# librdkafka 2.16's Metadata v9 "all topics" requests as they reached the
# broker (header, then the body): the null topic array's count sits in a
# 4-byte space it did not shrink. A consumer's (AllowAutoTopicCreation 0)
# leaves 3 bytes over; a producer's (1) reads as a tag 0 of size 0.
LIBRDKAFKA_ALL_TOPICS = {
    "consumer": "0003000900000003000772646b61666b6100" "0000000000000000",
    "producer": "0003000900000005000772646b61666b6100" "0000000001000000",
}


@pytest.mark.parametrize("client_kind", sorted(LIBRDKAFKA_ALL_TOPICS))
def test_librdkafka_metadata_for_all_topics_is_answered(run_on_node, client_kind):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        frame = bytes.fromhex(LIBRDKAFKA_ALL_TOPICS[client_kind])
        client.expect(int.from_bytes(frame[4:8], "big"), 3, 9)
        client.feed(size_prefixed(frame))
        answer = await client.receive()
        assert [t.name for t in answer.topics] == ["t"]
        await node.assert_serves()
    run_on_node(scenario)


def test_api_key_unknown_to_kafka_closes(run_on_node):
    async def scenario(node):
        client = node.connect()
        client.feed(size_prefixed(header_prefix(1000, 0, 1) + struct.pack(">h", -1)))
        await client.closed()
        assert client.unread() == b""
        await node.assert_serves()
    run_on_node(scenario)


def test_kafka_api_the_broker_does_not_implement_closes(run_on_node):
    async def scenario(node):
        client = node.connect()
        client.send(DeleteRecordsRequest(timeout=timedelta(seconds=1), topics=(
            DeleteRecordsTopic(name="t", partitions=(
                DeleteRecordsPartition(partition_index=0, offset=1),)),)))
        with pytest.raises(ConnectionClosed):
            await client.receive()
        await node.assert_serves()
    run_on_node(scenario)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_api_versions_advertises_exactly_the_dispatch_table(run_on_node, version):
    async def scenario(node):
        answer = await node.connect().call(entities.api_versions(version))
        assert answer.error_code == ErrorCode.none
        assert advertised(answer.api_keys) == VERSIONS
        assert [k.api_key for k in answer.api_keys] == sorted(VERSIONS)
    run_on_node(scenario)


def test_api_versions_of_a_version_kio_does_not_know_is_answered_in_v0(run_on_node):
    async def scenario(node):
        client = node.connect()
        # ApiVersions v9: header v2 (flexible), then a body nobody here can read.
        client.expect(77, entities.API_VERSIONS, 9)
        client.feed(size_prefixed(header_prefix(entities.API_VERSIONS, 9, 77)
                                  + struct.pack(">h", 4) + b"next" + b"\0" + b"\x05body"))
        answer = await client.receive()  # decoded as ApiVersionsResponse v0
        assert answer.error_code == ErrorCode.unsupported_version
        assert advertised(answer.api_keys) == VERSIONS
        # The client steps down to a version both speak, on the same connection.
        stepped_down = await client.call(entities.api_versions(3))
        assert stepped_down.error_code == ErrorCode.none
    run_on_node(scenario)


def test_api_versions_that_kio_knows_but_is_above_our_range_is_answered_in_v0(run_on_node):
    async def scenario(node):
        client = node.connect()
        client.send(entities.api_versions(4))
        answer = await client.receive()  # decoded as ApiVersionsResponse v0
        assert answer.error_code == ErrorCode.unsupported_version
        assert advertised(answer.api_keys) == VERSIONS
    run_on_node(scenario)


@pytest.mark.parametrize("request_entity", [
    entities.produce("t", 0, values_batch(2), version=9),
    entities.fetch("t", 0, 0, version=13),
    entities.metadata(["new"], version=0),
    entities.list_offsets("t", 0, entities.LATEST, version=6),
], ids=["produce-v9", "fetch-v13", "metadata-v0", "list_offsets-v6"])
def test_version_outside_the_advertised_range_closes_without_effect(run_on_node, request_entity):
    async def scenario(node):
        await node.connect().call(entities.create_topics("t"))
        client = node.connect()
        client.send(request_entity)
        with pytest.raises(ConnectionClosed):
            await client.receive()
        assert node.broker.partition("t", 0).high_watermark == 0
        assert sorted(node.broker.topics) == ["t"]
        await node.assert_serves()
    run_on_node(scenario)


def test_client_going_away_during_a_long_poll_ends_the_connection_cleanly(run_on_node):
    async def scenario(node):
        await node.connect().call(entities.create_topics("t"))
        client = node.connect()
        client.send(entities.fetch("t", 0, 0, max_wait_ms=30_000, min_bytes=1))
        await settle()
        client.disconnect()
        await settle()
        assert client.connection.worker.cancelled()
        # The abandoned fetch does not disturb later appends or fetches.
        other = node.connect()
        produced = await other.call(entities.produce("t", 0, values_batch(1)))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
        fetched = await other.call(entities.fetch("t", 0, 0))
        assert len(records_in(fetched.responses[0].partitions[0].records)) == 1
    run_on_node(scenario)



def test_handler_that_raises_closes_only_its_connection(run_on_node, monkeypatch):
    async def broken(broker, header, request):
        raise RuntimeError("handler bug")

    async def scenario(node):
        await node.assert_serves()
        monkeypatch.setattr(metadata, "handle", broken)
        client = node.connect()
        client.send(entities.metadata(["t"]))
        with pytest.raises(ConnectionClosed):
            await client.receive()
        monkeypatch.undo()
        await node.assert_serves()
    run_on_node(scenario, expected_error="handler bug")


def test_answer_that_cannot_be_encoded_closes_only_its_connection(run_on_node, monkeypatch):
    async def unencodable(broker, header, request):
        # A cluster id longer than a (legacy) string field can hold.
        return Shapes(request)("MetadataResponse", brokers=(), cluster_id="x" * 40000,
                               controller_id=1, topics=())

    async def scenario(node):
        monkeypatch.setattr(metadata, "handle", unencodable)
        client = node.connect()
        client.send(entities.metadata(["t"]))
        with pytest.raises(ConnectionClosed):
            await client.receive()
        monkeypatch.undo()
        await node.assert_serves()
    run_on_node(scenario, expected_error="String is too long")


@pytest.mark.parametrize("api_key, version", [(32, 3), (19, 4)],
                         ids=["describe_configs", "create_topics"])
def test_a_null_array_where_kafka_allows_none_closes(run_on_node, api_key, version):
    """Found by the fuzz test: DescribeConfigs with its resources array
    written as null (-1) reached the handler as None. Kafka's readers refuse
    a non-nullable field serialized as null; so does the broker now."""
    async def scenario(node):
        client = node.connect()
        # No client id (-1), then the request's first array as null (-1).
        client.feed(size_prefixed(header_prefix(api_key, version, 5)
                                  + struct.pack(">hi", -1, -1) + b"\0" * 8))
        await client.closed()
        assert client.unread() == b""
        await node.assert_serves()
    run_on_node(scenario)
