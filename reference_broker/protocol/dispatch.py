"""Routing: a decoded request to the adapter of its API — the broker's, or
on a node with the controller role the controller's — and the tables of
what is implemented, which ApiVersions advertises exactly.

Version ranges are those every mainstream client can negotiate
(docs/broker.md): the low ends stay for older clients. Metadata goes to v9, the
first whose leader epochs clients trust (KAFKA-9212: librdkafka's
rd_kafka_has_reliable_leader_epochs and kafka-python's cluster metadata drop
the epochs of older versions), so that they use KIP-320 here: leader epochs in
Fetch and ListOffsets, position validation after a leader change, committed
offsets with their epoch.
"""

from __future__ import annotations

import logging

from kio.index import api_key_map

from reference_broker.protocol import (
    add_offsets_to_txn, add_partitions_to_txn, api_versions, controller_apis, create_topics,
    delete_topics, describe_configs, describe_groups, describe_producers,
    describe_transactions, end_txn, fetch, find_coordinator, heartbeat,
    incremental_alter_configs, init_producer_id, join_group, leave_group, list_groups,
    list_offsets, list_transactions, metadata, offset_commit, offset_fetch,
    offset_for_leader_epoch, produce, sync_group, txn_offset_commit, write_txn_markers,
)
from reference_broker.protocol.framing import FrameError, UnsupportedRequest

log = logging.getLogger("reference_broker.requests")

# api key -> (adapter module, lowest version, highest version)
BROKER_APIS = {
    0: (produce, 3, 8),
    1: (fetch, 4, 12),
    2: (list_offsets, 1, 5),
    3: (metadata, 1, 9),
    8: (offset_commit, 2, 7),
    9: (offset_fetch, 1, 7),
    10: (find_coordinator, 0, 2),
    11: (join_group, 0, 5),
    12: (heartbeat, 0, 3),
    13: (leave_group, 0, 3),
    14: (sync_group, 0, 3),
    15: (describe_groups, 0, 4),
    16: (list_groups, 0, 2),
    18: (api_versions, 0, 3),
    19: (create_topics, 2, 4),
    20: (delete_topics, 1, 3),
    22: (init_producer_id, 0, 4),
    23: (offset_for_leader_epoch, 2, 3),
    # Transactions (KIP-98; KIP-890 part 1): AddPartitionsToTxn v4 is the
    # leaders' verification; EndTxn stops at v3, before KIP-890 part 2's
    # epoch per transaction, which the clients we drive do not speak.
    24: (add_partitions_to_txn, 0, 4),
    25: (add_offsets_to_txn, 0, 3),
    26: (end_txn, 0, 3),
    27: (write_txn_markers, 1, 1),
    28: (txn_offset_commit, 0, 3),
    # Per-topic configs. kio has DescribeConfigs from v1 (v0 lacks config
    # sources: clients that speak v0 speak v1, librdkafka asks up to v1) and
    # IncrementalAlterConfigs v0-v1 (KIP-339).
    32: (describe_configs, 1, 4),
    44: (incremental_alter_configs, 0, 1),
    # KIP-664's views of transactions and producers.
    61: (describe_producers, 0, 0),
    65: (describe_transactions, 0, 0),
    66: (list_transactions, 0, 1),
}
# What a controller answers: brokers' registrations, heartbeats, ISR
# changes and metadata fetches, and the topic changes brokers forward.
CONTROLLER_APIS = {
    1: (controller_apis.MetadataFetch, 12, 12),
    18: (api_versions, 0, 3),
    19: (create_topics, 2, 4),
    20: (delete_topics, 1, 3),
    44: (incremental_alter_configs, 0, 1),
    56: (controller_apis.AlterPartition, 2, 2),
    62: (controller_apis.BrokerRegistration, 0, 0),
    63: (controller_apis.BrokerHeartbeat, 0, 0),
}
_CONTROLLER_ONLY = {56, 62, 63}


def versions_for(roles) -> dict[int, tuple[int, int]]:
    """The ApiVersions table of a node with these process roles."""
    table = dict(CONTROLLER_APIS) if "controller" in roles else {}
    if "broker" in roles:
        table = {key: entry for key, entry in table.items() if key in _CONTROLLER_ONLY}
        table.update(BROKER_APIS)
    return {key: (low, high) for key, (_, low, high) in table.items()}


# A combined broker,controller node (what a single-node broker runs).
VERSIONS = versions_for({"broker", "controller"})


def _route(node, key, request):
    """(adapter, the object it serves: the broker or the controller)."""
    if node.controller is not None and (
            key in _CONTROLLER_ONLY or node.broker is None
            or (key == 1 and controller_apis.is_metadata_fetch(request))):
        return CONTROLLER_APIS[key][0], node.controller
    return BROKER_APIS[key][0], node.broker


async def dispatch(node, decoded):
    """The response entity for one decoded frame, or None (acks=0 produce).
    Raises FrameError for a request this node does not speak."""
    versions = node.versions
    if isinstance(decoded, UnsupportedRequest):
        if decoded.api_key == api_versions.API_KEY:
            return api_versions.unsupported(versions)
        raise FrameError(f"unsupported api key {decoded.api_key} v{decoded.api_version}")
    header, request = decoded
    key, version = header.request_api_key, header.request_api_version
    low, high = versions.get(key, (0, -1))
    if not low <= version <= high:
        if key == api_versions.API_KEY:
            return api_versions.unsupported(versions)
        raise FrameError(f"{api_key_map.get(key, key)} v{version} is not implemented "
                         f"(ApiVersions advertises {versions.get(key, 'nothing')})")
    log.debug("%s v%d correlation %d from %s", api_key_map[key], version,
              header.correlation_id, header.client_id)
    module, target = _route(node, key, request)
    if module is api_versions:
        return await api_versions.handle(target, header, request, versions=versions)
    return await module.handle(target, header, request)
