"""What a report reads from a run directory: `test.json` (the config and the
run's outcome), `results.json` (the verdict; absent when the run was never
checked) and the history's tables, ingested first when they are missing or
older than `history.jsonl` (Arrow only, no Spark).

Only the columns the report draws are read; times become seconds since the
run started.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history_analysis.ingest import ingest, tables_are_stale
from history_analysis.faults import Fault, faults_of
from history_analysis.run_dir import HISTORY_FILE, RESULTS_FILE, TABLES_DIR, TEST_FILE

_ENVELOPE = ["op_index", "invoke_index", "invoke_time", "time", "process", "type", "phase"]
COLUMNS = {
    "ops": [*_ENVELOPE, "f", "error"],
    "sends": ["op_index", "time", "process", "type", "topic", "partition", "value", "offset"],
    "reads": ["op_index", "time", "process", "type", "phase", "topic", "partition", "offset",
              "value"],
    "nemesis": ["op_index", "invoke_time", "time", "type", "f", "value_json"],
    "assignments": ["op_index", "process", "kind", "topic", "partition"],
}


def _json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None


@dataclass
class RunData:
    run_dir: Path
    test: dict
    results: dict | None
    ops: pa.Table
    sends: pa.Table
    reads: pa.Table
    assignments: pa.Table
    faults: list[Fault]
    main_end: float                 # seconds: when the main phase ended
    nemesis_errors: list[str]       # errors of nemesis operations that failed

    @classmethod
    def load(cls, run_dir: Path) -> "RunData":
        run_dir = Path(run_dir)
        if (run_dir / HISTORY_FILE).is_file() and tables_are_stale(run_dir):
            ingest(run_dir)
        tables = {name: _seconds(pq.read_table(run_dir / TABLES_DIR / name, columns=columns))
                  for name, columns in COLUMNS.items()}
        ops = tables["ops"]
        main_end = _main_end(ops)
        nemesis = tables["nemesis"]
        errors = [f"{r['f']}: {r['error'] or ''}".strip() for r in
                  ops.filter(pc.and_(pc.equal(ops["process"], -1),
                                     pc.equal(ops["type"], "fail"))).to_pylist()]
        faults = faults_of(_with_errors(nemesis, ops).to_pylist(), main_end)
        return cls(run_dir, _json(run_dir / TEST_FILE) or {}, _json(run_dir / RESULTS_FILE),
                   ops, tables["sends"], tables["reads"], tables["assignments"], faults, main_end, errors)

    @property
    def seconds(self) -> float:
        times = self.ops["time"]
        return float(pc.max(times).as_py() or 0.0) if len(times) else 0.0

    def times(self, f: tuple[str, ...], type_: str = "ok", phase: str = "main") -> np.ndarray:
        """Sorted completion times (s) of operations f with that outcome."""
        ops = self.ops
        mask = pc.and_(pc.is_in(ops["f"], pa.array(f)), pc.equal(ops["type"], type_))
        mask = pc.and_(mask, pc.equal(ops["phase"], phase))
        return np.sort(_array(ops.filter(mask)["time"]))

    def polls_with_records(self) -> np.ndarray:
        reads = self.reads.filter(pc.and_(pc.equal(self.reads["type"], "ok"),
                                          pc.equal(self.reads["phase"], "main")))
        ok = pc.unique(reads["op_index"])
        ops = self.ops.filter(pc.is_in(self.ops["op_index"], ok))
        return np.sort(_array(ops["time"]))


def _array(column) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False).astype(float) if len(column) else np.zeros(0)


def _seconds(table: pa.Table) -> pa.Table:
    for name in ("time", "invoke_time"):
        if name in table.column_names:
            seconds = pc.divide(pc.cast(table[name], pa.float64()), 1e9)
            table = table.set_column(table.column_names.index(name), name, seconds)
    return table


def _main_end(ops: pa.Table) -> float:
    """The first final-phase invocation or heal; else the last completion."""
    final = ops.filter(pc.or_(pc.equal(ops["phase"], "final"),
                              pc.and_(pc.equal(ops["process"], -1), pc.equal(ops["f"], "heal"))))
    if len(final):
        return float(pc.min(final["invoke_time"]).as_py())
    return float(pc.max(ops["time"]).as_py() or 0.0) if len(ops) else 0.0


def _with_errors(nemesis: pa.Table, ops: pa.Table) -> pa.Table:
    """The nemesis rows with each operation's error (from ops)."""
    errors = ops.filter(pc.equal(ops["process"], -1)).select(["op_index", "error"])
    return nemesis.join(errors, "op_index", join_type="left outer").sort_by("op_index")
