"""Bug switches on one node: each flips its one rule when on, and the rule
holds when off (the same scenario both ways)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from types import SimpleNamespace

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.bugs import CATALOGUE, UnknownBug, parse_bugs
from reference_broker.config import BrokerConfig, parse_settings
from reference_broker.controller.records import PartitionState
from reference_broker.group import GroupConfig, GroupCoordinator, OffsetCommit, StoreError
from reference_broker.group.records import (
    OffsetCommitValue, offset_commit_key, offset_commit_value,
)
from reference_broker.internal_batches import encode_batch
from reference_broker.log import LogConfig, PartitionLog
from reference_broker.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from reference_broker.partition import READ_COMMITTED, Partition
from reference_broker.txn.coordinator import TransactionCoordinator, TxnConfig
from tests.reference_broker.group.members import coordinator, stable_group
from tests.reference_broker.group.memory_store import MemoryOffsetStore
from tests.reference_broker.record_batches import values_batch
from tests.reference_broker.txn.test_coordinator import HeldMarkers, MemoryLog


def partition(tmp_path, *bugs: str, replicas: tuple[int, ...] = (1,),
              topic: str = "t") -> Partition:
    """Broker 1's replica of <topic>-0, leader in epoch 2 with every replica in the ISR."""
    log = PartitionLog.open(tmp_path / f"{topic}-0", LogConfig())
    p = Partition(topic, 0, log, node_id=1, bugs=frozenset(bugs))
    p.become_leader(PartitionState(topic, 0, replicas, replicas, leader=1, leader_epoch=2,
                                   partition_epoch=0), now=0)
    return p


@pytest.mark.parametrize("bug_on", [False, True])
def test_dedup_window_one(tmp_path, bug_on):
    """Five batches in flight; a retry of the fourth-newest. Kafka keeps 5
    batches per producer and answers the retry with its offsets; with the
    single-batch cache it is out of order."""
    p = partition(tmp_path, *(["dedup-window-one"] if bug_on else []))
    batches = [values_batch(2, start=2 * n, producer_id=7, producer_epoch=0,
                            base_sequence=2 * n) for n in range(5)]
    for n, batch in enumerate(batches):
        assert p.append(batch, 1 << 20).base_offset == 2 * n
    retry = p.append(batches[1], 1 << 20)
    if bug_on:
        assert retry.error == ErrorCode.out_of_order_sequence_number
    else:
        assert (retry.error, retry.base_offset) == (ErrorCode.none, 2)
    assert p.high_watermark == 10  # nothing appended twice either way
    # The newest batch is deduplicated in both modes.
    assert p.append(batches[4], 1 << 20).base_offset == 8


@pytest.mark.parametrize("bug_on", [False, True])
def test_no_leader_epoch_fencing(tmp_path, bug_on, caplog):
    p = partition(tmp_path, *(["no-leader-epoch-fencing"] if bug_on else []))
    stale, future = p.check_epoch(1), p.check_epoch(3)
    p.check_epoch(1)
    if bug_on:
        assert (stale, future) == (ErrorCode.none, ErrorCode.none)
    else:
        assert (stale, future) == (ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch)
    assert p.check_epoch(2) == ErrorCode.none and p.check_epoch(-1) == ErrorCode.none
    # The switch says where it let a request through, once per pair of epochs.
    let_through = [r.getMessage() for r in caplog.records if "bug switch" in r.getMessage()]
    assert len(let_through) == (2 if bug_on else 0)
    if bug_on:
        assert "naming leader epoch 1 in epoch 2" in let_through[0]


@pytest.mark.parametrize("bug_on", [False, True])
def test_no_generation_fencing(bug_on):
    """A member replaced in the group (an unknown member id) commits."""
    async def scenario():
        coord = coordinator(MemoryOffsetStore(), fence_commits=not bug_on)
        await stable_group(coord, 1)
        result = await coord.commit_offsets("g", 1, "zombie", None, [OffsetCommit("t", 0, 9)])
        stale = await coord.commit_offsets("g", 0, "zombie", None, [OffsetCommit("t", 1, 9)])
        committed = coord.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset
        await coord.close()
        return result[("t", 0)], stale[("t", 1)], committed
    result, stale, committed = asyncio.run(scenario())
    if bug_on:
        assert (result, stale, committed) == (ErrorCode.none, ErrorCode.none, 9)
    else:
        assert (result, stale, committed) == (ErrorCode.unknown_member_id,
                                              ErrorCode.unknown_member_id, -1)


def test_unknown_switch_is_named():
    with pytest.raises(UnknownBug, match="'nope': no such bug switch; known: "
                       "acks-all-ignores-min-isr, coordinator-partial-load"):
        parse_bugs(["nope"])
    assert parse_bugs(list(CATALOGUE)) == frozenset(CATALOGUE)


def test_list_bugs_prints_every_switch_with_its_incident():
    out = subprocess.run([sys.executable, "-m", "reference_broker", "--list-bugs"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    assert [line.split()[0] for line in out.splitlines()] == sorted(CATALOGUE)
    assert "KAFKA-6880" in out


@pytest.mark.parametrize("bug_on", [False, True])
def test_no_idempotent_dedup(tmp_path, bug_on):
    """A retry of the last batch: answered with its offsets, or written twice."""
    p = partition(tmp_path, *(["no-idempotent-dedup"] if bug_on else []))
    first = values_batch(3, producer_id=7, producer_epoch=0, base_sequence=0)
    assert p.append(first, 1 << 20).base_offset == 0
    retry = p.append(first, 1 << 20)
    assert retry.error == ErrorCode.none
    assert (retry.base_offset, p.high_watermark) == ((3, 6) if bug_on else (0, 3))
    # Either way the producer's next batch is in sequence.
    following = values_batch(1, start=3, producer_id=7, producer_epoch=0, base_sequence=3)
    assert p.append(following, 1 << 20).error == ErrorCode.none


@pytest.mark.parametrize("bug_on", [False, True])
def test_fetch_above_hw(tmp_path, bug_on):
    """Appended on the leader, not yet fetched by the follower: below the HW
    nothing is readable, unless the bug lets consumers read to the log end."""
    async def scenario():
        p = partition(tmp_path, *(["fetch-above-hw"] if bug_on else []), replicas=(1, 2))
        p.append(values_batch(3), 1 << 20, acks=1)
        before = (p.high_watermark, p.readable_end(0), p.readable_end(READ_COMMITTED))
        p.on_follower_fetch(2, 3)
        return before, p.readable_end(0)
    (hw, readable, committed_end), after = asyncio.run(scenario())
    assert hw == 0 and after == 3
    assert (readable, committed_end) == ((3, 3) if bug_on else (0, 0))


def offsets_store(tmp_path, *bugs: str, **settings):
    """An OffsetsTopic over a two-replica `__consumer_offsets-0` led here."""
    p = partition(tmp_path, *bugs, replicas=(1, 2), topic=OFFSETS_TOPIC)
    config = BrokerConfig(node_id=1, listen=("127.0.0.1", 9092), advertise=("127.0.0.1", 9092),
                          data_dir=tmp_path, bugs=frozenset(bugs), settings=parse_settings(
                              [f"{k.replace('_', '.')}={v}" for k, v in settings.items()]))
    broker = SimpleNamespace(config=config, partition=lambda topic, index: p)
    return OffsetsTopic(broker), p


@pytest.mark.parametrize("bug_on", [False, True])
def test_offsets_commit_acks_one(tmp_path, bug_on):
    """A commit is answered once the follower has the record (acks=all), or
    under the bug right after the coordinator's own append."""
    async def scenario():
        store, p = offsets_store(tmp_path, *(["offsets-commit-acks-one"] if bug_on else []))
        commit = asyncio.ensure_future(store.append(0, [(b"k", b"v")]))
        await asyncio.sleep(0.05)
        answered_alone = commit.done()
        p.on_follower_fetch(2, p.log.log_end_offset)
        await asyncio.wait_for(commit, 5)
        return answered_alone
    assert asyncio.run(scenario()) is bug_on


def test_offsets_commit_times_out_without_the_isr(tmp_path):
    async def scenario():
        store, _ = offsets_store(tmp_path, offsets_commit_timeout_ms=50)
        with pytest.raises(StoreError) as error:
            await store.append(0, [(b"k", b"v")])
        return error.value.error_code
    assert asyncio.run(scenario()) == ErrorCode.request_timed_out


@pytest.mark.parametrize("bug_on", [False, True])
def test_coordinator_partial_load(tmp_path, bug_on):
    """Three commit batches, a load buffer that holds one: the loader reads
    them all, or under the bug only the first (a stale committed offset)."""
    async def scenario():
        store, p = offsets_store(tmp_path, offsets_load_buffer_size=100)
        coord = GroupCoordinator(MemoryOffsetStore(), GroupConfig(offsets_topic_partitions=1))
        for offset in (5, 9, 12):
            record = (offset_commit_key("g", "t", 0),
                      offset_commit_value(OffsetCommitValue(offset, -1, "", 0)))
            p.append(encode_batch([record]), 1 << 20, acks=1)
        coord.load(0, *store.replay(p, partial=bug_on))
        committed = coord.fetch_offsets("g", [("t", 0)]).offsets[("t", 0)].offset
        await coord.close()
        return committed
    assert asyncio.run(scenario()) == (5 if bug_on else 12)


@pytest.mark.parametrize("bug_on", [False, True])
def test_lso_inclusive(tmp_path, bug_on):
    """An open transaction at offset 2: read_committed reads stop before it
    (the last stable offset is exclusive), or under the bug take its first
    record (Redpanda PR #3036)."""
    p = partition(tmp_path, *(["lso-inclusive"] if bug_on else []))
    p.append(values_batch(2), 1 << 20)
    p.append(values_batch(3, producer_id=7, producer_epoch=0, base_sequence=0,
                          attributes=0x10), 1 << 20)
    assert (p.last_stable_offset, p.high_watermark) == (2, 5)
    assert p.readable_end(READ_COMMITTED) == (3 if bug_on else 2)
    assert p.readable_end(0) == 5


@pytest.mark.parametrize("bug_on", [False, True])
def test_txn_expiry_no_bump(tmp_path, bug_on):
    """A transaction left open past its timeout, aborted by the sweeper: its
    producer then adds a partition and commits. The bump fences it; under
    the bug that commit succeeds, without what was sent before (KAFKA-6119)."""
    config = BrokerConfig(
        node_id=1, listen=("127.0.0.1", 9092), advertise=("127.0.0.1", 9092), data_dir=tmp_path,
        bugs=frozenset(["txn-expiry-no-bump"] if bug_on else []), settings=parse_settings([
            "transaction.state.log.num.partitions=1",
            "transaction.abort.timed.out.transaction.cleanup.interval.ms=20"]))

    async def scenario():
        c = TransactionCoordinator(MemoryLog(), HeldMarkers(), lambda: 7, TxnConfig.of(config))
        c.load(0, coordinator_epoch=1, records=[])
        await c.init_producer_id("x", 50)
        await c.add_partitions("x", 7, 0, [("t", 0)])
        await asyncio.sleep(0.2)
        epoch = c.describe("x")[1].producer_epoch
        answers = (await c.add_partitions("x", 7, 0, [("t", 1)]),
                   await c.end_txn("x", 7, 0, commit=True))
        await c.close()
        return epoch, answers
    epoch, answers = asyncio.run(scenario())
    if bug_on:
        assert (epoch, answers) == (0, (ErrorCode.none, ErrorCode.none))
    else:
        assert (epoch, answers) == (1, (ErrorCode.producer_fenced, ErrorCode.producer_fenced))
