"""How available the system was during each fault (its interval:
history_analysis/faults.py) and after its heal. A fault whose start
completed `fail` was never applied and is listed, not shaded.

Availability is measured the way Redpanda's chaos harness reports "max
unavailability": the longest stretch with no `ok` send, and the longest
with no poll that returned records, inside each fault's interval and
inside the quiet time after it: from its end, when no other fault is still
in force, until the next fault starts or the main phase ends (none when
another fault outlasts it, or the main phase ended with it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from history_analysis.faults import Fault

QUIET_MIN = 0.01     # s: a shorter quiet time is the clock's noise, not a window


def longest_gap(times: np.ndarray, start: float, end: float) -> float:
    """The longest stretch of [start, end] that holds none of `times`
    (sorted, seconds)."""
    if end <= start:
        return 0.0
    lo, hi = np.searchsorted(times, [start, end], side="left")
    points = np.concatenate([[start], times[lo:hi], [end]])
    return float(np.max(np.diff(points)))


@dataclass
class Availability:
    fault: Fault
    send_during: float
    poll_during: float
    after: tuple[float, float] | None       # (start, end) of the quiet time after
    send_after: float | None
    poll_after: float | None


def availability(faults: list[Fault], ok_sends: np.ndarray, polls_with_records: np.ndarray,
                 main_end: float) -> list[Availability]:
    """One row per applied fault (the module's docstring says what "after"
    covers)."""
    applied = [f for f in faults if f.applied]
    starts = np.array(sorted(f.start for f in applied))
    rows = []
    for fault in applied:
        later = starts[starts >= fault.end]
        until = min(float(later[0]) if len(later) else main_end, main_end)
        outlasted = any(g is not fault and g.start <= fault.end < g.end for g in applied)
        after = (fault.end, until) if until - fault.end >= QUIET_MIN and not outlasted \
            else None
        rows.append(Availability(
            fault, longest_gap(ok_sends, fault.start, fault.end),
            longest_gap(polls_with_records, fault.start, fault.end), after,
            longest_gap(ok_sends, *after) if after else None,
            longest_gap(polls_with_records, *after) if after else None))
    return rows
