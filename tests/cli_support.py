"""The kchaos command line as tests run it: in a process of its own, as a
user runs it, or in this one (`kchaos_here`), where the test session's
Spark session stands in for the JVM each subprocess would start (half a
minute on two cores)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cli.main import cli


def kchaos(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def kchaos_here(*args: str) -> subprocess.CompletedProcess:
    """The command line in this process: Spark allows one session per
    process, so a check reuses the running one (the `spark` fixture)."""
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return subprocess.CompletedProcess(args, result.exit_code, result.stdout, result.stderr)


def judged(run: Path) -> dict:
    """A run's results.json less how long each checker family took (all
    that differs between two checks of one history)."""
    results = json.loads((run / "results.json").read_text())
    assert results["stats"].pop("seconds_by_family")
    return results
