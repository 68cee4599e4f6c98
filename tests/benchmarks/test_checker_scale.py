"""The scale benchmark's generated history, small: the suite must find
exactly the anomalies injected (one of each type), through ingest of the
JSONL too. Not a timing test: the figures come from running it big."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "checker_scale.py"


def test_a_generated_history_shows_exactly_the_injected_anomalies(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--events", "20000", "--anomalies", "1", "--seed", "7",
         "--jsonl", "--out", str(tmp_path / "run"), "--spark-conf", "spark.driver.memory=2g",
         "spark.sql.shuffle.partitions=4"],
        capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "EXACT: found exactly the injected anomalies" in result.stdout
    assert (tmp_path / "run" / "results.json").is_file()
