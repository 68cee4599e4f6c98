"""Peer: the broker's own Kafka client (for the controller and replica
fetchers), against a real broker process."""

from __future__ import annotations

import asyncio

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v8.request import MetadataRequest, MetadataRequestTopic

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
