"""Bug switches on one node: each flips its one rule when on, and the rule
holds when off (the same scenario both ways)."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.bugs import CATALOGUE, UnknownBug, parse_bugs
from reference_broker.group import OffsetCommit
from reference_broker.log import LogConfig, PartitionLog
from reference_broker.partition import Partition
from tests.reference_broker.group.members import coordinator, stable_group
from tests.reference_broker.group.memory_store import MemoryOffsetStore
from tests.reference_broker.record_batches import values_batch


def partition(tmp_path, *bugs: str) -> Partition:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    return Partition("t", 0, log, leader_epoch=2, bugs=frozenset(bugs))


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
def test_no_leader_epoch_fencing(tmp_path, bug_on):
    p = partition(tmp_path, *(["no-leader-epoch-fencing"] if bug_on else []))
    stale, future = p.check_epoch(1), p.check_epoch(3)
    if bug_on:
        assert (stale, future) == (ErrorCode.none, ErrorCode.none)
    else:
        assert (stale, future) == (ErrorCode.fenced_leader_epoch, ErrorCode.unknown_leader_epoch)
    assert p.check_epoch(2) == ErrorCode.none and p.check_epoch(-1) == ErrorCode.none


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
    with pytest.raises(UnknownBug, match="'nope': no such bug switch; known: dedup-window-one"):
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
