"""Routing: a decoded request to the adapter of its API, and the table of
what is implemented — which ApiVersions advertises, exactly.

Version ranges are those every mainstream client can negotiate (BROKER.md):
the low ends stay for older clients.
"""

from __future__ import annotations

import logging
from functools import partial

from kio.index import api_key_map

from reference_broker.protocol import (
    api_versions, create_topics, delete_topics, describe_groups, fetch, find_coordinator,
    heartbeat, init_producer_id, join_group, leave_group, list_groups, list_offsets, metadata,
    offset_commit, offset_fetch, offset_for_leader_epoch, produce, sync_group,
)
from reference_broker.protocol.framing import FrameError, UnsupportedRequest

log = logging.getLogger("reference_broker.requests")

# api key -> (adapter module, lowest version, highest version)
APIS = {
    0: (produce, 3, 8),
    1: (fetch, 4, 11),
    2: (list_offsets, 1, 5),
    3: (metadata, 1, 8),
    8: (offset_commit, 2, 7),
    9: (offset_fetch, 1, 5),
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
}
VERSIONS = {key: (low, high) for key, (_, low, high) in APIS.items()}


async def dispatch(broker, decoded):
    """The response entity for one decoded frame, or None (acks=0 produce).
    Raises FrameError for a request this broker does not speak."""
    if isinstance(decoded, UnsupportedRequest):
        if decoded.api_key == api_versions.API_KEY:
            return api_versions.unsupported(VERSIONS)
        raise FrameError(f"unsupported api key {decoded.api_key} v{decoded.api_version}")
    header, request = decoded
    key, version = header.request_api_key, header.request_api_version
    module, low, high = APIS.get(key, (None, 0, -1))
    if not low <= version <= high:
        if key == api_versions.API_KEY:
            return api_versions.unsupported(VERSIONS)
        raise FrameError(f"{api_key_map.get(key, key)} v{version} is not implemented "
                         f"(ApiVersions advertises {VERSIONS.get(key, 'nothing')})")
    log.debug("%s v%d correlation %d from %s", api_key_map[key], version,
              header.correlation_id, header.client_id)
    handle = partial(module.handle, versions=VERSIONS) if module is api_versions \
        else module.handle
    return await handle(broker, header, request)

