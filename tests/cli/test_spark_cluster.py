"""`kchaos check --spark-master` on a real Spark standalone cluster: a
master and two workers, Spark's own classes started with the `spark-class`
PySpark ships (benchmarks/spark_standalone.py), each a JVM of its own. The
held history (examples/queue-sample) and a generated one with every
anomaly type injected, its tables in many buckets, are judged there
exactly as `local[*]` judges them."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pytest

from benchmarks import checker_scale
from benchmarks.spark_standalone import StandaloneCluster
from history_analysis import buckets
from history_analysis.ingest import ingest
from tests.cli.test_cli import copy_example
from tests.cli_support import judged, kchaos, kchaos_here

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def test_a_standalone_cluster_judges_as_local_does(spark, tmp_path, monkeypatch):
    held = copy_example(tmp_path)
    generated = tmp_path / "generated"
    checker_scale.generate(spark, generated, events=10_000, cases=1, seed=7, jsonl=True)
    runs = [held, generated]
    local = []
    for run in runs:          # the same inputs, not yet ingested, for local[*]
        local.append(tmp_path / "local" / run.name)
        shutil.copytree(run, local[-1])
    # On the cluster, the generated history in about 10 buckets (a bucket
    # per 1,000 events) of its 81 partitions, each a task (the local twin
    # gets the one bucket a history this small gets).
    with monkeypatch.context() as patched:
        patched.setattr(buckets, "EVENTS_PER_BUCKET", 1_000)
        assert ingest(generated).buckets > 7

    on_local = kchaos_here("check", *map(str, local))
    with StandaloneCluster(tmp_path / "cluster", workers=2, cores=1, memory="1g") as cluster:
        on_cluster = kchaos("check", "--spark-master", cluster.url, *map(str, runs),
                            timeout=600)
        # The work ran in executors on both workers, not in the driver.
        apps = [list((tmp_path / "cluster" / f"worker-{i}").glob("app-*/*/stderr"))
                for i in (1, 2)]

    assert on_cluster.returncode == on_local.returncode == 1, on_cluster.stderr
    assert all(apps), apps
    for run, twin in zip(runs, local):
        assert judged(run) == judged(twin)
    assert json.loads((held / "results.json").read_text())["valid"] is True
    found = SimpleNamespace(**json.loads((generated / "results.json").read_text()))
    table, extra = checker_scale.compare(found, generated)
    assert [r for r in table if not r["expected"] == r["found"] == r["on_own_partitions"]] == []
    assert extra == []

