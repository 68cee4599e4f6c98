"""The scale benchmark's generated history, small: the suite must find
exactly the anomalies injected (one of each type), through ingest of the
JSONL too. Not a timing test: the figures come from running it big
(`make bench` runs the script itself). In this process, with the test
session's Spark: the script in a process of its own started a JVM of its
own and took 94 s of a loaded suite."""

from __future__ import annotations

import pytest

from benchmarks import checker_scale
from checkers.result import CheckOptions
from kchaos.check import check_run

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_generated_history_shows_exactly_the_injected_anomalies(spark, tmp_path):
    out = tmp_path / "run"
    checker_scale.generate(spark, out, events=20_000, cases=1, seed=7, jsonl=True)
    assert (out / "history.jsonl").is_file() and not (out / "history").exists()
    suite = check_run(spark, out, CheckOptions())       # ingests the JSONL first
    table, extra = checker_scale.compare(suite.result, cases=1)
    assert [r for r in table if not r["expected"] == r["found"] == r["on_own_partitions"]] == []
    assert extra == [] and suite.result.errors == [] and suite.result.unknown == {}
    assert suite.valid is False and (out / "results.json").is_file()
