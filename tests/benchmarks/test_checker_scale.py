"""The scale benchmark's generated history, small: the suite must find
exactly the anomalies injected (one of each type), through ingest of the
JSONL too. Not a timing test: the figures come from running it big
(`make bench` runs the script itself). In this process, with the test
session's Spark: the script in a process of its own started a JVM of its
own and took 94 s of a loaded suite."""

from __future__ import annotations

import pytest

from benchmarks import checker_scale, synthetic_history
from history_analysis import buckets
from history_analysis.buckets import bucket_folders
from history_analysis.ingest import read_manifest
from checkers.result import CheckOptions
from kchaos.check import check_run

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_generated_history_shows_exactly_the_injected_anomalies(spark, tmp_path,
                                                                   monkeypatch):
    """In about 20 buckets (a bucket per 1,000 events instead of a
    million), so that buckets hold several of the 119 partitions (that the
    results are those of one bucket, tests/cli/test_spark_cluster.py
    shows); with 50 pairs of partitions (a pair per 400 events instead of
    per 3.125M), as a history past 10^8 events has more than 32 (the
    cluster test's keeps 32)."""
    out = tmp_path / "run"
    with monkeypatch.context() as patched:
        patched.setattr(synthetic_history, "EVENTS_PER_PAIR", 400)
        layout = checker_scale.generate(spark, out, events=20_000, cases=1, seed=7, jsonl=True)
    assert layout.partitions == 100
    assert (out / "history.jsonl").is_file() and not (out / "history").exists()
    with monkeypatch.context() as patched:
        patched.setattr(buckets, "EVENTS_PER_BUCKET", 1_000)
        suite = check_run(spark, out, CheckOptions())       # ingests the JSONL first
    assert read_manifest(out)["buckets"] == len(bucket_folders(out / "history")) > 15
    table, extra = checker_scale.compare(suite.result, out)
    assert [r for r in table if not r["expected"] == r["found"] == r["on_own_partitions"]] == []
    assert extra == [] and suite.result.errors == [] and suite.result.unknown == {}
    assert suite.valid is False and (out / "results.json").is_file()
