"""The kchaos command line, run as a user runs it: a subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from kchaos import __version__

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "queue-sample"


def kchaos(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kchaos", *args], capture_output=True,
                          text=True, timeout=timeout)


def copy_example(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("history.jsonl", "test.json"):
        shutil.copy(EXAMPLE / name, run / name)
    return run


def test_version():
    result = kchaos("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"kchaos {__version__}")


def test_every_option_has_help():
    for command in ("validate-history", "ingest"):
        result = kchaos(command, "--help")
        assert result.returncode == 0
        for line in result.stdout.splitlines():
            if line.strip().startswith("--"):
                assert len(line.split(None, 1)) == 2 or "KEY=VALUE" in line, line


def test_validate_history_of_the_example():
    result = kchaos("validate-history", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "valid history, 40 events, 20 completed operations" in result.stdout


def test_a_malformed_history_is_one_line_of_error_and_exit_3(tmp_path):
    run = copy_example(tmp_path)
    lines = (run / "history.jsonl").read_text().splitlines(keepends=True)
    event = json.loads(lines[6])
    event["value"]["sends"][0]["partition"] = "zero"
    lines[6] = json.dumps(event) + "\n"
    (run / "history.jsonl").write_text("".join(lines))
    for command in ("validate-history", "ingest"):
        result = kchaos(command, str(run))
        assert result.returncode == 3
        errors = [line for line in result.stderr.splitlines() if "kchaos:" in line]
        assert errors == [f"kchaos: error: {run}/history.jsonl:7: field "
                          "'value.sends[0].partition': expected a partition number "
                          "(0 to 2147483647), got 'zero'"]
        assert "Traceback" not in result.stderr


def test_missing_run_directory_and_bad_usage_exit_3(tmp_path):
    result = kchaos("validate-history", str(tmp_path / "nowhere"))
    assert result.returncode == 3
    assert "no history.jsonl in this run directory" in result.stderr
    assert kchaos("no-such-command").returncode == 3
    assert kchaos("ingest").returncode == 3


def test_bad_spark_conf_is_bad_input(tmp_path):
    result = kchaos("ingest", "--spark-conf", "novalue", str(copy_example(tmp_path)))
    assert result.returncode == 3
    assert "--spark-conf 'novalue': expected KEY=VALUE" in result.stderr


@pytest.mark.spark
def test_ingest_the_example(tmp_path):
    run = copy_example(tmp_path)
    result = kchaos("ingest", str(run), "--spark-master", "local[1]",
                    "--spark-conf", "spark.driver.memory=1g")
    assert result.returncode == 0, result.stderr
    assert "ingested 40 events → ops 20, sends 14, reads 20" in result.stdout
    manifest = json.loads((run / "history" / "_ingest.json").read_text())
    assert manifest["rows"]["end_offsets"] == 2
    assert (run / ".spark").is_dir()  # Spark's scratch space stays in the run directory
