"""What a consumer does against the coordinator, one protocol step at a time,
plus a coordinator that owns every `__consumer_offsets` partition."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from reference_broker.group import GroupConfig, GroupCoordinator, JoinGroupResult

PROTOCOLS = [("range", b"subscription:t")]
LONG_SESSION_MS = 30_000


def coordinator(store, **config) -> GroupCoordinator:
    """Timeouts shrunk for tests; must run inside the event loop (load())."""
    settings = dict(group_min_session_timeout_ms=1, group_initial_rebalance_delay_ms=0)
    settings.update(config)
    group_config = GroupConfig(**settings)
    coord = GroupCoordinator(store, group_config, clock=lambda: 1_700_000_000.0)
    for partition in range(group_config.offsets_topic_partitions):
        coord.load(partition, [])
    return coord


async def join(coord, group_id="g", member_id="", *, instance_id=None, require_known=False,
               session_ms=LONG_SESSION_MS, rebalance_ms=5_000, protocols=PROTOCOLS,
               client_id="client") -> JoinGroupResult:
    return await coord.join_group(
        group_id, member_id=member_id, group_instance_id=instance_id,
        require_known_member_id=require_known, client_id=client_id, client_host="/127.0.0.1",
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        protocol_type="consumer", protocols=protocols)


async def join_with_id(coord, group_id="g", **kwargs) -> JoinGroupResult:
    """JoinGroup v4+: take the id from MEMBER_ID_REQUIRED, then join with it."""
    first = await join(coord, group_id, require_known=True, **kwargs)
    assert first.error is ErrorCode.member_id_required
    return await join(coord, group_id, first.member_id, require_known=True, **kwargs)


async def sync(coord, joined: JoinGroupResult, group_id="g", assignments=None,
               instance_id=None):
    return await coord.sync_group(group_id, generation_id=joined.generation_id,
                                  member_id=joined.member_id, group_instance_id=instance_id,
                                  assignments=assignments or {})


async def stable_group(coord, count, group_id="g", session_ms=(), **kwargs):
    """`count` members joined concurrently and synced; the leader assigns each
    member b"part-<member id>". Returns the join results, leader first. Members
    join in order, so the first joins first and leads; `session_ms` gives the
    first members' session timeouts."""
    sessions = list(session_ms) + [LONG_SESSION_MS] * (count - len(session_ms))
    joined = await asyncio.gather(*(join(coord, group_id, session_ms=s, **kwargs)
                                    for s in sessions))
    joined = sorted(joined, key=lambda j: j.member_id != j.leader_id)
    assignments = {j.member_id: b"part-" + j.member_id.encode() for j in joined}
    synced = await asyncio.gather(sync(coord, joined[0], group_id, assignments),
                                  *(sync(coord, j, group_id) for j in joined[1:]))
    assert all(s.error is ErrorCode.none for s in synced)
    return joined


def state(coord, group_id="g") -> str:
    return coord.describe_groups([group_id])[0].state


async def wait_for_state(coord, wanted: str, group_id="g", timeout_s=5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while state(coord, group_id) != wanted:
        assert asyncio.get_running_loop().time() < deadline, (
            f"group {group_id!r} still {state(coord, group_id)}, never {wanted}")
        await asyncio.sleep(0.005)
