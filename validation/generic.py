"""Detection power as users get it: `kchaos validate --generic` runs the
generic nemesis (every fault kind on a seeded schedule, no recipe, none of
the recipes' own faults) with each bug switch on, N seeds of T seconds, and
the same on the correct broker to count false alarms.

Each profile (PROFILES) is a table of its own: Kafka's defaults, or the
stress settings that let a 90-s run's faults cross timeouts and buffers;
with the fault kinds its table was measured with.
The full table is hours of runs on two cores, so it is kept as cells: each
finished (profile, switch, seed, time limit) run appends one line to
`STORE/validate-generic/cells.jsonl`, and a rerun skips the cells that are
there. The table is built from the cells alone, so it can be filled over
several sittings and printed at any point.
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from cluster.addressing import DEFAULT_SUBNET
from history_analysis.run_dir import RESULTS_FILE, TABLES_DIR
from kchaos.config import TestConfig
from kchaos.progress import Progress
from kchaos.run import run_and_check
from validation.figures import commit
from validation.profiles import DEFAULT_PROFILE, PROFILES, every_fault_config

CORRECT = "none"            # the row of the correct broker (no switch)
SEEDS, TIME_LIMIT, CLEAN_SEEDS = 5, 90.0, 10
CELLS_DIR, CELLS_FILE = "validate-generic", "cells.jsonl"


@dataclass
class Cell:
    switch: str                 # a bug switch, or CORRECT
    seed: int
    time_limit: float
    valid: bool | str
    counts: dict[str, int] = field(default_factory=dict)
    first_detection: float | None = None    # s into the run: the earliest anomaly's evidence
    run_dir: str = ""
    seconds: float = 0.0        # the whole run, checks included
    commit: str = ""
    profile: str = DEFAULT_PROFILE      # cells written before profiles were kafka-defaults'
    checked: str = ""           # the commit whose checkers judged it again (recheck), if any

    @property
    def key(self) -> tuple[str, str, int, float]:
        return self.profile, self.switch, self.seed, self.time_limit


def generic_config(switch: str, *, seed: int, time_limit: float, store: Path,
                   subnet: str = DEFAULT_SUBNET,
                   profile: str = DEFAULT_PROFILE) -> TestConfig:
    """A run as a user would write it (validation/profiles.py's
    every-fault run, with the profile's settings); the switch is the only
    difference between the rows of a profile."""
    return every_fault_config(name=f"generic-{switch}", seed=seed, store=store, subnet=subnet,
                              time_limit=time_limit, final_time_limit=60,
                              bugs=[] if switch == CORRECT else [switch],
                              **PROFILES[profile]())


def cells_path(store: Path, cells_dir: str = CELLS_DIR) -> Path:
    return store / cells_dir / CELLS_FILE


def read_cells(store: Path, cells_dir: str = CELLS_DIR) -> list[Cell]:
    """The finished cells (a last line cut by a crash is skipped)."""
    path = cells_path(store, cells_dir)
    if not path.is_file():
        return []
    cells = []
    for line in path.read_text().splitlines():
        try:
            cells.append(Cell(**json.loads(line)))
        except (ValueError, TypeError):
            continue
    return cells


def fill(switches: list[str], spark, store: Path, *, seeds: int = SEEDS,
         clean_seeds: int = CLEAN_SEEDS, time_limit: float = TIME_LIMIT,
         subnet: str = DEFAULT_SUBNET, profile: str = DEFAULT_PROFILE,
         progress: Progress | None = None,
         on_cell=lambda cell, skipped: None) -> list[Cell]:
    """Run every (switch, seed) cell of the profile not in the store yet,
    appending each as it finishes; CORRECT among `switches` gets
    `clean_seeds` seeds."""
    plan = [(switch, seed, time_limit) for switch in switches
            for seed in range(1, (clean_seeds if switch == CORRECT else seeds) + 1)]

    def configure(switch: str, seed: int, time_limit: float) -> TestConfig:
        return generic_config(switch, seed=seed, time_limit=time_limit,
                              store=store / CELLS_DIR, subnet=subnet, profile=profile)
    return run_cells(plan, configure, spark, store, profile=profile, progress=progress,
                     on_cell=on_cell)


def run_cells(plan: list[tuple[str, int, float]], configure, spark, store: Path, *,
              profile: str, cells_dir: str = CELLS_DIR, progress: Progress | None = None,
              on_cell=lambda cell, skipped: None) -> list[Cell]:
    """Run each (row, seed, time limit) of `plan` whose cell is not in the
    store's `cells_dir` yet, configured by configure(row, seed, time_limit);
    each cell is appended as its run finishes. Every cell of the store."""
    done = {c.key for c in read_cells(store, cells_dir)}
    path = cells_path(store, cells_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    for switch, seed, time_limit in plan:
        if (profile, switch, seed, time_limit) in done:
            on_cell(None, (switch, seed))
            continue
        started = time.monotonic()
        result = run_and_check(configure(switch, seed, time_limit), spark,
                               progress=progress or Progress.quiet())
        cell = Cell(switch, seed, time_limit, run_dir=str(result.run_dir),
                    seconds=round(time.monotonic() - started, 1), commit=commit(),
                    profile=profile, **_verdict(result.valid, result.counts, result.run_dir))
        with open(path, "a") as out:
            out.write(json.dumps(asdict(cell)) + "\n")
        on_cell(cell, None)
    return read_cells(store, cells_dir)


def recheck(spark, store: Path, *, profile: str = DEFAULT_PROFILE,
            time_limit: float = TIME_LIMIT, on_cell=lambda cell: None) -> list[Cell]:
    """Judge the profile's finished cells again with this commit's checkers:
    a run's history is the evidence, so a checker fixed since the run
    changes the verdict, not the run. Each rejudged cell names the commit
    that judged it (`checked`); the cells file is replaced whole."""
    from history_analysis.report import write_report_quietly
    from kchaos.check import check_run
    judged_by, cells = commit(), []
    for cell in read_cells(store):
        if (cell.profile, cell.time_limit) == (profile, time_limit) and cell.run_dir:
            suite = check_run(spark, cell.run_dir)      # as the run recorded it
            cell = dataclasses.replace(cell, checked=judged_by, **_verdict(
                suite.valid, suite.result.counts, Path(cell.run_dir)))
            write_report_quietly(Path(cell.run_dir))      # the report shows the new verdict
            on_cell(cell)
        cells.append(cell)
    path = cells_path(store)
    with open(path.with_suffix(".tmp"), "w") as out:
        out.writelines(json.dumps(asdict(c)) + "\n" for c in cells)
    os.replace(path.with_suffix(".tmp"), path)
    return cells


def _verdict(valid: bool | str, counts: dict[str, int], run_dir: Path) -> dict:
    """A cell's fields that its run's check decides."""
    return dict(valid=valid, counts={t: n for t, n in sorted(counts.items()) if n},
                first_detection=detection_time(run_dir))


def detection_time(run_dir: Path) -> float | None:
    """Seconds into the run at which the first anomaly that is not allowed
    had all its evidence: the earliest, over its cases, of the latest
    evidence operation's time (None: no anomaly)."""
    results = json.loads((Path(run_dir) / RESULTS_FILE).read_text())
    allowed = set(results.get("allowed_types") or [])
    evidence = [case.get("evidence") or [] for type_, cases in
                (results.get("anomalies") or {}).items() if type_ not in allowed
                for case in cases]
    evidence = [e for e in evidence if e]
    if not evidence:
        return None
    ops = pq.read_table(Path(run_dir) / TABLES_DIR / "ops",
                        columns=["op_index", "invoke_index", "time", "invoke_time"])
    wanted = sorted({i for e in evidence for i in e})
    times: dict[int, float] = {}
    for index, time_ in (("op_index", "time"), ("invoke_index", "invoke_time")):
        hit = ops.filter(pc.is_in(ops[index], value_set=pa.array(
            wanted, ops.schema.field(index).type)))
        for i, t in zip(hit[index].to_pylist(), hit[time_].to_pylist()):
            if t is not None:
                times[i] = t / 1e9
    ends = [max(times[i] for i in e if i in times) for e in evidence
            if any(i in times for i in e)]
    return round(min(ends), 1) if ends else None


@dataclass
class GenericRow:
    switch: str
    runs: int
    detected: int               # runs with an anomaly that is not allowed (CORRECT: false alarms)
    unknown: int
    median_detection: float | None
    types: dict[str, int]       # anomaly type → runs it was found in


def rows(cells: list[Cell], switches: list[str]) -> list[GenericRow]:
    out = []
    for switch in switches:
        mine = [c for c in cells if c.switch == switch]
        found = [c for c in mine if c.valid is False]
        types: dict[str, int] = {}
        for c in found:
            for t in c.counts:
                types[t] = types.get(t, 0) + 1
        times = [c.first_detection for c in found if c.first_detection is not None]
        out.append(GenericRow(switch, len(mine), len(found),
                              sum(1 for c in mine if c.valid == "unknown"),
                              statistics.median(times) if times else None, types))
    return out


def format_generic(table: list[GenericRow], time_limits: set[float]) -> str:
    limits = ", ".join(f"{t:g} s" for t in sorted(time_limits)) or "—"
    lines = [f"| switch | runs ({limits}) | detected | median time to first detection | "
             "anomaly types found (runs) | unknown |", "|---|---|---|---|---|---|"]
    for r in table:
        label = "correct broker (false alarms)" if r.switch == CORRECT else f"`{r.switch}`"
        rate = f"{r.detected}/{r.runs}" if r.runs else "not run"
        median = "—" if r.median_detection is None else f"{r.median_detection:.0f} s"
        types = ", ".join(f"{t} ({n})" for t, n in sorted(r.types.items())) or "—"
        lines.append(f"| {label} | {r.runs} | {rate} | {median} | {types} | {r.unknown} |")
    return "\n".join(lines)
