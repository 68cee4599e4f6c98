"""The checker suite: every family over one run's tables, verdicts merged.

A checker that throws does not crash the suite: its error is recorded and the
verdict becomes `unknown` (docs/anomalies.md: false > unknown > true).
`results.json` is written as docs/checking.md describes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from checkers import coverage, pipeline, transactions
from checkers.collected import Family
from checkers.colocated import PER_PARTITION, collect
from checkers.history import History
from checkers.result import CheckOptions, CheckResult, Verdict
from history_analysis.run_dir import RESULTS_FILE

# Every family, in the order they run (and `seconds_by_family` lists them).
FAMILIES: tuple[Family, ...] = (*PER_PARTITION, transactions, pipeline, coverage)


@dataclass
class SuiteResult:
    valid: Verdict
    result: CheckResult
    options: CheckOptions

    def to_json(self) -> dict:
        r = self.result
        return {
            "valid": self.valid,
            "anomaly_types": sorted(r.counts),
            "allowed_types": sorted(self.options.allowed),
            "invalid_types": sorted(t for t in r.counts if t not in self.options.allowed),
            "counts": dict(sorted(r.counts.items())),
            "anomalies": dict(sorted(r.anomalies.items())),
            "unknown": r.unknown,
            "errors": r.errors,
            "stats": r.stats,
        }


def check_family(history: History, family: Family, options: CheckOptions) -> CheckResult:
    """One family's result: its check of what the co-located pass found
    (checkers/colocated.py; one pass for every family, built by the first
    to ask) and of the history's summary."""
    return family.check(collect(history, options.max_examples), history.summary())


def check_history(history: History, options: CheckOptions) -> SuiteResult:
    total = CheckResult()
    seconds: dict[str, float] = {}
    for family in FAMILIES:
        start = time.perf_counter()
        try:
            result = check_family(history, family, options)
        except Exception as e:  # noqa: BLE001 — a checker's failure is a verdict of unknown
            message = str(e).strip().splitlines()[0] if str(e).strip() else ""
            result = CheckResult(errors=[{"checker": family.FAMILY,
                                          "error": f"{type(e).__name__}: {message}"}])
        # A family's time includes the shared frames it is first to build.
        seconds[family.FAMILY] = round(time.perf_counter() - start, 2)
        total.merge(result, options.max_examples)
    total.stats["seconds_by_family"] = seconds
    return SuiteResult(total.verdict(options.allowed), total, options)


def write_results(run_dir: str | os.PathLike, suite: SuiteResult) -> Path:
    path = Path(run_dir) / RESULTS_FILE
    scratch = path.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(suite.to_json(), indent=2, default=str) + "\n")
    scratch.replace(path)
    return path


def _warm_up_events() -> list[dict]:
    """A tiny history that takes every path of the suite a clean run takes."""
    from history_analysis.history import schema as s

    def partitions(*ps):
        return [s.TOPIC_PARTITION(topic="warm-up", partition=p) for p in ps]

    ops = [
        (0, "send", s.invocation("send", sends=[s.SEND_ASKED(topic="warm-up", partition=0,
                                                            value=1)]),
         s.completion("send", sends=[s.SEND_DONE(topic="warm-up", partition=0, value=1,
                                                 offset=0)]), "main"),
        (1, "subscribe", s.invocation("subscribe", group="g", topics=["warm-up"]), None, "main"),
        (1, "poll", s.invocation("poll"), s.completion(
            "poll", reads=[s.READ(topic="warm-up", partition=0, offset=0, value=1)],
            rebalances=[s.REBALANCE(kind="assigned", group="g", partitions=partitions(0))]),
         "main"),
        (1, "commit", s.invocation("commit", group="g", offsets=[s.OFFSET_AT(
            topic="warm-up", partition=0, offset=1)]), None, "main"),
        (1, "committed", s.invocation("committed", group="g", partitions=partitions(0)),
         s.completion("committed", group="g", offsets=[s.OFFSET_FOUND(
             topic="warm-up", partition=0, offset=1)]), "main"),
        (2, "end-offsets", s.invocation("end-offsets", partitions=partitions(0)),
         s.completion("end-offsets", offsets=[s.OFFSET_AT(topic="warm-up", partition=0,
                                                          offset=1)]), "final"),
        (2, "assign", s.invocation("assign", partitions=partitions(0), seek_to_beginning=True),
         None, "final"),
        (2, "poll", s.invocation("poll"), s.completion(
            "poll", reads=[s.READ(topic="warm-up", partition=0, offset=0, value=1)]), "final"),
    ]
    events = []
    for process, f, asked, done, phase in ops:
        for type_, value in (("invoke", asked), ("ok", asked if done is None else done)):
            events.append({"index": len(events), "time": 10 * len(events), "process": process,
                           "type": type_, "f": f, "value": value, "phase": phase})
    return events


def warm_up(spark: SparkSession) -> None:
    """Check a tiny history once, so that Spark's generated code and Python
    workers are ready for the run's own (kchaos/session.py)."""
    from history_analysis.ingest import tables_from_events
    history = History.from_arrow(spark, tables_from_events(_warm_up_events()))
    try:
        check_history(history, CheckOptions())
    finally:
        history.release()
