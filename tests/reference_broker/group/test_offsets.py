"""OffsetCommit fencing (generation, member, rebalance), standalone commits,
failed appends, and OffsetFetch of all partitions or a list."""

from __future__ import annotations

import asyncio

from kio.schema.errors import ErrorCode

from reference_broker.group import CommittedOffset, OffsetCommit, records
from tests.reference_broker.group.members import (
    coordinator, join, stable_group, state, sync)
from tests.reference_broker.group.memory_store import MemoryOffsetStore

NONE = ErrorCode.none


def committed(coord, group_id="g", partitions=(("t", 0),)):
    result = coord.fetch_offsets(group_id, list(partitions))
    assert result.error is NONE
    return [result.offsets[tp].offset for tp in partitions]


def test_member_commit_is_stored_in_kafka_format_and_fetched():
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store)
        (member,) = await stable_group(coord, 1)
        result = await coord.commit_offsets("g", 1, member.member_id, None, [
            OffsetCommit("t", 0, 42, leader_epoch=3, metadata="m")])
        assert result == {("t", 0): NONE}
        fetched = coord.fetch_offsets("g", [("t", 0)])
        assert fetched.offsets == {("t", 0): CommittedOffset(42, 3, "m")}
        key, value = store.all_records()[-1]
        assert records.parse_key(key) == records.OffsetCommitKey("g", "t", 0)
        assert records.parse_offset_commit_value(value) == records.OffsetCommitValue(
            42, 3, "m", 1_700_000_000_000)
    asyncio.run(scenario())


def test_commit_with_stale_generation_is_illegal_generation():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        leader, follower = await stable_group(coord, 2)
        # The follower's subscription changes: generation 2.
        rejoin = asyncio.gather(join(coord, member_id=leader.member_id),
                                join(coord, member_id=follower.member_id, protocols=[
                                    ("range", b"new subscription")]))
        second = await rejoin
        assert {j.generation_id for j in second} == {2}
        await asyncio.gather(
            sync(coord, second[0], assignments={j.member_id: b"" for j in second}),
            sync(coord, second[1]))
        result = await coord.commit_offsets("g", 1, follower.member_id, None,
                                            [OffsetCommit("t", 0, 7)])
        assert result == {("t", 0): ErrorCode.illegal_generation}
        assert committed(coord) == [-1]
    asyncio.run(scenario())


def test_commit_from_unknown_member_is_unknown_member_id():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        await stable_group(coord, 1)
        result = await coord.commit_offsets("g", 1, "ghost", None, [OffsetCommit("t", 0, 7)])
        assert result == {("t", 0): ErrorCode.unknown_member_id}
        # A standalone commit to a group that has members is refused the same way.
        standalone = await coord.commit_offsets("g", -1, "", None, [OffsetCommit("t", 0, 7)])
        assert standalone == {("t", 0): ErrorCode.unknown_member_id}
        # A generation for a group that does not exist: an old generation.
        missing = await coord.commit_offsets("nobody", 4, "ghost", None,
                                             [OffsetCommit("t", 0, 7)])
        assert missing == {("t", 0): ErrorCode.illegal_generation}
        assert committed(coord) == [-1]
    asyncio.run(scenario())


def test_commit_while_completing_rebalance_is_rebalance_in_progress():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        joined = await asyncio.gather(join(coord), join(coord))
        assert state(coord) == "CompletingRebalance"
        result = await coord.commit_offsets("g", 1, joined[1].member_id, None,
                                            [OffsetCommit("t", 0, 7)])
        assert result == {("t", 0): ErrorCode.rebalance_in_progress}
        assert committed(coord) == [-1]
    asyncio.run(scenario())


def test_commit_of_current_generation_is_accepted_while_preparing_rebalance():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        leader, follower = await stable_group(coord, 2)
        rejoining = asyncio.create_task(join(coord, member_id=leader.member_id))
        await asyncio.sleep(0.01)
        assert state(coord) == "PreparingRebalance"
        # Kafka lets the old generation commit until the rebalance completes.
        result = await coord.commit_offsets("g", 1, follower.member_id, None,
                                            [OffsetCommit("t", 0, 9)])
        assert result == {("t", 0): NONE}
        assert committed(coord) == [9]
        await join(coord, member_id=follower.member_id)
        assert (await rejoining).generation_id == 2
    asyncio.run(scenario())


def test_standalone_commit_creates_an_empty_group():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        result = await coord.commit_offsets("simple", -1, "", None, [
            OffsetCommit("t", 0, 5), OffsetCommit("t", 1, 6, metadata=None)])
        assert result == {("t", 0): NONE, ("t", 1): NONE}
        assert committed(coord, "simple", [("t", 0), ("t", 1)]) == [5, 6]
        assert coord.fetch_offsets("simple", [("t", 1)]).offsets[("t", 1)].metadata == ""
        overview = coord.list_groups().groups
        assert [(g.group_id, g.protocol_type, g.state) for g in overview] == [
            ("simple", "", "Empty")]
        # The empty group id is allowed for commits (backwards compatibility).
        blank = await coord.commit_offsets("", -1, "", None, [OffsetCommit("t", 0, 1)])
        assert blank == {("t", 0): NONE}
    asyncio.run(scenario())


def test_store_failure_answers_the_error_and_hides_the_offset():
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store)
        (member,) = await stable_group(coord, 1)
        await coord.commit_offsets("g", 1, member.member_id, None, [OffsetCommit("t", 0, 10)])

        store.failure = ErrorCode.request_timed_out
        result = await coord.commit_offsets("g", 1, member.member_id, None,
                                            [OffsetCommit("t", 0, 20)])
        assert result == {("t", 0): ErrorCode.request_timed_out}
        assert committed(coord) == [10]

        # Log errors are translated as Kafka does (maybeConvertOffsetCommitError).
        store.failure = ErrorCode.not_enough_replicas
        result = await coord.commit_offsets("g", 1, member.member_id, None,
                                            [OffsetCommit("t", 0, 30)])
        assert result == {("t", 0): ErrorCode.coordinator_not_available}
        store.failure = ErrorCode.not_leader_or_follower
        result = await coord.commit_offsets("g", 1, member.member_id, None,
                                            [OffsetCommit("t", 0, 30)])
        assert result == {("t", 0): ErrorCode.not_coordinator}
        assert committed(coord) == [10]
    asyncio.run(scenario())


def test_store_crash_is_unknown_server_error_and_sync_still_answers():
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store)
        joined = await asyncio.gather(join(coord), join(coord))

        async def broken(partition, batch):
            raise RuntimeError("disk on fire")
        store.append = broken
        leader, follower = sorted(joined, key=lambda j: j.member_id != j.leader_id)
        synced = await asyncio.gather(
            sync(coord, leader, assignments={j.member_id: b"x" for j in joined}),
            sync(coord, follower))
        assert {s.error for s in synced} == {ErrorCode.unknown_server_error}
        assert state(coord) == "PreparingRebalance"
        result = await coord.commit_offsets("other", -1, "", None, [OffsetCommit("t", 0, 1)])
        assert result == {("t", 0): ErrorCode.unknown_server_error}
    asyncio.run(scenario())


def test_oversized_metadata_is_refused_per_partition():
    async def scenario():
        coord = coordinator(MemoryOffsetStore(), offset_metadata_max_bytes=4)
        result = await coord.commit_offsets("s", -1, "", None, [
            OffsetCommit("t", 0, 1, metadata="12345"), OffsetCommit("t", 1, 2, metadata="1234")])
        assert result == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): NONE}
        assert committed(coord, "s", [("t", 0), ("t", 1)]) == [-1, 2]
    asyncio.run(scenario())


def test_concurrent_commits_finishing_out_of_order_keep_the_later_one():
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store)
        store.holds = []
        first = asyncio.create_task(coord.commit_offsets("s", -1, "", None,
                                                         [OffsetCommit("t", 0, 1)]))
        second = asyncio.create_task(coord.commit_offsets("s", -1, "", None,
                                                          [OffsetCommit("t", 0, 2)]))
        while len(store.holds) < 2:
            await asyncio.sleep(0)
        assert committed(coord, "s") == [-1], "not visible before the append completes"
        store.holds[1].set()
        await second
        store.holds[0].set()
        await first
        assert committed(coord, "s") == [2]
    asyncio.run(scenario())


def test_fetch_all_partitions_or_a_list():
    async def scenario():
        coord = coordinator(MemoryOffsetStore())
        await coord.commit_offsets("s", -1, "", None, [
            OffsetCommit("a", 0, 10), OffsetCommit("a", 1, 11), OffsetCommit("b", 0, 20)])
        everything = coord.fetch_offsets("s", None)
        assert everything.error is NONE
        assert {tp: o.offset for tp, o in everything.offsets.items()} == {
            ("a", 0): 10, ("a", 1): 11, ("b", 0): 20}
        some = coord.fetch_offsets("s", [("a", 1), ("z", 9)])
        assert some.offsets == {("a", 1): CommittedOffset(11, -1, ""),
                                ("z", 9): CommittedOffset()}
        assert coord.fetch_offsets("unknown", None).offsets == {}
        assert coord.fetch_offsets("unknown", [("a", 0)]).offsets == {
            ("a", 0): CommittedOffset(-1, -1, "", NONE)}
    asyncio.run(scenario())


def test_transactional_offsets_are_pending_until_their_marker():
    """TxnOffsetCommit (KIP-98/447): written as the producer's batch, the
    group's only after a COMMIT marker; an ABORT drops them; a request that
    names an old generation is fenced like OffsetCommit."""
    async def scenario():
        store = MemoryOffsetStore()
        coord = coordinator(store)
        (member,) = await stable_group(coord, 1)
        partition = coord._partition("g")
        assert await coord.txn_commit_offsets("g", 7, 0, 1, member.member_id, None,
                                              [OffsetCommit("t", 0, 5)]) == {("t", 0): NONE}
        pending = committed(coord)
        coord.complete_txn(partition, 7, commit=True)
        after_commit = committed(coord)
        await coord.txn_commit_offsets("g", 7, 0, 1, member.member_id, None,
                                       [OffsetCommit("t", 0, 9)])
        coord.complete_txn(partition, 7, commit=False)
        after_abort = committed(coord)
        fenced = await coord.txn_commit_offsets("g", 7, 0, 0, member.member_id, None,
                                                [OffsetCommit("t", 0, 11)])
        return pending, after_commit, after_abort, fenced
    pending, after_commit, after_abort, fenced = asyncio.run(scenario())
    assert (pending, after_commit, after_abort) == ([-1], [5], [5])
    assert fenced == {("t", 0): ErrorCode.illegal_generation}
