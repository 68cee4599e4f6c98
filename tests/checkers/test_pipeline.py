"""pipeline: eos-duplicate and eos-missing, on a history where each
scenario shows its case (each on its own input partition) and on near-misses
that must report nothing. A pipeline writes input v as v + PIPELINE_OUTPUT
(B here) to the output topic "o"."""

from __future__ import annotations

import pytest

from checkers import pipeline
from history_analysis.history.schema import PIPELINE_OUTPUT as B
from tests.checkers.conftest import Ops

pytestmark = pytest.mark.spark

G = "kchaos-pipe"


def test_anomalies(run_checker):
    ops = Ops()
    ops.send(1, "i", 0, 100, 101, offsets=[0, 1])
    ops.poll(2, ("i", 0, 0, 100), ("i", 0, 1, 101)); read_101 = ops.last
    ops.txn(2, ("o", 0, 100 | B, 0), ("o", 0, 101 | B, 1), offsets=(G, [("i", 0, 2)]))
    first = ops.last
    # A zombie processes 101 again, and its commit is taken.
    ops.txn(3, ("o", 0, 101 | B, 2), offsets=(G, [("i", 0, 2)])); again = ops.last
    # The group commits past 201 and 202, which were never processed.
    ops.send(1, "i", 1, 200, 201, 202, offsets=[0, 1, 2])
    ops.poll(9, ("i", 1, 0, 200), ("i", 1, 1, 201), ("i", 1, 2, 202)); reader = ops.last
    ops.txn(2, ("o", 1, 200 | B, 0), offsets=(G, [("i", 1, 3)])); skipping = ops.last

    result = run_checker(pipeline, ops)

    assert result.counts == {"eos-duplicate": 1, "eos-missing": 2}
    assert result.anomalies["eos-duplicate"] == [{
        "type": "eos-duplicate", "topic": "i", "partition": 0, "value": 101,
        "places": [{"topic": "o", "partition": 0, "offset": 1},
                   {"topic": "o", "partition": 0, "offset": 2}],
        "place_count": 2, "evidence": [read_101, first, again]}]
    assert result.anomalies["eos-missing"] == [
        {"type": "eos-missing", "group": G, "topic": "i", "partition": 1, "offset": o,
         "value": v, "committed_offset": 3, "evidence": [reader, skipping]}
        for o, v in ((1, 201), (2, 202))]
    assert result.stats["pipeline"] == {"transactions": 3}


def test_near_misses(run_checker):
    ops = Ops()
    # Aborted, then done again: the aborted output took offset 0.
    ops.send(1, "i", 2, 300, offsets=[0])
    ops.poll(2, ("i", 2, 0, 300))
    ops.txn(2, ("o", 2, 300 | B, None), offsets=(G, [("i", 2, 1)]), type="fail",
            error="ABORTED: by choice")
    ops.txn(2, ("o", 2, 300 | B, 1), offsets=(G, [("i", 2, 1)]))
    # An `info` transaction whose output was read: committed, and the same
    # place proven twice (an ok send and a read at one offset) is one place.
    ops.send(1, "i", 3, 400, 401, offsets=[0, 1])
    ops.poll(2, ("i", 3, 0, 400), ("i", 3, 1, 401))
    ops.txn(2, ("o", 3, 400 | B, None), offsets=(G, [("i", 3, 1)]), type="info",
            error="timed out")
    ops.txn(3, ("o", 3, 401 | B, 1), offsets=(G, [("i", 3, 2)]))
    ops.poll(9, ("o", 3, 0, 400 | B), ("o", 3, 1, 401 | B))
    # Read past the committed offset, not yet processed.
    ops.send(1, "i", 4, 500, 501, offsets=[0, 1])
    ops.poll(4, ("i", 4, 0, 500), ("i", 4, 1, 501))
    ops.txn(4, ("o", 4, 500 | B, 0), offsets=(G, [("i", 4, 1)]))
    # An aborted input read (aborted-read's to judge): no pipeline owes it.
    ops.txn(5, ("i", 5, 600, None), type="fail", error="ABORTED: by choice")
    ops.poll(9, ("i", 5, 0, 600))
    ops.send(1, "i", 5, 601, offsets=[2])
    ops.poll(4, ("i", 5, 2, 601))
    ops.txn(4, ("o", 5, 601 | B, 0), offsets=(G, [("i", 5, 3)]))

    result = run_checker(pipeline, ops)

    assert result.counts == {}, result.anomalies
    assert result.stats["pipeline"] == {"transactions": 6}
