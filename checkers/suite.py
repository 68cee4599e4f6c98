"""The checker suite: every family over one run's tables, verdicts merged.

A checker that throws does not crash the suite: its error is recorded and the
verdict becomes `unknown` (ANOMALIES.md: false > unknown > true).
`results.json` is written as ANOMALIES.md describes.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql import SparkSession

from checkers import (
    duplicates, group_offsets, lost, poll_order, send_order, stats, version_order,
)
from checkers.history import History
from checkers.result import CheckOptions, CheckResult, Verdict

FAMILIES = (
    ("version-order", version_order.check),
    ("duplicates", duplicates.check),
    ("lost", lost.check),
    ("send-order", send_order.check),
    ("poll-order", poll_order.check),
    ("group-offsets", group_offsets.check),
    ("stats", stats.check),
)

RESULTS_FILE = "results.json"


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


def check_history(spark: SparkSession, history: History, options: CheckOptions) -> SuiteResult:
    total = CheckResult()
    seconds: dict[str, float] = {}
    for name, check in FAMILIES:
        start = time.perf_counter()
        try:
            result = check(spark, history, options)
        except Exception as e:  # noqa: BLE001 — a checker's failure is a verdict of unknown
            message = str(e).strip().splitlines()[0] if str(e).strip() else ""
            result = CheckResult(errors=[{"checker": name,
                                          "error": f"{type(e).__name__}: {message}"}])
        # A family's time includes the shared frames it is first to build.
        seconds[name] = round(time.perf_counter() - start, 2)
        total.merge(result, options.max_examples)
    total.stats["seconds_by_family"] = seconds
    return SuiteResult(total.verdict(options.allowed), total, options)


def write_results(run_dir: str | os.PathLike, suite: SuiteResult) -> Path:
    path = Path(run_dir) / RESULTS_FILE
    scratch = path.with_suffix(".json.tmp")
    scratch.write_text(json.dumps(suite.to_json(), indent=2, default=str) + "\n")
    scratch.replace(path)
    return path
