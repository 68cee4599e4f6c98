"""The group APIs' adapters over the wire: FindCoordinator, the KIP-394
member id round trip of JoinGroup v4+, and OffsetCommit's checks — the
generation fence (coordinator) and unknown partitions (answered by the
adapter, as KafkaApis does) — with commits surviving a restart."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from tests.reference_broker.protocol import entities
from tests.reference_broker.protocol.wire import ADDRESS

# Few __consumer_offsets partitions: each is a log directory to create.
SETTINGS = ("offsets.topic.num.partitions=3",)


async def stable_member(client, group: str = "g") -> tuple[str, int]:
    """Join `group` as its only member and sync: (member id, generation)."""
    found = await client.call(entities.find_coordinator(group))
    assert (found.error_code, found.node_id, found.host, found.port) == \
        (ErrorCode.none, 1, *ADDRESS)
    required = await client.call(entities.join_group(group, version=4))
    assert required.error_code == ErrorCode.member_id_required
    joined = await client.call(entities.join_group(group, required.member_id, version=4))
    assert joined.error_code == ErrorCode.none
    synced = await client.call(entities.sync_group(
        group, joined.generation_id, joined.member_id, {joined.member_id: b"plan"}))
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"plan")
    return joined.member_id, joined.generation_id


def commit_errors(response) -> dict[tuple[str, int], ErrorCode]:
    return {(t.name, p.partition_index): p.error_code
            for t in response.topics for p in t.partitions}


def test_find_coordinator_creates_the_offsets_topic(run_on_node):
    async def scenario(node):
        client = node.connect()
        for version in (0, 1, 2):
            found = await client.call(entities.find_coordinator("g", version=version))
            assert (found.error_code, found.node_id, found.host, found.port) == \
                (ErrorCode.none, 1, *ADDRESS)
        meta = await client.call(entities.metadata(["__consumer_offsets"]))
        [topic] = meta.topics
        assert (topic.error_code, topic.is_internal, len(topic.partitions)) == \
            (ErrorCode.none, True, 3)
    run_on_node(scenario, *SETTINGS)


def test_join_group_v4_with_an_empty_member_id_requires_one(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.find_coordinator("g"))
        first = await client.call(entities.join_group("g", version=4))
        second = await client.call(entities.join_group("g", version=4))
        # KIP-394: a fresh id each time, and no member joined yet.
        assert first.error_code == second.error_code == ErrorCode.member_id_required
        assert first.member_id and second.member_id and first.member_id != second.member_id
        assert first.generation_id == -1
        joined = await client.call(entities.join_group("g", first.member_id, version=4))
        assert (joined.error_code, joined.generation_id, joined.leader, joined.member_id) == \
            (ErrorCode.none, 1, first.member_id, first.member_id)
        assert [m.member_id for m in joined.members] == [first.member_id]
    run_on_node(scenario, *SETTINGS)


def test_join_group_v3_needs_no_member_id_round_trip(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.find_coordinator("g"))
        joined = await client.call(entities.join_group("g", version=3))
        assert (joined.error_code, joined.generation_id) == (ErrorCode.none, 1)
        assert joined.member_id and joined.leader == joined.member_id
    run_on_node(scenario, *SETTINGS)


def test_offset_commit_with_an_illegal_generation_is_refused(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        member, generation = await stable_member(client)
        stale = await client.call(entities.offset_commit(
            "g", generation + 1, member, {("t", 0): 5}))
        assert commit_errors(stale) == {("t", 0): ErrorCode.illegal_generation}
        good = await client.call(entities.offset_commit("g", generation, member, {("t", 0): 7}))
        assert commit_errors(good) == {("t", 0): ErrorCode.none}
        fetched = await client.call(entities.offset_fetch("g", {"t": [0]}))
        assert fetched.error_code == ErrorCode.none
        assert [(p.partition_index, p.committed_offset) for p in fetched.topics[0].partitions] \
            == [(0, 7)]
    run_on_node(scenario, *SETTINGS)


def test_offset_commit_to_a_group_that_does_not_exist_with_a_generation(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        await client.call(entities.find_coordinator("nobody"))
        response = await client.call(entities.offset_commit(
            "nobody", 3, "ghost", {("t", 0): 1}))
        assert commit_errors(response) == {("t", 0): ErrorCode.illegal_generation}
    run_on_node(scenario, *SETTINGS)


def test_offset_commit_to_an_unknown_partition_fails_only_that_partition(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        member, generation = await stable_member(client)
        response = await client.call(entities.offset_commit("g", generation, member, {
            ("t", 0): 4, ("t", 9): 4, ("missing", 0): 4}))
        assert commit_errors(response) == {
            ("t", 0): ErrorCode.none,
            ("t", 9): ErrorCode.unknown_topic_or_partition,
            ("missing", 0): ErrorCode.unknown_topic_or_partition}
        assert "missing" not in node.broker.topics
    run_on_node(scenario, *SETTINGS)


def test_simple_commits_survive_a_restart(run_on_node):
    async def before(node):
        client = node.connect()
        await client.call(entities.create_topics("t", partitions=2))
        await client.call(entities.find_coordinator("standalone"))
        # generation -1, no member: a standalone commit (assign(), not subscribe()).
        response = await client.call(entities.offset_commit(
            "standalone", -1, "", {("t", 0): 10, ("t", 1): 20}, version=2))
        assert set(commit_errors(response).values()) == {ErrorCode.none}

    async def after(node):
        fetched = await node.connect().call(entities.offset_fetch(
            "standalone", {"t": [0, 1]}, version=1))
        assert [(p.partition_index, p.committed_offset, p.error_code)
                for p in fetched.topics[0].partitions] == \
            [(0, 10, ErrorCode.none), (1, 20, ErrorCode.none)]

    run_on_node(before, *SETTINGS)
    run_on_node(after, *SETTINGS)
