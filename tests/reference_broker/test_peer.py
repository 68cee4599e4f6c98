"""Peer: the broker's own Kafka client (for the controller and replica
fetchers), against a real broker process."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch
from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from reference_broker.peer import Peer, PeerError


def test_requests_and_reconnects(broker):
    host, port = broker.bootstrap.split(":")

    async def talk():
        peer = Peer(host, int(port), "test-peer")
        versions = await peer.request(ApiVersionsRequest(
            client_software_name="kchaos", client_software_version="0"), timeout=10)
        assert versions.error_code == ErrorCode.none
        assert {k.api_key for k in versions.api_keys} >= {0, 1, 3}
        peer.close()  # the next request reconnects
        metadata = await peer.request(MetadataRequest(
            topics=(MetadataRequestTopic(name="fresh"),), allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False), timeout=10)
        assert [t.name for t in metadata.topics] == ["fresh"]
        assert metadata.topics[0].error_code == ErrorCode.none
        peer.close()
    asyncio.run(talk())


def test_unreachable_peer_is_a_peer_error(broker):
    host, port = broker.bootstrap.split(":")
    broker.kill()

    async def talk():
        peer = Peer(host, int(port), "test-peer")
        with pytest.raises(PeerError, match=f"{host}:{port}"):
            await peer.request(ApiVersionsRequest(
                client_software_name="kchaos", client_software_version="0"), timeout=5)
    asyncio.run(talk())


def test_a_cancelled_request_leaves_the_next_one_in_step(broker):
    """A caller cancelled while the answer is on its way (its client went
    away): the next request must get its own answer, not the old one."""
    host, port = broker.bootstrap.split(":")

    async def talk():
        peer = Peer(host, int(port), "test-peer")
        await peer.request(MetadataRequest(
            topics=(MetadataRequestTopic(name="slow"),), allow_auto_topic_creation=True,
            include_cluster_authorized_operations=False,
            include_topic_authorized_operations=False), timeout=10)
        # A fetch with nothing to read is answered after max_wait.
        slow = asyncio.ensure_future(peer.request(fetch.FetchRequest(
            cluster_id=None, replica_id=BrokerId(-1), max_wait=timedelta(seconds=1),
            min_bytes=i32(1), max_bytes=i32(1 << 20), isolation_level=i8(0),
            session_id=i32(0), session_epoch=i32(-1), topics=(fetch.FetchTopic(
                topic=TopicName("slow"), partitions=(fetch.FetchPartition(
                    partition=i32(0), current_leader_epoch=i32(-1), fetch_offset=i64(0),
                    last_fetched_epoch=i32(-1), log_start_offset=i64(-1),
                    partition_max_bytes=i32(1 << 20)),)),),
            forgotten_topics_data=(), rack_id=""), timeout=10))
        await asyncio.sleep(0.3)  # sent, not yet answered
        slow.cancel()
        versions = await peer.request(ApiVersionsRequest(
            client_software_name="kchaos", client_software_version="0"), timeout=10)
        peer.close()
        return versions
    assert asyncio.run(talk()).error_code == ErrorCode.none
