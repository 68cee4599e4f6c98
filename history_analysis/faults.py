"""The faults of a run as intervals, read from the nemesis's operations
(process -1, docs/history.md): each fault's start and stop are an
invocation and a completion, and a fault is in force from somewhere inside
its start operation to somewhere inside its stop, so its interval runs
from the start's invocation to the stop's completion, erring on the side
of too long. A fault with no stop (the run ended first) lasts until the
heal; a start that completed `fail` was never applied.

Used by the report (shading, availability) and by the checkers (which
answers may come from a broker cut off from the controller).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

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
