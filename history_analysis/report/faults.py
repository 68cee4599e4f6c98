"""The faults of a run as intervals, and how available the system was
during each and after its heal.

The nemesis (process -1) records each fault's start and stop as an
invocation and a completion (docs/history.md). A fault is in force from
somewhere inside its start operation to somewhere inside its stop, so its
interval runs from the start's invocation to the stop's completion: the
shading errs on the side of too long. A fault with no stop (the run ended
first) lasts until the heal; a start that completed `fail` was never
applied and is listed, not shaded.

Availability is measured the way Redpanda's chaos harness reports "max
unavailability": the longest stretch with no `ok` send, and the longest
with no poll that returned records, inside each fault's interval and
inside the quiet time after it: from its end, when no other fault is still
in force, until the next fault starts or the main phase ends (none when
another fault outlasts it, or the main phase ended with it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

# A stop verb and the start verbs it ends (nemesis/process.py, net.py,
# disk/fault.py: `restart` ends both a kill and a lose-unsynced).
STOPS = {"stop-partition": ("start-partition",), "resume": ("pause",),
         "restart": ("kill", "lose-unsynced"), "unstall-disk": ("stall-disk",),
         "stop-disk-errors": ("disk-errors",), "stop-packet-loss": ("packet-loss",)}
STARTS = frozenset(start for starts in STOPS.values() for start in starts)


@dataclass
class Fault:
    f: str                      # the start verb
    start: float                # seconds since the run started
    end: float
    nodes: list[str]
    what: dict                  # the start's completion value (what was done)
    applied: bool = True        # False: the start completed `fail`
    error: str = ""
    stopped: bool = True        # False: no stop recorded, ended by the heal
    detail: dict = field(default_factory=dict)

    @property
    def label(self) -> str:
        kind = self.what.get("kind") or self.what.get("mode")
        name = f"{self.f} ({kind})" if kind and kind not in self.f else self.f
        return f"{name} {','.join(self.nodes)}" if self.nodes else name


def nodes_of(value: dict) -> list[str]:
    nodes = value.get("nodes")
    if isinstance(nodes, list):
        return sorted(str(n) for n in nodes)
    grudge = value.get("grudge")
    return sorted(str(n) for n in grudge) if isinstance(grudge, dict) else []


def faults_of(nemesis: list[dict], main_end: float) -> list[Fault]:
    """Intervals from the nemesis rows (dicts with f, type, invoke_time,
    time in seconds, value_json, error), in history order."""
    faults: list[Fault] = []
    open_: list[Fault] = []
    for row in nemesis:
        value = _value(row.get("value_json"))
        f, type_ = row["f"], row["type"]
        started = row["invoke_time"] if row["invoke_time"] is not None else row["time"]
        ended = row["time"] if row["time"] is not None else started
        if f in STARTS:
            fault = Fault(f, started, main_end, nodes_of(value), value, applied=type_ != "fail",
                          error=row.get("error") or "")
            faults.append(fault)
            if fault.applied:
                fault.stopped = False
                open_.append(fault)
        elif f in STOPS:
            candidates = [x for x in open_ if x.f in STOPS[f]]
            if not candidates:
                continue
            nodes = nodes_of(value)
            fault = next((x for x in candidates if x.nodes == nodes), candidates[0])
            fault.end, fault.stopped, fault.detail = max(ended, fault.start), True, value
            open_.remove(fault)
        elif f == "heal":
            for fault in open_:
                fault.end = max(ended, fault.start)
            open_ = []
    return faults


def _value(text) -> dict:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


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
