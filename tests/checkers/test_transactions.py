"""transactions: precommitted-read, torn-transaction and stuck-lso, on a history
where each scenario shows one case (each on its own topic) and on
near-misses that must report nothing. History times are 10 ns per event
(tests/checkers/conftest.py), so `committing` is given in those units."""

from __future__ import annotations

import pytest

from checkers import transactions
from tests.checkers.conftest import Ops

pytestmark = pytest.mark.spark


def now(ops: Ops) -> int:
    """The history time of the next event."""
    return 10 * len(ops.events)


def test_anomalies(run_checker):
    ops = Ops()
    # precommitted: p1's transaction is open (sent, not yet asked to
    # commit) when p2's poll returns its value.
    ops.txn(1, ("a", 0, 10, 0), pending=True)
    ops.poll(2, ("a", 0, 0, 10)); early_read = ops.last
    ops._pending[1]["value"]["committing"] = now(ops)
    ops.complete(1); early_txn = ops.last
    # precommitted, by the invocation alone: read before its transaction
    # began (an info transaction that never recorded `committing`).
    ops.poll(3, ("b", 0, 0, 11)); future_read = ops.last
    ops.txn(4, ("b", 0, 11, None), type="info", error="timed out"); future_txn = ops.last
    # torn: a committed transaction over c-0 and c-1; 20 is read, 21 is
    # read past (offset 1 of c-1 was read) and never read.
    ops.txn(5, ("c", 0, 20, 0), ("c", 1, 21, 0), committing=now(ops) + 5); torn_txn = ops.last
    ops.poll(6, ("c", 0, 0, 20)); seen = ops.last
    ops.send(7, "c", 1, 22, offsets=[1])
    ops.poll(6, ("c", 1, 1, 22)); past = ops.last
    # stuck: the final phase's last read_committed end of s-0 (7) stayed
    # below the high watermark asked before it (10; the evidence is its
    # last asking); s-1 settled.
    ops.end_offsets(90, ("s", 0, 10), ("s", 1, 4), isolation="read_uncommitted")
    hw = ops.last
    ops.end_offsets(91, ("s", 0, 7), ("s", 1, 3), isolation="read_committed")
    ops.end_offsets(90, ("s", 0, 10), ("s", 1, 4), isolation="read_uncommitted")
    ops.end_offsets(91, ("s", 0, 7), ("s", 1, 4), isolation="read_committed")
    lso = ops.last

    result = run_checker(transactions, ops)

    assert result.counts == {"precommitted-read": 2, "torn-transaction": 1, "stuck-lso": 1}
    assert result.anomalies["stuck-lso"] == [{
        "type": "stuck-lso", "topic": "s", "partition": 0, "offset": 7, "end_offset": 10,
        "evidence": [hw + 4, lso]}]
    assert sorted(result.anomalies["precommitted-read"], key=lambda c: c["value"]) == [
        {"type": "precommitted-read", "topic": "a", "partition": 0, "offset": 0, "value": 10,
         "evidence": [early_txn, early_read]},
        {"type": "precommitted-read", "topic": "b", "partition": 0, "offset": 0, "value": 11,
         "evidence": [future_txn, future_read]},
    ]
    assert result.anomalies["torn-transaction"] == [{
        "type": "torn-transaction", "process": 5, "values": [20], "lost_values": [21],
        "places": [{"topic": "c", "partition": 1, "offset": 0}],
        "evidence": sorted([torn_txn, seen, past])}]
    assert result.stats["transactions"] == {"transactions": 3}


def test_near_misses(run_checker):
    ops = Ops()
    # Read after the commit was asked: what read_committed allows.
    ops.txn(1, ("a", 0, 10, 0), committing=now(ops) + 5)
    ops.poll(2, ("a", 0, 0, 10))
    # A value written twice (a pipeline that processed its input again):
    # the first copy read before the second transaction asked to commit.
    ops.txn(70, ("twice", 0, 60, 0), committing=now(ops) + 5)
    ops.poll(80, ("twice", 0, 0, 60))
    ops.txn(71, ("twice", 0, 60, 1), committing=now(ops) + 5)
    ops.poll(80, ("twice", 0, 1, 60))
    # Read of an aborted transaction's value: aborted-read's, not this family's.
    ops.poll(3, ("b", 0, 0, 11))
    ops.txn(4, ("b", 0, 11, None), type="fail", error="ABORTED: by choice")
    # Committed, one half read, the other never read and never read past
    # (unseen at most: the lost family's to judge, not a torn commit).
    ops.txn(5, ("c", 0, 20, 0), ("c", 1, 21, 0), committing=now(ops) + 5)
    ops.poll(6, ("c", 0, 0, 20))
    # Committed, every value read past and none read: lost, not torn.
    ops.txn(5, ("d", 0, 30, 0), ("d", 1, 31, 0), committing=now(ops) + 5)
    ops.send(7, "d", 0, 32, offsets=[1]); ops.send(7, "d", 1, 33, offsets=[1])
    ops.poll(6, ("d", 0, 1, 32), ("d", 1, 1, 33))
    # An info transaction half read: not known committed.
    ops.txn(8, ("e", 0, 40, 0), ("e", 1, 41, 0), type="info", committing=now(ops) + 5)
    ops.send(7, "e", 1, 42, offsets=[1])
    ops.poll(6, ("e", 0, 0, 40), ("e", 1, 1, 42))
    # Committed and wholly read.
    ops.txn(9, ("f", 0, 50, 0), ("f", 1, 51, 0), committing=now(ops) + 5)
    ops.poll(6, ("f", 0, 0, 50), ("f", 1, 0, 51))
    # Ends apart, but settled by the last asking; apart in the main phase
    # (transactions were open); a read_committed end asked first, with no
    # high watermark before it; the client's own ends (no isolation).
    ops.end_offsets(90, ("s", 0, 10), isolation="read_uncommitted")
    ops.end_offsets(91, ("s", 0, 7), isolation="read_committed")
    ops.end_offsets(90, ("s", 0, 10), isolation="read_uncommitted")
    ops.end_offsets(91, ("s", 0, 10), isolation="read_committed")
    ops.end_offsets(90, ("m", 0, 10), isolation="read_uncommitted", phase=None)
    ops.end_offsets(91, ("m", 0, 7), isolation="read_committed", phase=None)
    ops.end_offsets(91, ("n", 0, 7), isolation="read_committed")
    ops.end_offsets(90, ("n", 0, 10), isolation="read_uncommitted")
    ops.end_offsets(92, ("o", 0, 10))
    ops.end_offsets(92, ("o", 0, 7))

    result = run_checker(transactions, ops)

    assert result.counts == {}
    assert result.stats["transactions"] == {"transactions": 8}


def test_a_history_without_transactions_is_not_judged(run_checker):
    ops = Ops().send(1, "a", 0, 1, offsets=[0]).poll(2, ("a", 0, 0, 1))
    result = run_checker(transactions, ops)
    assert result.counts == {} and result.stats["transactions"] == {"transactions": 0}
