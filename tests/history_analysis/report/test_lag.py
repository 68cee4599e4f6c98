"""Realtime lag (history_analysis/report/lag.py) on hand-written histories:
a consumer that falls behind, catches up, and loses its partition; a group
member whose position is not known yet. No Spark: the report ingests with
Arrow."""

from __future__ import annotations

import json

import numpy as np
import pytest

from history_analysis.report.lag import lag
from history_analysis.report.plots import peaks
from history_analysis.report.run_data import RunData
from tests.checkers.conftest import Ops
from tests.history_analysis.report.report_runs import STEP_NS, T, write_run

REVOKE_T1 = [{"kind": "revoked", "group": "g", "partitions": [{"topic": T, "partition": 1}]}]
ASSIGN_T1 = [{"kind": "assigned", "group": "g", "partitions": [{"topic": T, "partition": 1}]}]


def times(run_dir, predicate) -> list[float]:
    """Completion times (s) of the events the predicate picks."""
    events = [json.loads(line) for line in (run_dir / "history.jsonl").open()]
    return [e["time"] / 1e9 for e in events if e["type"] != "invoke" and predicate(e)]


def test_lag_grows_while_a_consumer_polls_nothing_and_drops_when_it_catches_up(tmp_path):
    o = Ops()
    o.assign(3, (T, 0))
    o.send(0, T, 0, 1, offsets=[0])
    o.poll(3, (T, 0, 0, 1))                         # caught up
    o.send(0, T, 0, 2, offsets=[1])
    o.poll(3)                                       # behind: 2 waits
    o.poll(3)                                       # further behind
    o.poll(3, (T, 0, 1, 2))                         # caught up again
    o.assign(3, (T, 1))                             # t-0 taken away: no longer counted
    o.send(0, T, 0, 3, offsets=[2])
    o.poll(3)                                       # t-1's position unknown: not counted
    run = write_run(tmp_path / "run", o)
    lines = lag(RunData.load(run), None)
    assert list(lines) == ["process 3"]
    at, lags = lines["process 3"]
    polls = times(run, lambda e: e["f"] == "poll")
    acked_2 = times(run, lambda e: e["f"] == "send" and e["value"]["sends"][0]["value"] == 2)[0]
    assert list(at) == pytest.approx(polls[:4])
    assert list(lags) == pytest.approx([0.0, polls[1] - acked_2, polls[2] - acked_2, 0.0])
    assert polls[2] - acked_2 > polls[1] - acked_2 > 0


def test_a_group_member_counts_from_its_first_read_until_its_partition_is_revoked(tmp_path):
    o = Ops()
    o.subscribe(4, "g", T)
    o.send(0, T, 1, 10, 11, offsets=[5, 6])
    o.poll(4, rebalances=ASSIGN_T1)                 # holds t-1, position unknown
    o.poll(4, (T, 1, 5, 10))                        # position 5; 11 waits
    o.poll(4, rebalances=REVOKE_T1)                 # revoked: not counted
    run = write_run(tmp_path / "run", o)
    at, lags = lag(RunData.load(run), None)["process 4"]
    polls = times(run, lambda e: e["f"] == "poll")
    acked_11 = times(run, lambda e: e["f"] == "send")[0]
    assert list(at) == pytest.approx([polls[1]])
    assert list(lags) == pytest.approx([polls[1] - acked_11])
    assert STEP_NS / 1e9 <= lags[0]


def test_workers_fold_their_processes_together(tmp_path):
    o = Ops()
    for process in (1, 7):                          # worker 1 as process 1, then 7
        o.assign(process, (T, 0))
        o.send(0, T, 0, process, offsets=[process])
        o.poll(process, (T, 0, process, process))
    assert list(lag(RunData.load(write_run(tmp_path / "run", o)), 6)) == ["worker 1"]


def test_a_thinned_lag_line_keeps_its_peaks():
    times = np.arange(10_000, dtype=float)
    values = np.zeros(10_000)
    values[[17, 4_321, 9_999]] = [5.0, 7.0, 3.0]
    at, highest = peaks(times, values, 100)
    assert len(at) == len(highest) == 100
    assert {(t, v) for t, v in zip(at, highest) if v} == {(17.0, 5.0), (4_321.0, 7.0),
                                                          (9_999.0, 3.0)}
    short = peaks(times[:50], values[:50], 100)        # fewer points than bins: all of them
    assert list(short[0]) == list(times[:50]) and list(short[1]) == list(values[:50])
