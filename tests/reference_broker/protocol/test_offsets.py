"""ListOffsets (earliest, latest, by timestamp) and OffsetForLeaderEpoch
(KIP-101/279/320) over the wire, across a restart that starts a new
leader epoch."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from tests.reference_broker.protocol import entities
from tests.reference_broker.record_batches import BASE_TIME_MS, kio_batch, values_batch


def listed(response):
    [topic] = response.topics
    [partition] = topic.partitions
    return partition


def epoch_end(response):
    [topic] = response.topics
    [partition] = topic.partitions
    return partition


async def three_records_in_epoch_0(node) -> None:
    """Topic t with 3 records, appended in its first leader epoch: run
    first, a later open of the same data dir is a restart, a new epoch."""
    client = node.connect()
    await client.call(entities.create_topics("t"))
    await client.call(entities.produce("t", 0, values_batch(3)))


@pytest.mark.parametrize("version", [1, 4, 5])
def test_earliest_and_latest_offsets(run_on_node, version):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        empty = listed(await client.call(entities.list_offsets(
            "t", 0, entities.LATEST, version=version)))
        assert (empty.error_code, empty.offset) == (ErrorCode.none, 0)
        await client.call(entities.produce("t", 0, values_batch(3)))
        await client.call(entities.produce("t", 0, values_batch(2, start=3)))
        earliest = listed(await client.call(entities.list_offsets(
            "t", 0, entities.EARLIEST, version=version)))
        latest = listed(await client.call(entities.list_offsets(
            "t", 0, entities.LATEST, version=version)))
        assert (earliest.error_code, earliest.offset, earliest.timestamp) == \
            (ErrorCode.none, 0, -1)
        assert (latest.error_code, latest.offset, latest.timestamp) == (ErrorCode.none, 5, -1)
        if version >= 4:
            assert earliest.leader_epoch == latest.leader_epoch == 0
    run_on_node(scenario)


def test_offset_for_timestamp(run_on_node):
    async def scenario(node):
        client = node.connect()
        await client.call(entities.create_topics("t"))
        await client.call(entities.produce("t", 0, kio_batch(
            [b"a", b"b"], timestamps=[BASE_TIME_MS, BASE_TIME_MS + 10])))
        await client.call(entities.produce("t", 0, kio_batch(
            [b"c", b"d"], timestamps=[BASE_TIME_MS + 20, BASE_TIME_MS + 30])))
        exact = listed(await client.call(entities.list_offsets("t", 0, BASE_TIME_MS + 20)))
        between = listed(await client.call(entities.list_offsets("t", 0, BASE_TIME_MS + 15)))
        beyond = listed(await client.call(entities.list_offsets("t", 0, BASE_TIME_MS + 99)))
        assert (exact.offset, exact.timestamp) == (2, BASE_TIME_MS + 20)
        assert (between.offset, between.timestamp) == (2, BASE_TIME_MS + 20)
        assert (beyond.error_code, beyond.offset, beyond.timestamp) == (ErrorCode.none, -1, -1)
    run_on_node(scenario)


def test_list_offsets_of_an_unknown_partition(run_on_node):
    async def scenario(node):
        client = node.connect()
        answer = listed(await client.call(entities.list_offsets("missing", 0, entities.LATEST)))
        assert (answer.error_code, answer.offset) == (ErrorCode.unknown_topic_or_partition, -1)
        assert not node.broker.topics
    run_on_node(scenario)


def test_leader_epochs_across_a_restart(run_on_node):
    async def second_term(node):
        client = node.connect()
        await client.call(entities.produce("t", 0, values_batch(2, start=3)))
        # The restart fenced the old registration (epoch 1, no leader)
        # and elected the broker again (epoch 2). Epoch 0 ended where
        # epoch 2 began; epoch 1 wrote nothing, so asking for it names
        # epoch 0; epoch 2 is the latest: it ends at the log end; an
        # epoch above every known one is undefined
        # (LeaderEpochFileCache.endOffsetFor).
        for asked, expected in ((0, (0, 3)), (1, (0, 3)), (2, (2, 5)), (7, (-1, -1))):
            end = epoch_end(await client.call(entities.offset_for_leader_epoch(
                "t", 0, asked, current_leader_epoch=2)))
            assert (end.error_code, end.leader_epoch, end.end_offset) == \
                (ErrorCode.none, *expected), f"epoch {asked}"
        # v2 and a client that names no current epoch are answered too.
        v2 = epoch_end(await client.call(entities.offset_for_leader_epoch(
            "t", 0, 0, version=2)))
        assert (v2.leader_epoch, v2.end_offset) == (0, 3)
        # KIP-320: a request naming another epoch than the leader's is fenced.
        stale = epoch_end(await client.call(entities.offset_for_leader_epoch(
            "t", 0, 0, current_leader_epoch=1)))
        future = epoch_end(await client.call(entities.offset_for_leader_epoch(
            "t", 0, 0, current_leader_epoch=3)))
        assert (stale.error_code, stale.end_offset) == (ErrorCode.fenced_leader_epoch, -1)
        assert (future.error_code, future.end_offset) == (ErrorCode.unknown_leader_epoch, -1)
        # ListOffsets is fenced the same way.
        fenced = listed(await client.call(entities.list_offsets(
            "t", 0, entities.LATEST, current_leader_epoch=1)))
        assert (fenced.error_code, fenced.offset) == (ErrorCode.fenced_leader_epoch, -1)
        latest = listed(await client.call(entities.list_offsets(
            "t", 0, entities.LATEST, current_leader_epoch=2)))
        assert (latest.offset, latest.leader_epoch) == (5, 2)

    run_on_node(three_records_in_epoch_0)
    run_on_node(second_term)


def test_new_leader_epoch_is_known_before_its_first_append(run_on_node):
    # KAFKA-7415: a new leader caches (its epoch, its LEO) when elected, so
    # asking for its epoch names that epoch even before anything is appended in it.
    async def second_term(node):
        client = node.connect()
        end = epoch_end(await client.call(entities.offset_for_leader_epoch(
            "t", 0, 2, current_leader_epoch=2)))
        assert (end.error_code, end.leader_epoch, end.end_offset) == (ErrorCode.none, 2, 3)
        before = epoch_end(await client.call(entities.offset_for_leader_epoch(
            "t", 0, 0, current_leader_epoch=2)))
        assert (before.leader_epoch, before.end_offset) == (0, 3)

    run_on_node(three_records_in_epoch_0)
    run_on_node(second_term)


def test_offset_for_leader_epoch_of_an_unknown_partition(run_on_node):
    async def scenario(node):
        client = node.connect()
        end = epoch_end(await client.call(entities.offset_for_leader_epoch("missing", 0, 0)))
        assert (end.error_code, end.leader_epoch, end.end_offset) == \
            (ErrorCode.unknown_topic_or_partition, -1, -1)
    run_on_node(scenario)


@pytest.mark.parametrize("bug_on", [False, True], ids=["kip-320", "no-leader-epoch-fencing"])
def test_clients_are_told_leader_epochs_unless_the_switch_hides_them(run_on_node, bug_on):
    """KIP-320's client side: Metadata v9 (the first whose epochs librdkafka
    and kafka-python trust) tells each partition's leader epoch, OffsetFetch
    returns the epoch a commit named, and a request naming an old epoch is
    fenced. The switch is a broker from before it: no epochs told, none checked."""
    bugs = frozenset({"no-leader-epoch-fencing"}) if bug_on else frozenset()

    async def first_term(node):
        await node.connect().call(entities.create_topics("t"))

    async def second_term(node):   # the restart elected the broker again: epoch 2
        client = node.connect()
        await client.call(entities.produce("t", 0, values_batch(3)))
        meta = await client.call(entities.metadata(["t"], version=9))
        told = meta.topics[0].partitions[0].leader_epoch
        await client.call(entities.find_coordinator("g"))
        await client.call(entities.offset_commit("g", -1, "", {("t", 0): 3}, leader_epoch=2))
        fetched = await client.call(entities.offset_fetch("g", {"t": [0]}, version=5))
        committed = fetched.topics[0].partitions[0]
        stale = listed(await client.call(entities.list_offsets(
            "t", 0, entities.LATEST, current_leader_epoch=1)))
        if bug_on:
            assert (told, committed.committed_leader_epoch) == (-1, -1)
            assert (stale.error_code, stale.offset) == (ErrorCode.none, 3)
        else:
            assert (told, committed.committed_leader_epoch) == (2, 2)
            assert stale.error_code == ErrorCode.fenced_leader_epoch
        assert committed.committed_offset == 3

    run_on_node(first_term, bugs=bugs)
    run_on_node(second_term, bugs=bugs)
