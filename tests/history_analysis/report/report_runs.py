"""Run directories for the report's tests: hand-written histories with the
anomalies a report must explain (and a clean one), checked by the real
checker suite so that results.json is what `kchaos check` writes.

Operations are 20 ms apart, so the plots have a time axis to draw on.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

from tests.checkers.conftest import Ops

T = "t"
SCRIPT = "<script>window.pwned = 1; console.error('pwned')</script>"
STEP_NS = 20_000_000
# A record whose bytes do not decode as a value (docs/history.md: `raw`).
GARBAGE = {"topic": T, "partition": 0, "offset": 8, "value": None,
           "raw": base64.b64encode(b"\xff\xfe<b>").decode()}


# What `kchaos run` records of a run that went as planned: final reads to
# the ends, no death, a clean heal (kchaos/verdict.py reads it).
CLEAN_OUTCOME = {"final": {"reached": True}, "node_failures": [], "fault_effects": [],
                 "heal_problems": [], "nemesis_error": None, "precondition_unmet": None}


def write_run(run_dir: Path, ops: Ops, nodes=("n1", "n2", "n3"),
              outcome: dict | None = CLEAN_OUTCOME) -> Path:
    """run_dir with ops as its history and a test.json (without an outcome
    when outcome is None: a history from another tool)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "history.jsonl", "w") as out:
        for i, event in enumerate(ops.events):
            out.write(json.dumps({"index": i, "time": STEP_NS * i, **event}) + "\n")
    (run_dir / "test.json").write_text(json.dumps({
        "schema_version": 1, "name": "queue", "seed": 7, "nodes": list(nodes),
        "start_wall_time": "2026-11-25T10:00:00Z", "topics": {T: {"partitions": 2}},
        "config": {"workload": {"concurrency": 4}, "nemesis": ["pause", "partition"]},
        "sut": {"kind": "reference", "version": "0.1.0", "bugs": ["no-fsync"]},
        "kchaos_version": "0.1.0", "command_line": ["kchaos", "run", "--seed", "7"],
        "versions": {"python": "3.11"},
        **({} if outcome is None else {"outcome": outcome})}))
    return run_dir


def anomalous() -> Ops:
    """Lost write (2 at t-0 offset 1), duplicate (7 at offsets 6 and 7),
    unseen (20 acknowledged at t-1 offset 0, the end recorded as 0), a
    stale committed offset, a garbage read (bytes that do not decode), an
    error string with a script in it, and two faults."""
    o = Ops()
    o.send(0, T, 0, 1, offsets=[0]).send(1, T, 0, 2, offsets=[1])
    # Before any fault: a stale answer during one would be unknown
    # (checkers/group_offsets.py, a replaced coordinator's cache).
    o.commit(6, "g", T, 0, 5)
    o.committed(7, "g", T, 0, 3)
    o.op(-1, "pause", {"targets": "one"}, {"targets": "one", "nodes": ["n2"]}, type="info")
    o.send(0, T, 0, 3, 4, offsets=[2, 3]).send(1, T, 0, 5, 6, offsets=[4, 5])
    o.send(2, T, 1, 20, offsets=[0])
    o.send(1, T, 0, 99, type="info", error=f"KafkaError {SCRIPT}")
    o.op(-1, "resume", {"targets": "one"}, {"nodes": ["n2"]}, type="info")
    o.poll(5, (T, 0, 0, 1), (T, 0, 2, 3), (T, 0, 3, 4))
    o.op(-1, "start-partition", {"kind": "halves"},
         {"kind": "halves", "grudge": {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]},
          "nodes": ["n1", "n2", "n3"]}, type="info")
    o.send(0, T, 0, 7, offsets=[6])
    o.poll(5, (T, 0, 4, 5), (T, 0, 5, 6), (T, 0, 6, 7), (T, 0, 7, 7))
    o.op(5, "poll", {}, {"reads": [GARBAGE], "rebalances": []})
    o.op(-1, "stop-partition", {"kind": "halves"}, {"kind": "halves", "nodes": ["n1", "n2",
                                                                               "n3"]},
         type="info")
    o.op(-1, "heal", {}, {"problems": []}, type="info")
    o.end_offsets(1_000_000, (T, 0, 9), (T, 1, 0))
    o.assign(1_000_000, (T, 0), (T, 1), seek_to_beginning=True, phase="final")
    o.op(1_000_000, "poll", {}, {"reads": [
        {"topic": T, "partition": 0, "offset": 7, "value": 7}, GARBAGE], "rebalances": []},
         phase="final")
    return o


def clean() -> Ops:
    o = Ops()
    for i in range(20):
        o.send(i % 3, T, i % 2, 100 + i, offsets=[i // 2])
        o.poll(5, (T, i % 2, i // 2, 100 + i))
    o.end_offsets(1_000_000, (T, 0, 10), (T, 1, 10))
    o.assign(1_000_000, (T, 0), (T, 1), seek_to_beginning=True, phase="final")
    o.poll(1_000_000, (T, 0, 9, 118), (T, 1, 9, 119), phase="final")
    return o
