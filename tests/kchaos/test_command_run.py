"""`--db command`: the reference broker run from its system spec
(examples/systems/reference.toml) like any other system, with every fault
on a seeded schedule: applied, healed, valid."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from kchaos.config import TestConfig
from kchaos.progress import Progress
from kchaos.run import run_and_check

pytestmark = [pytest.mark.root, pytest.mark.spark,
              pytest.mark.skipif(os.geteuid() != 0, reason="faults need root")]

SPEC = Path(__file__).resolve().parents[2] / "examples" / "systems" / "reference.toml"
FAULTS = ["partition", "pause", "kill", "disk"]


def applied(run_dir: Path) -> set[str]:
    """The fault verbs whose start the nemesis completed (info, not fail)."""
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    return {e["f"] for e in events if e["process"] == -1 and e["type"] == "info"}


@pytest.mark.slow
def test_a_described_system_takes_every_fault_and_is_valid(tmp_path, spark):
    config = TestConfig.build(db="command", system=str(SPEC), seed=11, time_limit=30,
                              nemesis=FAULTS, nemesis_interval=3, recovery_time=3,
                              final_time_limit=90, store=tmp_path, subnet="198.18.11.0/24")
    result = run_and_check(config, spark, progress=Progress.quiet())
    assert result.valid is True, (result.counts, result.suite.result.unknown, result.run_dir)
    done = applied(result.run_dir)
    disk = {"stall-disk", "disk-errors", "lose-unsynced"}
    assert {"start-partition", "pause", "kill"} <= done and done & disk, sorted(done)
    assert result.outcome.heal_problems == []
    logs = sorted(p.name for p in (result.run_dir / "nodes" / "n1").iterdir())
    assert {"broker.log", "controller.log", "data-listing.txt"} <= set(logs)
