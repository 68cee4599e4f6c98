"""duplicates: duplicate, inconsistent-offsets, garbage-read, aborted-read.

Two hand-written histories: one where every scenario shows exactly one case
(each on its own topic or partition, so they do not interfere), and one of
near-misses that must report nothing. Values are signed 64-bit and offsets
reach 2**62: state must be sized by records, never by offsets.
"""

from __future__ import annotations

import itertools

import pytest

from checkers import duplicates
from tests.checkers.conftest import Ops

pytestmark = pytest.mark.spark

BIG = 2 ** 62
MAX_VALUE = 2 ** 63 - 1
MIN_VALUE = -(2 ** 63)


def place(topic, partition, offset):
    return {"topic": topic, "partition": partition, "offset": offset}


def by_key(cases, *fields):
    return {tuple(c[f] for f in fields): c for c in cases}


def test_anomalies(run_checker):
    ops, proc = Ops(), itertools.count()
    i = {}
    # duplicate inside one partition, at offsets beyond 2**62.
    ops.send(next(proc), "t", 0, -1, offsets=[BIG]); i["dup1.send"] = ops.last
    ops.poll(next(proc), ("t", 0, BIG, -1), ("t", 0, BIG + 1, -1)); i["dup1.poll"] = ops.last
    # duplicate across partitions: acknowledged on u/0, read on u/1 (which
    # is not garbage: the value was sent).
    ops.send(next(proc), "u", 0, MAX_VALUE, offsets=[3]); i["dup2.send"] = ops.last
    ops.poll(next(proc), ("u", 1, 0, MAX_VALUE)); i["dup2.poll"] = ops.last
    # duplicate at 21 places: lists are capped at 16, the first witness of
    # each place first.
    ops.send(next(proc), "c", 0, 5, offsets=[0]); i["dup3.send"] = ops.last
    dup3_polls = []
    for offset in range(1, 21):
        ops.poll(next(proc), ("c", 0, offset, 5))
        dup3_polls.append(ops.last)
    # inconsistent offset: an acknowledgement and a reader disagree; 21 was
    # sent by an info send (so it is neither garbage nor aborted).
    ops.send(next(proc), "w", 0, 20, offsets=[BIG]); i["inc1.ack"] = ops.last
    ops.send(next(proc), "w", 0, 21, type="info"); i["inc1.info"] = ops.last
    ops.poll(next(proc), ("w", 0, BIG, 21)); i["inc1.poll"] = ops.last
    # inconsistent offset: two readers disagree.
    ops.send(next(proc), "w", 1, MIN_VALUE, -8, type="info")
    ops.poll(next(proc), ("w", 1, 0, MIN_VALUE)); i["inc2.pollA"] = ops.last
    ops.poll(next(proc), ("w", 1, 0, -8)); i["inc2.pollB"] = ops.last
    # garbage: a value nobody sent, read by two polls (one info), and a
    # record that does not decode.
    ops.poll(next(proc), ("g", 0, BIG, 999)); i["garbage.pollA"] = ops.last
    ops.op(next(proc), "poll", {}, {"reads": [
        {"topic": "g", "partition": 0, "offset": BIG, "value": 999},
        {"topic": "g", "partition": 0, "offset": BIG + 7, "value": None, "raw": "eHl6"}],
        "rebalances": []}, type="info", error="timeout")
    i["garbage.pollB"] = ops.last
    # aborted: the only send of -50 failed, yet it was read.
    ops.send(next(proc), "a", 0, -50, type="fail", error="not enough replicas")
    i["aborted.send"] = ops.last
    ops.poll(next(proc), ("a", 0, BIG, -50)); i["aborted.poll"] = ops.last

    result = run_checker(duplicates, ops)

    assert result.counts == {"duplicate": 3, "inconsistent-offsets": 2,
                             "garbage-read": 2, "aborted-read": 1}

    dups = by_key(result.anomalies["duplicate"], "value")
    assert set(dups) == {(-1,), (MAX_VALUE,), (5,)}
    assert dups[(-1,)] == {
        "type": "duplicate", "topic": "t", "partition": 0, "value": -1,
        "places": [place("t", 0, BIG), place("t", 0, BIG + 1)], "place_count": 2,
        "evidence": [i["dup1.send"], i["dup1.poll"]]}
    assert dups[(MAX_VALUE,)] == {
        "type": "duplicate", "topic": "u", "partition": 0, "value": MAX_VALUE,
        "places": [place("u", 0, 3), place("u", 1, 0)], "place_count": 2,
        "evidence": [i["dup2.send"], i["dup2.poll"]]}
    capped = dups[(5,)]
    assert (capped["topic"], capped["partition"], capped["place_count"]) == ("c", 0, 21)
    assert capped["places"] == [place("c", 0, o) for o in range(16)]
    assert capped["evidence"] == [i["dup3.send"], *dup3_polls[:15]]

    inconsistent = by_key(result.anomalies["inconsistent-offsets"], "topic", "partition")
    assert inconsistent[("w", 0)] == {
        "type": "inconsistent-offsets", "topic": "w", "partition": 0, "offset": BIG,
        "values": [20, 21], "value_count": 2, "evidence": [i["inc1.ack"], i["inc1.poll"]]}
    assert inconsistent[("w", 1)] == {
        "type": "inconsistent-offsets", "topic": "w", "partition": 1, "offset": 0,
        "values": [MIN_VALUE, -8], "value_count": 2,
        "evidence": [i["inc2.pollA"], i["inc2.pollB"]]}

    garbage = by_key(result.anomalies["garbage-read"], "offset")
    assert garbage[(BIG,)] == {
        "type": "garbage-read", "topic": "g", "partition": 0, "offset": BIG, "value": 999,
        "raw": None, "evidence": [i["garbage.pollA"], i["garbage.pollB"]]}
    assert garbage[(BIG + 7,)] == {
        "type": "garbage-read", "topic": "g", "partition": 0, "offset": BIG + 7,
        "value": None, "raw": "eHl6", "evidence": [i["garbage.pollB"]]}

    assert result.anomalies["aborted-read"] == [{
        "type": "aborted-read", "topic": "a", "partition": 0, "offset": BIG, "value": -50,
        "evidence": [i["aborted.send"], i["aborted.poll"]]}]

    reads = 2 + 1 + 20 + 1 + 2 + 1 + 2 + 1
    assert result.stats["duplicates"] == {
        "reads_checked": reads, "undecodable_reads": 1,
        # t:2, u:2, c:21, w/0:2, w/1:2, g:1 (999), a:1
        "records": 31}


def test_near_misses(run_checker):
    ops, proc = Ops(), itertools.count()
    # The same value read twice at the same offset, by two consumers and
    # re-read by one: one place, one value.
    ops.send(next(proc), "t", 0, -3, MIN_VALUE, offsets=[BIG, BIG + 1])
    reader = next(proc)
    ops.poll(reader, ("t", 0, BIG, -3), ("t", 0, BIG + 1, MIN_VALUE))
    ops.poll(reader, ("t", 0, BIG, -3))
    ops.poll(next(proc), ("t", 0, BIG, -3), ("t", 0, BIG + 1, MIN_VALUE))
    # An info send nobody read, one that never completed, and a failed send
    # with no offset, on a partition whose offset 0 holds another value.
    ops.send(next(proc), "t", 1, 7, offsets=[0])
    ops.poll(next(proc), ("t", 1, 0, 7))
    ops.send(next(proc), "t", 1, 8, type="info")
    ops.send(next(proc), "t", 1, 9, type="fail", error="not enough replicas")
    ops.send(next(proc), "t", 1, 10, pending=True)
    # Values of info sends are read: neither garbage nor aborted, not even
    # the one never completed, nor one read on another partition than sent.
    ops.send(next(proc), "u", 0, MAX_VALUE, type="info")
    ops.send(next(proc), "u", 0, 11, pending=True)
    ops.send(next(proc), "u", 0, 12, type="info")
    ops.poll(next(proc), ("u", 0, 0, MAX_VALUE), ("u", 0, 1, 11), ("u", 1, BIG, 12))
    # A value whose send failed but which was also sent by an ok send
    # (re-sent as is): that send explains the read, it is not aborted.
    ops.send(next(proc), "v", 0, 13, type="fail", error="timeout")
    ops.send(next(proc), "v", 0, 13, offsets=[4])
    ops.poll(next(proc), ("v", 0, 4, 13))

    result = run_checker(duplicates, ops)

    assert result.counts == {}
    assert result.anomalies == {}
    assert result.stats["duplicates"] == {
        "reads_checked": 2 + 1 + 2 + 1 + 3 + 1, "undecodable_reads": 0, "records": 7}
