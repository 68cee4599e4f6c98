"""A new coordinator rebuilt from the records an old one wrote: offsets,
generation and members come back, tombstones delete; partitions answer
NOT_COORDINATOR until loaded, COORDINATOR_LOAD_IN_PROGRESS while loading,
and unloading answers waiting members NOT_COORDINATOR."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from reference_broker.group import (
    GroupConfig, GroupCoordinator, OffsetCommit, partition_for, records)
from tests.reference_broker.group.members import (
    coordinator, join, stable_group, state, wait_for_state)
from tests.reference_broker.group.memory_store import MemoryOffsetStore

NONE = ErrorCode.none


def restarted(store: MemoryOffsetStore) -> GroupCoordinator:
    """A fresh coordinator over the same store, replaying it partition by partition."""
    fresh = GroupCoordinator(store, GroupConfig(group_min_session_timeout_ms=1,
                                                group_initial_rebalance_delay_ms=0))
    for partition in range(50):
        fresh.load(partition, list(store.partitions.get(partition, [])))
    return fresh


def test_load_restores_offsets_generation_and_members():
    async def scenario():
        store = MemoryOffsetStore()
        old = coordinator(store)
        leader, follower = await stable_group(old, 2)
        await old.commit_offsets("g", 1, leader.member_id, None, [
            OffsetCommit("t", 0, 100, leader_epoch=5, metadata="x"), OffsetCommit("t", 1, 7)])
        await old.commit_offsets("g", 1, leader.member_id, None, [OffsetCommit("t", 1, 8)])
        await old.commit_offsets("simple", -1, "", None, [OffsetCommit("u", 0, 3)])
        await old.close()

        new = restarted(store)
        assert {tp: (o.offset, o.leader_epoch, o.metadata)
                for tp, o in new.fetch_offsets("g", None).offsets.items()} == {
            ("t", 0): (100, 5, "x"), ("t", 1): (8, -1, "")}
        assert new.fetch_offsets("simple", [("u", 0)]).offsets[("u", 0)].offset == 3
        described = new.describe_groups(["g"])[0]
        assert (described.state, described.protocol_type, described.protocol) == (
            "Stable", "consumer", "range")
        assert {m.member_id: m.assignment for m in described.members} == {
            j.member_id: b"part-" + j.member_id.encode() for j in (leader, follower)}
        # The restored members are members of generation 1.
        assert await new.heartbeat("g", generation_id=1, member_id=follower.member_id,
                                   group_instance_id=None) is NONE
        assert await new.heartbeat("g", generation_id=0, member_id=follower.member_id,
                                   group_instance_id=None) is ErrorCode.illegal_generation
        committed = await new.commit_offsets("g", 1, leader.member_id, None,
                                             [OffsetCommit("t", 0, 101)])
        assert committed == {("t", 0): NONE}
        assert new.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset == 101
        # The leader's rejoin starts generation 2.
        rejoin = asyncio.gather(join(new, member_id=leader.member_id),
                                join(new, member_id=follower.member_id))
        assert {j.generation_id for j in await rejoin} == {2}
        await new.close()
    asyncio.run(scenario())


def test_restored_members_expire_without_heartbeats():
    async def scenario():
        store = MemoryOffsetStore()
        old = coordinator(store)
        await stable_group(old, 1, session_ms=(100,))
        await old.close()
        new = restarted(store)
        assert state(new) == "Stable"
        await wait_for_state(new, "Empty")
        await new.close()
    asyncio.run(scenario())


def test_tombstones_delete_offsets_and_groups():
    async def scenario():
        store = MemoryOffsetStore()
        old = coordinator(store)
        await stable_group(old, 1)
        (member,) = old.describe_groups(["g"])[0].members
        await old.commit_offsets("g", 1, member.member_id, None,
                                 [OffsetCommit("t", 0, 1), OffsetCommit("t", 1, 2)])
        await old.commit_offsets("gone", -1, "", None, [OffsetCommit("t", 0, 3)])
        await old.close()
        for group_id, key in [("g", records.offset_commit_key("g", "t", 0)),
                              ("g", records.group_metadata_key("g")),
                              ("gone", records.offset_commit_key("gone", "t", 0))]:
            store.partitions[partition_for(group_id, 50)].append((key, None))

        new = restarted(store)
        # "g" lost its metadata but keeps an offset: a simple, empty group.
        assert state(new) == "Empty"
        assert {tp: o.offset for tp, o in new.fetch_offsets("g", None).offsets.items()} == {
            ("t", 1): 2}
        # "gone" has nothing left: it is not a group any more.
        assert state(new, "gone") == "Dead"
        assert [g.group_id for g in new.list_groups().groups] == ["g"]
        await new.close()
    asyncio.run(scenario())


def test_partitions_not_loaded_or_loading():
    async def scenario():
        store = MemoryOffsetStore()
        coord = GroupCoordinator(store, GroupConfig(group_min_session_timeout_ms=1,
                                                    group_initial_rebalance_delay_ms=0))
        home = partition_for("g", 50)
        assert (await join(coord)).error is ErrorCode.not_coordinator
        assert coord.fetch_offsets("g", None).error is ErrorCode.not_coordinator
        coord.begin_load(home)
        assert (await join(coord)).error is ErrorCode.coordinator_load_in_progress
        assert await coord.heartbeat("g", generation_id=1, member_id="m",
                                     group_instance_id=None) is NONE
        synced = await coord.sync_group("g", generation_id=1, member_id="m",
                                        group_instance_id=None, assignments={})
        assert synced.error is ErrorCode.rebalance_in_progress
        assert coord.list_groups().error is ErrorCode.coordinator_load_in_progress
        assert await coord.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 1)]) == {
            ("t", 0): ErrorCode.coordinator_load_in_progress}
        coord.load(home, [])
        assert (await join(coord)).error is NONE
        await coord.close()
        assert (await join(coord)).error is ErrorCode.coordinator_not_available
    asyncio.run(scenario())


def test_unload_answers_waiting_members_not_coordinator():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        leader, follower = await stable_group(coord, 2)
        waiting = asyncio.create_task(join(coord, member_id=leader.member_id))
        await asyncio.sleep(0.01)
        coord.unload(partition_for("g", 50))
        assert (await waiting).error is ErrorCode.not_coordinator
        assert await coord.heartbeat("g", generation_id=1, member_id=follower.member_id,
                                     group_instance_id=None) is ErrorCode.not_coordinator
    asyncio.run(scenario())


def test_corrupt_partition_loads_nothing_but_is_served():
    async def scenario():
        coord = GroupCoordinator(MemoryOffsetStore(), GroupConfig(offsets_topic_partitions=1))
        coord.load(0, [(records.offset_commit_key("g", "t", 0), b"\x00\x03\x00")])
        assert coord.fetch_offsets("g", None).offsets == {}
        assert coord.list_groups().groups == ()
    asyncio.run(scenario())
