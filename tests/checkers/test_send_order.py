"""send_order: nonmonotonic-send, int-nonmonotonic-send, int-send-skip.

Each scenario uses its own partition of topic `t` and its own producer
processes, so several share one history without interfering.
"""

from __future__ import annotations

import pytest

from checkers import send_order
from tests.checkers.conftest import Ops

pytestmark = pytest.mark.spark

BIG = 2**62  # offsets this large must work (state sized by records)


def _cases(result, type_):
    return sorted((c["partition"], c["process"], tuple(c["values"]), tuple(c["offsets"]),
                   tuple(c["evidence"]), c["topic"]) for c in result.anomalies[type_])


def test_each_send_order_anomaly(run_checker):
    ops = Ops()
    # P0: a later op of process 0 lands before an earlier one.
    ops.send(0, "t", 0, 1, offsets=[5])
    a = ops.last
    ops.send(0, "t", 0, 2, offsets=[3])
    b = ops.last
    # P1: inside one op, the second send lands before the first.
    ops.send(1, "t", 1, 11, 12, offsets=[7, 6])
    c = ops.last
    # P2: inside one op, another producer's record lands between the two
    # (near 2**62).
    ops.send(2, "t", 2, 21, 22, offsets=[BIG, BIG + 2])
    d = ops.last
    ops.send(3, "t", 2, 23, offsets=[BIG + 1])
    # P3: an `info` send's position is where it was read: before the ok send
    # of the same process that preceded it.
    ops.send(7, "t", 3, 61, offsets=[4])
    e = ops.last
    ops.send(7, "t", 3, 62, type="info")
    f = ops.last
    ops.poll(20, ("t", 3, 1, 62))
    # P4: a fail send is skipped, not a chain breaker: 71@9 is compared
    # with 74@8 across it.
    ops.send(8, "t", 4, 71, offsets=[9])
    g = ops.last
    ops.send(8, "t", 4, 72, type="fail")
    ops.send(8, "t", 4, 74, offsets=[8])
    h = ops.last

    result = run_checker(send_order, ops)

    assert result.counts == {"nonmonotonic-send": 3, "int-nonmonotonic-send": 1,
                             "int-send-skip": 1}
    assert _cases(result, "nonmonotonic-send") == [
        (0, 0, (1, 2), (5, 3), (a, b), "t"),
        (3, 7, (61, 62), (4, 1), (e, f), "t"),
        (4, 8, (71, 74), (9, 8), (g, h), "t"),
    ]
    assert _cases(result, "int-nonmonotonic-send") == [(1, 1, (11, 12), (7, 6), (c,), "t")]
    assert _cases(result, "int-send-skip") == [
        (2, 2, (21, 22), (BIG, BIG + 2), (d,), "t")]
    # int-send-skip is allowed by default: only the others make the run invalid.
    assert result.verdict(frozenset({"nonmonotonic-send", "int-nonmonotonic-send",
                                     "int-send-skip"})) is True


def test_send_order_near_misses(run_checker):
    ops = Ops()
    # P0: a raw gap with no value in it (a transaction marker) is no skip,
    # even near 2**62.
    ops.send(0, "t", 0, 1, 2, offsets=[BIG, BIG + 2])
    # P1: a fail send read at an earlier offset (aborted-read's business) is
    # never evidence.
    ops.send(1, "t", 1, 11, offsets=[5])
    ops.send(1, "t", 1, 12, type="fail")
    ops.poll(20, ("t", 1, 2, 12))
    # P2: an info send nobody read has no position, whatever offset it
    # claims (an info completion ends the process, so it comes last).
    ops.send(2, "t", 2, 21, offsets=[10])
    ops.send(2, "t", 2, 22, offsets=[3], type="info")
    # P3: equal positions are inconsistent-offsets, not reordering; across
    # ops and inside one.
    ops.send(3, "t", 3, 31, offsets=[3])
    ops.send(3, "t", 3, 32, offsets=[3])
    ops.send(3, "t", 3, 33, 34, offsets=[4, 4])
    # P4: different producers interleave freely, and one producer's later op
    # may land after another producer's records (no skip across ops).
    ops.send(4, "t", 4, 41, offsets=[3])
    ops.send(5, "t", 4, 42, offsets=[1])
    ops.send(4, "t", 4, 43, offsets=[5])
    ops.send(5, "t", 4, 44, offsets=[4])
    # P5: the same producer's sends to different partitions are separate
    # chains.
    ops.send(6, "t", 5, 51, offsets=[9])
    ops.send(6, "t", 6, 52, offsets=[2])
    ops.send(6, "t", 5, 53, 54, offsets=[10, 11])

    result = run_checker(send_order, ops)

    assert result.counts == {}
    assert result.anomalies == {}
