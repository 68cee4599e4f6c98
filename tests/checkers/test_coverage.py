"""coverage: a run that did not test something is `unknown`, never `valid`
— an operation the workload issued never completed ok, no acknowledged
record read back, final reads that
stopped short of a recorded end, faults asked for and none applied — each
shown by a history that triggers it beside a near-miss that must not."""

from __future__ import annotations

import pytest

from checkers.result import UNKNOWN, CheckOptions
from checkers.suite import check_history
from tests.checkers.conftest import Ops, history_of

pytestmark = pytest.mark.spark


def suite(spark, ops):
    history = history_of(spark, ops.events)
    try:
        return check_history(history, CheckOptions())
    finally:
        history.release()


def test_sends_that_all_timed_out_and_empty_polls_are_not_valid(spark):
    ops = Ops()
    for process, value in enumerate(range(1, 4)):
        ops.send(process, "t", 0, value, type="info", error="_TIMED_OUT: no answer")
    for _ in range(3):
        ops.poll(10)
    outcome = suite(spark, ops)
    assert outcome.result.counts == {}
    assert outcome.valid == UNKNOWN
    untested = outcome.result.unknown["untested"]
    assert untested["operations"] == {"send": {"info": 3}}
    assert "send (0 of 3 ok)" in untested["summary"]


def test_polls_that_never_succeeded_are_not_valid_and_crashes_never_count(spark):
    ops = Ops().send(0, "t", 0, 1, offsets=[0])
    ops.poll(1, type="fail", error="UNKNOWN_TOPIC_OR_PART: ...")
    ops.op(2, "crash", {}, type="info")
    outcome = suite(spark, ops)
    assert outcome.result.unknown["untested"]["operations"] == {"poll": {"fail": 1}}

    ops.poll(3, ("t", 0, 0, 1))
    outcome = suite(spark, ops)
    assert "untested" not in outcome.result.unknown
    assert outcome.valid is True, outcome.result.unknown


def test_nothing_acknowledged_or_nothing_read_back_is_not_valid(spark):
    # A run too slow to send (--rate 0.01 --time-limit 5): polls, all empty.
    ops = Ops().poll(1).poll(1)
    outcome = suite(spark, ops)
    assert outcome.valid == UNKNOWN and outcome.result.counts == {}
    assert outcome.result.unknown["nothing-read-back"]["summary"] == "no send was acknowledged"

    # Acknowledged, and no read returned it.
    ops = Ops().send(0, "t", 0, 1, offsets=[0]).poll(1).poll(1)
    outcome = suite(spark, ops)
    assert outcome.valid == UNKNOWN
    assert outcome.result.unknown["nothing-read-back"]["summary"] == \
        "none of the 1 acknowledged record(s) was read"

    # The near miss: one acknowledged record read once is enough.
    ops = Ops().send(0, "t", 0, 1, offsets=[0]).poll(1, ("t", 0, 0, 1))
    outcome = suite(spark, ops)
    assert "nothing-read-back" not in outcome.result.unknown
    assert outcome.valid is True, outcome.result.unknown


def test_final_reads_short_of_a_recorded_end_are_not_valid(spark):
    ops = Ops().send(0, "t", 0, 10, 11, 12, offsets=[0, 1, 2]).poll(1, *(
        ("t", 0, o, 10 + o) for o in range(3)))
    ops.send(0, "t", 1, 20, 21, offsets=[0, 1]).poll(1, ("t", 1, 0, 20), ("t", 1, 1, 21))
    # Partition 0's final reads stop at 1 of an end at 3; partition 1's end
    # is 3 but offset 2 holds no record (a transaction marker): reached.
    ops.end_offsets(2, ("t", 0, 3), ("t", 1, 3))
    ops.poll(2, ("t", 0, 0, 10), ("t", 0, 1, 11), ("t", 1, 0, 20), ("t", 1, 1, 21),
             phase="final")
    outcome = suite(spark, ops)
    assert outcome.result.counts == {}
    assert outcome.valid == UNKNOWN
    short = outcome.result.unknown["final-reads"]
    assert short["partitions"] == [
        {"topic": "t", "partition": 0, "end_offset": 3, "final_read_to": 1}]

    ops.poll(2, ("t", 0, 2, 12), phase="final")
    outcome = suite(spark, ops)
    assert outcome.result.unknown == {} and outcome.valid is True


def test_faults_asked_for_and_none_applied_are_not_valid(spark):
    ops = Ops().send(0, "t", 0, 1, offsets=[0]).poll(1, ("t", 0, 0, 1))
    ops.op(-1, "kill", {"nodes": ["n1"]}, type="fail", error="RuntimeError: no such node")
    ops.op(-1, "pause", {"nodes": ["n2"]}, type="fail", error="RuntimeError: no such node")
    ops.op(-1, "heal", {}, {"problems": []}, type="info")
    outcome = suite(spark, ops)
    assert outcome.valid == UNKNOWN
    assert outcome.result.unknown["no-fault-applied"]["operations"] == {"fail": 2}

    ops.op(-1, "kill", {"nodes": ["n1"]}, {"nodes": ["n1"]}, type="info")
    outcome = suite(spark, ops)
    assert outcome.result.unknown == {} and outcome.valid is True
