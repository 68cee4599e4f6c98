"""The transaction coordinator's state machine (TransactionMetadata,
TransactionCoordinator): its log is an in-memory list of the records it
writes (the real `__transaction_state` is exercised by the client tests in
test_transactions.py) and its markers are recorded, and held, here."""

from __future__ import annotations

import asyncio
import itertools

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.txn.coordinator import TransactionCoordinator, TxnConfig
from reference_broker.txn.metadata import (
    MAX_EPOCH, TxnMetadata, TxnState, decode, encode, replay,
)
from reference_broker.txn.partition_txns import ABORT, COMMIT

NONE = ErrorCode.none
T0 = ("t", 0)


class MemoryLog:
    def __init__(self):
        self.records: dict[int, list] = {}
        self.error = NONE

    async def append(self, index, records):
        await asyncio.sleep(0)
        if self.error:
            return self.error
        self.records.setdefault(index, []).extend(records)
        return NONE

    def states(self, index):
        return [decode(k, v)[1].state for k, v in self.records[index]]


class HeldMarkers:
    """Records each marker write; `hold` keeps them from landing."""

    def __init__(self):
        self.written = []
        self.hold = asyncio.Event()
        self.hold.set()

    async def write(self, producer_id, producer_epoch, result, coordinator_epoch, partitions,
                    still_coordinator):
        await self.hold.wait()
        self.written.append((producer_id, producer_epoch, result, coordinator_epoch,
                             tuple(partitions)))


def coordinator(**config):
    ids = itertools.count(1000)
    log, markers = MemoryLog(), HeldMarkers()
    c = TransactionCoordinator(log, markers, lambda: next(ids),
                               TxnConfig(partitions=1, **config))
    c.load(0, coordinator_epoch=3, records=[])
    return c, log, markers


async def settle():
    for _ in range(20):
        await asyncio.sleep(0)


def run(scenario):
    async def wrapped():
        try:
            return await scenario()
        finally:
            for task in asyncio.all_tasks() - {asyncio.current_task()}:
                task.cancel()
    return asyncio.run(wrapped())


def test_a_producer_s_own_bump_may_be_retried_and_a_new_producer_fences_it():
    """KIP-360: a producer naming its epoch bumps it, and a retry of that
    bump (its answer lost) gets the same epoch, written again; a new
    producer (naming none) leaves no last epoch, so the old one's retry is
    fenced instead of handed the new producer's epoch."""
    async def scenario():
        c, log, _ = coordinator()
        first = await c.init_producer_id("a", 60000)
        pid = first.producer_id
        own = await c.init_producer_id("a", 60000, pid, 0)
        retry = await c.init_producer_id("a", 60000, pid, 0)
        new = await c.init_producer_id("a", 60000)
        answers = [first, own, retry, new] + [
            await c.init_producer_id("a", 60000, p, e) for p, e in ((pid, 1), (pid, 0), (999, 2))]
        return [(a.error, a.producer_id, a.producer_epoch) for a in answers], log.states(0)
    answers, states = run(scenario)
    fenced = (ErrorCode.producer_fenced, -1, -1)
    assert answers == [(NONE, 1000, 0), (NONE, 1000, 1), (NONE, 1000, 1), (NONE, 1000, 2),
                       fenced, fenced, fenced]
    assert states == [TxnState.EMPTY] * 4


def test_an_exhausted_epoch_rotates_the_producer_id_and_the_rotation_may_be_retried():
    async def scenario():
        ids = itertools.count(1000)
        c = TransactionCoordinator(MemoryLog(), HeldMarkers(), lambda: next(ids),
                                   TxnConfig(partitions=1))
        c.load(0, coordinator_epoch=3, records=[encode(TxnMetadata(
            "a", 7, MAX_EPOCH, 60000, TxnState.COMPLETE_COMMIT))])
        return [await c.init_producer_id("a", 60000, 7, e) for e in (MAX_EPOCH, MAX_EPOCH,
                                                                     MAX_EPOCH - 1)]
    rotated, retried, stale = run(scenario)
    assert (rotated.error, rotated.producer_id, rotated.producer_epoch) == (NONE, 1000, 0)
    assert (retried.error, retried.producer_id, retried.producer_epoch) == (NONE, 1000, 0)
    assert stale.error == ErrorCode.producer_fenced


def test_commit_is_answered_before_the_markers_land():
    async def scenario():
        c, log, markers = coordinator()
        pid = (await c.init_producer_id("a", 60000)).producer_id
        assert await c.add_partitions("a", pid, 0, [T0, ("u", 1)]) == NONE
        markers.hold.clear()
        answered = await c.end_txn("a", pid, 0, commit=True)
        state_before = c.describe("a")[1].state
        again = await c.end_txn("a", pid, 0, commit=True)
        opposite = await c.end_txn("a", pid, 0, commit=False)
        markers.hold.set()
        await settle()
        return (answered, state_before, again, opposite, markers.written,
                c.describe("a")[1], await c.end_txn("a", pid, 0, commit=True))
    answered, before, again, opposite, written, after, retried = run(scenario)
    assert answered == NONE and before == TxnState.PREPARE_COMMIT
    assert again == ErrorCode.concurrent_transactions
    assert opposite == ErrorCode.invalid_txn_state
    assert written == [(1000, 0, COMMIT, 3, (T0, ("u", 1)))]
    assert after.state == TxnState.COMPLETE_COMMIT and after.partitions == frozenset()
    assert retried == NONE                                      # a retry after completion


def test_init_during_a_transaction_fences_it_with_an_abort_at_the_next_epoch():
    async def scenario():
        c, _, markers = coordinator()
        pid = (await c.init_producer_id("a", 60000)).producer_id
        await c.add_partitions("a", pid, 0, [T0])
        fenced = await c.init_producer_id("a", 60000)
        await settle()
        # The fenced producer asking for a bump of its own epoch (KIP-360)
        # must not be handed the fencing epoch.
        zombie_init = await c.init_producer_id("a", 60000, pid, 0)
        retried = await c.init_producer_id("a", 60000)
        zombie = await c.end_txn("a", pid, 0, commit=True)
        return fenced, markers.written, retried, zombie, zombie_init.error
    fenced, written, retried, zombie, zombie_init = run(scenario)
    assert fenced.error == ErrorCode.concurrent_transactions
    assert written == [(1000, 1, ABORT, 3, (T0,))]              # the abort at epoch 1
    assert (retried.error, retried.producer_epoch) == (NONE, 2)
    assert zombie == zombie_init == ErrorCode.producer_fenced


def test_requests_from_unknown_or_old_producers():
    async def scenario():
        c, _, _ = coordinator()
        pid = (await c.init_producer_id("a", 60000)).producer_id
        await c.init_producer_id("a", 60000)
        return (await c.add_partitions("a", pid + 1, 1, [T0]),
                await c.add_partitions("a", pid, 0, [T0]),
                await c.add_partitions("nobody", pid, 1, [T0]),
                await c.end_txn("a", pid, 1, commit=True),
                (await c.init_producer_id("a", 900001)).error,
                (await c.init_producer_id("", 1000)).error)
    assert run(scenario) == (ErrorCode.invalid_producer_id_mapping, ErrorCode.producer_fenced,
                             ErrorCode.invalid_producer_id_mapping, ErrorCode.invalid_txn_state,
                             ErrorCode.invalid_transaction_timeout, ErrorCode.invalid_request)


def test_verification_answers_whether_a_partition_is_in_the_transaction():
    async def scenario():
        c, _, _ = coordinator()
        pid = (await c.init_producer_id("a", 60000)).producer_id
        await c.add_partitions("a", pid, 0, [T0])
        return (c.verify("a", pid, 0, [T0, ("t", 1)]), c.verify("a", pid, 1, [T0]),
                c.verify("a", pid + 5, 0, [T0]))
    inside, fenced, stranger = run(scenario)
    assert inside == {T0: NONE, ("t", 1): ErrorCode.transaction_abortable}
    assert fenced == {T0: ErrorCode.producer_fenced}
    assert stranger == {T0: ErrorCode.invalid_producer_id_mapping}


def test_a_failed_write_changes_nothing():
    async def scenario():
        c, log, _ = coordinator()
        pid = (await c.init_producer_id("a", 60000)).producer_id
        log.error = ErrorCode.not_enough_replicas
        failed = await c.add_partitions("a", pid, 0, [T0])
        return failed, c.describe("a")[1].state
    assert run(scenario) == (ErrorCode.coordinator_not_available, TxnState.EMPTY)


@pytest.mark.parametrize("bump", [True, False])
def test_an_expired_transaction_is_aborted_at_a_bumped_epoch(bump):
    """KAFKA-6119: the abort fences the producer that let its transaction
    expire. Without the bump (`txn-expiry-no-bump`) that producer, unaware,
    adds another partition — a new transaction at the same epoch — and
    commits it: only the records sent after the timeout are committed."""
    async def scenario():
        c, _, markers = coordinator(abort_interval_ms=20, bump_epoch_on_timeout=bump)
        pid = (await c.init_producer_id("a", 50)).producer_id
        await c.add_partitions("a", pid, 0, [T0])
        await asyncio.sleep(0.2)
        expired = c.describe("a")[1]
        late_add = await c.add_partitions("a", pid, 0, [("u", 1)])
        late_commit = await c.end_txn("a", pid, 0, commit=True)
        await settle()
        return markers.written, expired, late_add, late_commit
    written, expired, late_add, late_commit = run(scenario)
    assert expired.state == TxnState.COMPLETE_ABORT
    if bump:
        assert written == [(1000, 1, ABORT, 3, (T0,))]
        assert expired.producer_epoch == 1
        assert late_add == late_commit == ErrorCode.producer_fenced
    else:
        assert written == [(1000, 0, ABORT, 3, (T0,)), (1000, 0, COMMIT, 3, (("u", 1),))]
        assert expired.producer_epoch == 0
        assert late_add == late_commit == NONE


def test_a_new_coordinator_finishes_a_prepared_transaction_on_load():
    async def scenario():
        c, log, markers = coordinator()
        pid = (await c.init_producer_id("a", 60000)).producer_id
        await c.add_partitions("a", pid, 0, [T0])
        markers.hold.clear()
        await c.end_txn("a", pid, 0, commit=False)
        c.unload(0)
        not_here = await c.end_txn("a", pid, 0, commit=False)
        prepared = replay(log.records[0])["a"].state
        successor, _, successor_markers = coordinator()
        successor._log = log
        successor.unload(0)
        successor.load(0, coordinator_epoch=4, records=list(log.records[0]))
        await settle()
        return not_here, prepared, successor_markers.written, successor.describe("a")[1].state
    not_here, prepared, written, state = run(scenario)
    assert not_here == ErrorCode.not_coordinator
    assert prepared == TxnState.PREPARE_ABORT
    assert written == [(1000, 0, ABORT, 4, (T0,))]              # at the new coordinator epoch
    assert state == TxnState.COMPLETE_ABORT
