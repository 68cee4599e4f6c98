"""Availability per fault (history_analysis/report/faults.py): the longest
stretch with no acknowledged send, during a fault and in the quiet time
after it."""

from __future__ import annotations

import numpy as np
import pytest

from history_analysis.faults import Fault
from history_analysis.report.faults import availability, longest_gap


def fault(f, start, end, nodes=("n1",)) -> Fault:
    return Fault(f, start, end, list(nodes), {"nodes": list(nodes)})


def test_longest_gap_counts_the_edges_of_the_window():
    times = np.array([1.0, 2.0, 6.0])
    assert longest_gap(times, 0.0, 10.0) == 4.0            # 2 → 6, and 6 → 10
    assert longest_gap(times, 1.5, 2.5) == 0.5
    assert longest_gap(np.zeros(0), 3.0, 5.0) == 2.0       # nothing at all: the whole window
    assert longest_gap(times, 5.0, 5.0) == 0.0


def test_the_time_after_a_fault_runs_to_the_next_fault_and_needs_no_fault_in_force():
    pause = fault("pause", 1.0, 3.0, ("n2", "n3"))
    kill = fault("kill", 2.5, 8.0)                         # outlasts the pause
    partition = fault("start-partition", 10.0, 20.0)       # ends with the main phase
    sends = np.array([0.5, 2.0, 4.0, 5.0, 9.5, 12.0])
    polls = np.array([0.5, 9.0])
    rows = {r.fault.f: r for r in availability([pause, kill, partition], sends, polls, 20.0)}
    assert rows["pause"].after is None and rows["pause"].send_after is None
    assert rows["pause"].send_during == pytest.approx(1.0)
    assert rows["kill"].after == (8.0, 10.0)
    assert rows["kill"].send_during == pytest.approx(3.0)          # 5.0 → 8.0
    assert rows["kill"].send_after == pytest.approx(1.5)           # 8.0 → 9.5
    assert rows["kill"].poll_after == pytest.approx(1.0)           # 9.0 → 10.0
    assert rows["start-partition"].after is None                   # the main phase ended
    assert rows["start-partition"].poll_during == pytest.approx(10.0)


def test_a_fault_that_was_never_applied_gets_no_row():
    failed = Fault("kill", 1.0, 2.0, ["n1"], {}, applied=False, error="no such process")
    assert availability([failed], np.zeros(0), np.zeros(0), 5.0) == []
