"""Checking a run directory: ingest when the tables are stale, run the
checker suite, write `results.json`.

Tables are re-ingested when stale (history_analysis.ingest.tables_are_stale).
A run directory with tables but no `history.jsonl` (written by another
tool) is checked as is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from checkers.history import History
from checkers.result import CheckOptions
from checkers.suite import SuiteResult, check_history, write_results
from history_analysis.run_dir import TEST_FILE
from kchaos.verdict import outcome_unknowns
from history_analysis.ingest import HISTORY_FILE, TABLES_DIR, IngestError, ingest, tables_are_stale


def prepare_run(run_dir: str | os.PathLike) -> Path:
    """What a check needs that needs no Spark: the run directory, its
    history, and tables no older than it (ingested here, which reads every
    line: a malformed history is found before any JVM starts). Raises
    IngestError or HistoryError."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise IngestError(f"{run_dir}: no such run directory")
    if not (run_dir / HISTORY_FILE).is_file() and not (run_dir / TABLES_DIR).is_dir():
        raise IngestError(f"{run_dir}: neither {HISTORY_FILE} nor {TABLES_DIR}/ is here; "
                          "a run directory holds the history a run wrote (docs/history.md)")
    if tables_are_stale(run_dir):
        ingest(run_dir)
    return run_dir


def recorded_options(run_dir: str | os.PathLike) -> CheckOptions:
    """How the run asked to be judged (test.json's config: `allow`,
    `max_examples`); the defaults for a run whose config cannot be read."""
    from kchaos.config import TestConfig
    try:
        config = json.loads((Path(run_dir) / TEST_FILE).read_text())["config"]
        return TestConfig.from_json(config).check_options()
    except (OSError, ValueError, KeyError, TypeError):
        return CheckOptions()


def check_run(spark, run_dir: str | os.PathLike,
              options: CheckOptions | None = None) -> SuiteResult:
    """The suite on run_dir, judged with `options`, by default as the run
    recorded (recorded_options): a re-check judges a run as its run did."""
    if options is None:
        options = recorded_options(run_dir)
    run_dir = prepare_run(run_dir)
    history = History.open(spark, run_dir / TABLES_DIR)
    try:
        suite = check_history(history, options)
    finally:
        history.release()
    # What the run itself reports (test.json), which the history cannot show.
    for key, entry in outcome_unknowns(run_dir).items():
        suite.result.unknown.setdefault(key, entry)
    suite.valid = suite.result.verdict(options.allowed)
    write_results(run_dir, suite)
    return suite
