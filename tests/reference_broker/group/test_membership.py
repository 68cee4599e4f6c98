"""JoinGroup, SyncGroup, Heartbeat and LeaveGroup against the coordinator:
member ids (KIP-394), generations, leaders, session expiry, rebalances and
static membership (KIP-345)."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from reference_broker.group import JoinGroupMember, LeavingMember, records
from tests.reference_broker.group.members import (
    PROTOCOLS, coordinator, join, join_with_id, stable_group, state, sync, wait_for_state)
from tests.reference_broker.group.memory_store import MemoryOffsetStore


def test_first_join_gets_member_id_required_then_joins():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        first = await join(coord, require_known=True, client_id="rdkafka")
        assert first.error is ErrorCode.member_id_required
        assert first.member_id.startswith("rdkafka-")
        assert first.generation_id == -1
        joined = await join(coord, member_id=first.member_id, require_known=True)
        assert joined.error is ErrorCode.none
        assert joined.member_id == first.member_id
        assert joined.generation_id == 1
        assert joined.leader_id == first.member_id
        assert joined.protocol_type == "consumer" and joined.protocol_name == "range"
        assert joined.members == (JoinGroupMember(first.member_id, None, PROTOCOLS[0][1]),)
        assert state(coord) == "CompletingRebalance"
    asyncio.run(scenario())


def test_pending_member_id_expires_after_session_timeout():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        first = await join(coord, require_known=True, session_ms=50)
        await asyncio.sleep(0.3)
        late = await join(coord, member_id=first.member_id, require_known=True)
        assert late.error is ErrorCode.unknown_member_id
    asyncio.run(scenario())


def test_three_members_one_leader_and_sync_distributes_assignments():
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store, group_initial_rebalance_delay_ms=200)
        joined = await asyncio.gather(*(join_with_id(coord, client_id=f"c{i}")
                                        for i in range(3)))
        assert {j.error for j in joined} == {ErrorCode.none}
        assert {j.generation_id for j in joined} == {1}
        assert len({j.leader_id for j in joined}) == 1
        leaders = [j for j in joined if j.member_id == j.leader_id]
        followers = [j for j in joined if j.member_id != j.leader_id]
        assert len(leaders) == 1 and len(followers) == 2
        assert {m.member_id for m in leaders[0].members} == {j.member_id for j in joined}
        assert all(f.members == () for f in followers)

        assignments = {j.member_id: f"assigned-{j.member_id}".encode() for j in joined}
        # Followers sync first and wait until the leader's assignment is stored.
        waiting = [asyncio.create_task(sync(coord, f)) for f in followers]
        await asyncio.sleep(0.01)
        assert not any(task.done() for task in waiting)
        leader_sync = await sync(coord, leaders[0], assignments=assignments)
        follower_syncs = await asyncio.gather(*waiting)
        assert leader_sync.assignment == assignments[leaders[0].member_id]
        for joined_follower, synced in zip(followers, follower_syncs):
            assert synced.error is ErrorCode.none
            assert synced.assignment == assignments[joined_follower.member_id]
        assert state(coord) == "Stable"
        described = coord.describe_groups(["g"])[0]
        assert described.protocol == "range"
        assert {m.member_id: m.assignment for m in described.members} == assignments
        assert store.all_records(), "the assignment was written to __consumer_offsets"
    asyncio.run(scenario())


def test_member_leaving_triggers_rebalance_and_bumps_generation():
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store)
        leader, follower = await stable_group(coord, 2)
        result = await coord.leave_group("g", [LeavingMember(follower.member_id)])
        assert result.error is ErrorCode.none and result.single_error is ErrorCode.none
        assert state(coord) == "PreparingRebalance"
        assert await coord.heartbeat("g", generation_id=1, member_id=leader.member_id,
                                     group_instance_id=None) is ErrorCode.rebalance_in_progress
        rejoined = await join(coord, member_id=leader.member_id)
        assert rejoined.generation_id == 2
        assert [m.member_id for m in rejoined.members] == [leader.member_id]

        await sync(coord, rejoined, assignments={leader.member_id: b"all"})
        last = await coord.leave_group("g", [LeavingMember(leader.member_id)])
        assert last.members[0].error is ErrorCode.none
        assert state(coord) == "Empty"
        await asyncio.sleep(0.01)   # the empty generation's write is in flight
        # An empty group gets a generation of its own (initNextGeneration), persisted.
        key, value = store.all_records()[-1]
        assert records.parse_key(key) == records.GroupMetadataKey("g")
        written = records.parse_group_metadata_value(value)
        assert (written.generation, written.members, written.protocol) == (3, (), None)
        stale = await coord.heartbeat("g", generation_id=2, member_id=leader.member_id,
                                      group_instance_id=None)
        assert stale is ErrorCode.unknown_member_id
    asyncio.run(scenario())


def test_leave_of_unknown_member_and_unknown_group():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        await stable_group(coord, 1)
        result = await coord.leave_group("g", [LeavingMember("ghost")])
        assert result.error is ErrorCode.none
        assert result.members[0].error is ErrorCode.unknown_member_id
        assert result.single_error is ErrorCode.unknown_member_id
        nowhere = await coord.leave_group("other", [LeavingMember("ghost")])
        assert nowhere.single_error is ErrorCode.unknown_member_id
    asyncio.run(scenario())


def test_member_that_stops_heartbeating_expires_and_group_rebalances():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        alive, silent = await stable_group(coord, 2, session_ms=(30_000, 100))
        assert state(coord) == "Stable"
        await wait_for_state(coord, "PreparingRebalance")
        assert await coord.heartbeat("g", generation_id=1, member_id=silent.member_id,
                                     group_instance_id=None) is ErrorCode.unknown_member_id
        assert await coord.heartbeat("g", generation_id=1, member_id=alive.member_id,
                                     group_instance_id=None) is ErrorCode.rebalance_in_progress
        rejoined = await join(coord, member_id=alive.member_id)
        assert rejoined.generation_id == 2
        assert [m.member_id for m in rejoined.members] == [alive.member_id]
    asyncio.run(scenario())


def test_heartbeats_keep_a_member_alive():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        (member,) = await stable_group(coord, 1, session_ms=(500,))
        for _ in range(8):
            await asyncio.sleep(0.1)
            assert await coord.heartbeat("g", generation_id=1, member_id=member.member_id,
                                         group_instance_id=None) is ErrorCode.none
        assert state(coord) == "Stable"
    asyncio.run(scenario())


def test_member_that_never_syncs_is_removed_after_rebalance_timeout():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        joined = await asyncio.gather(join(coord, rebalance_ms=500), join(coord, rebalance_ms=500))
        leader = next(j for j in joined if j.member_id == j.leader_id)
        lazy = next(j for j in joined if j.member_id != j.leader_id)
        await sync(coord, leader, assignments={leader.member_id: b"a", lazy.member_id: b"b"})
        assert state(coord) == "Stable"
        # DelayedSync: the follower never sent SyncGroup within the rebalance timeout.
        await wait_for_state(coord, "PreparingRebalance")
        assert [m.member_id for m in coord.describe_groups(["g"])[0].members] == [
            leader.member_id]
        rejoined = await join(coord, member_id=leader.member_id, rebalance_ms=500)
        assert rejoined.generation_id == 2
        assert [m.member_id for m in rejoined.members] == [leader.member_id]
    asyncio.run(scenario())


def test_sync_and_heartbeat_fencing():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        (member,) = await stable_group(coord, 1)
        stale = await coord.sync_group("g", generation_id=0, member_id=member.member_id,
                                       group_instance_id=None, assignments={})
        assert stale.error is ErrorCode.illegal_generation
        unknown = await coord.sync_group("g", generation_id=1, member_id="ghost",
                                         group_instance_id=None, assignments={})
        assert unknown.error is ErrorCode.unknown_member_id
        again = await sync(coord, member)
        assert again.error is ErrorCode.none
        assert again.assignment == b"part-" + member.member_id.encode()
        assert await coord.heartbeat("g", generation_id=7, member_id=member.member_id,
                                     group_instance_id=None) is ErrorCode.illegal_generation
    asyncio.run(scenario())


def test_join_validation_errors():
    async def scenario():
        coord = coordinator(MemoryOffsetStore(), group_min_session_timeout_ms=6000)
        short = await join(coord, session_ms=10)
        assert short.error is ErrorCode.invalid_session_timeout
        no_group = await join(coord, "", session_ms=10_000)
        assert no_group.error is ErrorCode.invalid_group_id
        unknown = await join(coord, "fresh", member_id="someone", session_ms=10_000)
        assert unknown.error is ErrorCode.unknown_member_id
        await stable_group(coord, 1, session_ms=(10_000,))
        other = await join(coord, session_ms=10_000, protocols=[("roundrobin", b"")])
        assert other.error is ErrorCode.inconsistent_group_protocol
    asyncio.run(scenario())


def test_static_member_rejoin_keeps_assignment_and_fences_old_member_id():
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store)
        first = await join(coord, instance_id="host-1", require_known=True)
        assert first.error is ErrorCode.none, "static members skip MEMBER_ID_REQUIRED"
        assert first.member_id.startswith("host-1-")
        await sync(coord, first, assignments={first.member_id: b"p0,p1"}, instance_id="host-1")
        assert state(coord) == "Stable"
        records_before = len(store.all_records())

        # The same instance restarts: unknown member id, same group.instance.id.
        again = await join(coord, instance_id="host-1", require_known=True)
        assert again.error is ErrorCode.none
        assert again.member_id != first.member_id
        assert again.generation_id == 1, "no rebalance"
        assert again.leader_id == first.member_id, "old leader id: do not reassign"
        assert len(store.all_records()) == records_before + 1, "new member id persisted"
        synced = await sync(coord, again, instance_id="host-1")
        assert synced.assignment == b"p0,p1"
        assert state(coord) == "Stable"

        zombie = await coord.heartbeat("g", generation_id=1, member_id=first.member_id,
                                       group_instance_id="host-1")
        assert zombie is ErrorCode.fenced_instance_id
        fenced_sync = await sync(coord, first, instance_id="host-1")
        assert fenced_sync.error is ErrorCode.fenced_instance_id
        assert await coord.heartbeat("g", generation_id=1, member_id=again.member_id,
                                     group_instance_id="host-1") is ErrorCode.none
        described = coord.describe_groups(["g"])[0].members
        assert [(m.member_id, m.group_instance_id) for m in described] == [
            (again.member_id, "host-1")]
    asyncio.run(scenario())


def test_waiting_static_member_is_fenced_by_its_replacement():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        other = await join(coord, instance_id="host-2")
        await sync(coord, other, assignments={other.member_id: b""}, instance_id="host-2")
        # host-1 joins and waits in the rebalance, then host-1 restarts.
        old = asyncio.create_task(join(coord, instance_id="host-1"))
        await asyncio.sleep(0.01)
        replacement = asyncio.create_task(join(coord, instance_id="host-1"))
        fenced = await old
        assert fenced.error is ErrorCode.fenced_instance_id
        await join(coord, member_id=other.member_id, instance_id="host-2")
        joined = await replacement
        assert joined.error is ErrorCode.none and joined.generation_id == 2
    asyncio.run(scenario())


def test_static_member_leave_by_instance_id():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        member = await join(coord, instance_id="host-1")
        await sync(coord, member, assignments={}, instance_id="host-1")
        result = await coord.leave_group("g", [LeavingMember("", "host-1")])
        assert result.members[0].error is ErrorCode.none
        assert state(coord) == "Empty"
    asyncio.run(scenario())
