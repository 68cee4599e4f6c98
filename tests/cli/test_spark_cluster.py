"""The scale benchmark's generated history, small, judged exactly: in this
process on the test session's `local[2]` Spark in one bucket, and by
`kchaos check --spark-master` on a real Spark standalone cluster (a master
and two workers, Spark's own classes started with the `spark-class`
PySpark ships: benchmarks/spark_standalone.py) in about five buckets, a task
each. Both must find exactly the anomalies injected (one of each type),
through ingest of the JSONL, and agree with each other to the last field.
The held history (examples/queue-sample) is judged in both places too.
Not a timing test: the figures come from running the benchmark big (`make
bench`).

One history serves both checks: generating it took half a minute of a
loaded suite, and a `kchaos check` of a twin on `local[*]` another JVM."""

from __future__ import annotations

import json
import shutil

import pytest

from benchmarks import checker_scale, synthetic_history
from benchmarks.spark_standalone import StandaloneCluster
from checkers.result import CheckOptions
from history_analysis import buckets
from history_analysis.buckets import bucket_folders
from history_analysis.ingest import ingest, read_manifest
from kchaos.check import check_run
from tests.cli.test_cli import copy_example
from tests.cli_support import judged, kchaos

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def exactly_the_injected(result, run) -> None:
    table, extra = checker_scale.compare(result, run)
    assert [r for r in table if not r["expected"] == r["found"] == r["on_own_partitions"]] == []
    assert extra == []


def test_a_generated_history_is_judged_exactly_here_and_on_a_standalone_cluster(
        spark, tmp_path, monkeypatch):
    """With 50 pairs of partitions (a pair per 400 events instead of per
    3.125M), as a history past 10^8 events has more than 32."""
    here, there = tmp_path / "here", tmp_path / "cluster-run"
    with monkeypatch.context() as patched:
        patched.setattr(synthetic_history, "EVENTS_PER_PAIR", 400)
        layout = checker_scale.generate(spark, here, events=20_000, cases=1, seed=7, jsonl=True)
    assert layout.partitions == 100
    assert (here / "history.jsonl").is_file() and not (here / "history").exists()
    shutil.copytree(here, there)                 # not yet ingested
    held = copy_example(tmp_path)
    held_here = tmp_path / "held-here"
    shutil.copytree(held, held_here)
    check_run(spark, held_here, CheckOptions())

    suite = check_run(spark, here, CheckOptions())       # ingests the JSONL first
    assert read_manifest(here)["buckets"] == 1
    exactly_the_injected(suite.result, here)
    assert suite.result.errors == [] and suite.result.unknown == {}
    assert suite.valid is False and (here / "results.json").is_file()

    # A bucket per 4,000 events instead of a million: about five, each
    # holding many of the 119 partitions. (Twenty cost the suite half a
    # minute more: a cluster's time goes to its jobs, not their tasks.)
    with monkeypatch.context() as patched:
        patched.setattr(buckets, "EVENTS_PER_BUCKET", 4_000)
        assert ingest(there).buckets == len(bucket_folders(there / "history")) >= 3
    with StandaloneCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g") as cluster:
        on_cluster = kchaos("check", "--spark-master", cluster.url, str(there), str(held),
                            timeout=600)
        # The work ran in executors on both workers, not in the driver.
        apps = [list((tmp_path / "cluster" / f"worker-{i}").glob("app-*/*/stderr"))
                for i in (1, 2)]

    assert on_cluster.returncode == 1, on_cluster.stderr
    assert all(apps), apps
    assert judged(there) == judged(here)
    assert judged(held) == judged(held_here)
    assert json.loads((held / "results.json").read_text())["valid"] is True
    assert json.loads((there / "results.json").read_text())["valid"] is False
