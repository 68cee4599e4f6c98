"""poll_order: nonmonotonic-poll, poll-skip, int-nonmonotonic-poll, int-poll-skip.

Each scenario uses its own partition of topic `t` and its own consumer
processes, so several share one history without interfering.
"""

from __future__ import annotations

import pytest

from checkers import poll_order
from tests.checkers.conftest import Ops

pytestmark = pytest.mark.spark

BIG = 2**62  # offsets this large must work (state sized by records)


def _assigned(*partitions, kind="assigned"):
    return {"kind": kind, "group": "g",
            "partitions": [{"topic": t, "partition": p} for t, p in partitions]}


def _cases(result, type_):
    return sorted((c["partition"], c["process"], tuple(c["offsets"]), tuple(c["values"]),
                   tuple(c["evidence"]), c["topic"]) for c in result.anomalies[type_])


def test_each_poll_order_anomaly(run_checker):
    ops = Ops()
    # P0: process 0 re-reads offset 1 in its next poll. The rebalance the
    # first poll reported fired before its own reads: no reset in between.
    ops.assign(0, ("t", 0))
    ops.poll(0, ("t", 0, 0, 1), ("t", 0, 1, 2), rebalances=[_assigned(("t", 0))])
    a = ops.last
    ops.poll(0, ("t", 0, 1, 2), ("t", 0, 2, 3))
    b = ops.last
    # P1: process 1 jumps from offset 0 to 3 over values at 1 and 2 (sent by
    # process 9); a rebalance of another partition does not explain it.
    ops.send(9, "t", 1, 11, 12, 13, 14, offsets=[0, 1, 2, 3])
    ops.assign(1, ("t", 1))
    ops.poll(1, ("t", 1, 0, 11))
    c = ops.last
    ops.poll(1, ("t", 1, 3, 14), rebalances=[_assigned(("t", 7))])
    d = ops.last
    # P2: inside one (info) poll, process 2 goes backwards.
    ops.assign(2, ("t", 2))
    ops.poll(2, ("t", 2, 5, 21), ("t", 2, 4, 22), type="info")
    e = ops.last
    # P3: inside one poll, process 3 skips the value at BIG + 1 (read by
    # process 4), near 2**62.
    ops.poll(4, ("t", 3, BIG + 1, 32))
    ops.poll(3, ("t", 3, BIG, 31), ("t", 3, BIG + 2, 33))
    f = ops.last

    result = run_checker(poll_order, ops)

    assert result.counts == {"nonmonotonic-poll": 1, "poll-skip": 1,
                             "int-nonmonotonic-poll": 1, "int-poll-skip": 1}
    assert _cases(result, "nonmonotonic-poll") == [(0, 0, (1, 1), (2, 2), (a, b), "t")]
    assert _cases(result, "poll-skip") == [(1, 1, (0, 3), (11, 14), (c, d), "t")]
    assert _cases(result, "int-nonmonotonic-poll") == [(2, 2, (5, 4), (21, 22), (e,), "t")]
    assert _cases(result, "int-poll-skip") == [
        (3, 3, (BIG, BIG + 2), (31, 33), (f,), "t")]


def test_poll_order_near_misses(run_checker):
    ops = Ops()
    # P0: raw gaps with no value in them (transaction markers) are no skip,
    # inside a poll and between polls, even near 2**62.
    ops.assign(0, ("t", 0))
    ops.poll(0, ("t", 0, BIG, 1), ("t", 0, BIG + 2, 2))
    ops.poll(0, ("t", 0, BIG + 4, 3))
    # P1: a re-read after an assign with seek_to_beginning.
    ops.assign(1, ("t", 1))
    ops.poll(1, ("t", 1, 0, 11), ("t", 1, 1, 12))
    ops.assign(1, ("t", 1), seek_to_beginning=True)
    ops.poll(1, ("t", 1, 0, 11), ("t", 1, 1, 12))
    # P2: a re-read in the very poll that reports the partition assigned
    # again (callbacks fire before records are returned).
    ops.poll(2, ("t", 2, 0, 21), ("t", 2, 1, 22))
    ops.poll(2, ("t", 2, 0, 21), rebalances=[_assigned(("t", 2), kind="revoked"),
                                             _assigned(("t", 2))])
    # P3: two consumers read the same records independently.
    ops.poll(3, ("t", 3, 0, 31), ("t", 3, 1, 32))
    ops.poll(4, ("t", 3, 0, 31), ("t", 3, 1, 32))
    ops.poll(3, ("t", 3, 2, 33))
    # P4, P5: a poll of another partition in between does not matter.
    ops.assign(5, ("t", 4), ("t", 5))
    ops.poll(5, ("t", 4, 0, 41), ("t", 4, 1, 42))
    ops.poll(5, ("t", 5, 0, 51))
    ops.poll(5, ("t", 4, 2, 43), ("t", 5, 1, 52))
    # Topic u: a (re)subscribe resets every partition of the topic, and a
    # jump forwards after it is no skip either.
    ops.subscribe(6, "g", "u")
    ops.poll(6, ("u", 0, 0, 61), ("u", 0, 1, 62), ("u", 1, 0, 71))
    ops.subscribe(6, "g", "u")
    ops.poll(6, ("u", 0, 0, 61), ("u", 1, 0, 71))
    ops.poll(7, ("u", 0, 2, 63), ("u", 0, 3, 64))
    ops.subscribe(6, "g", "u")
    ops.poll(6, ("u", 0, 3, 64))

    result = run_checker(poll_order, ops)

    assert result.counts == {}
    assert result.anomalies == {}


def test_a_clients_own_reset_breaks_the_chain_and_only_its_own(run_checker):
    """A `reset` (librdkafka restarted the partition's position by itself,
    workloads/clients/librdkafka_log.py) is no broker's doing: a re-read
    after it is not compared with the reads before. One of another
    partition, or of another consumer, explains nothing."""
    ops = Ops()
    reset = {"kind": "reset", "group": "g", "partitions": [{"topic": "t", "partition": 0}]}
    ops.subscribe(0, "g", "t")
    ops.poll(0, ("t", 0, 0, 1), ("t", 0, 1, 2), ("t", 1, 0, 11), ("t", 1, 1, 12))
    a = ops.last
    ops.poll(0, ("t", 0, 0, 1), ("t", 0, 1, 2), rebalances=[reset])
    ops.poll(0, ("t", 1, 0, 11))
    c = ops.last
    # An assign-mode consumer's reset has no group.
    ops.assign(1, ("t", 2))
    ops.poll(1, ("t", 2, 0, 21), ("t", 2, 1, 22))
    ops.poll(1, ("t", 2, 0, 21), rebalances=[{**reset, "group": None, "partitions": [
        {"topic": "t", "partition": 2}]}])
    ops.poll(2, ("t", 2, 0, 21), ("t", 2, 1, 22))
    d = ops.last
    ops.poll(2, ("t", 2, 1, 22))
    e = ops.last

    result = run_checker(poll_order, ops)

    assert result.counts == {"nonmonotonic-poll": 2}
    assert _cases(result, "nonmonotonic-poll") == [(1, 0, (1, 0), (12, 11), (a, c), "t"),
                                                   (2, 2, (1, 1), (22, 22), (d, e), "t")]
