"""What a run's own outcome (test.json) does to its verdict: a broker that
died unasked, a failed heal, a nemesis that raised, or faults scheduled of
which none was applied make a run `unknown` — exit 2, the reason in
results.json and on the verdict line — while the same history with a clean
outcome stays valid. (A real run with a broker killed by hand:
tests/kchaos/test_run.py.)"""

from __future__ import annotations

import json

import pytest

from tests.cli_support import kchaos_here
from tests.kchaos.test_cli import copy_example

pytestmark = pytest.mark.spark

APPLIED = [{"f": "start-partition", "type": "info", "value": {"kind": "halves"}},
           {"f": "heal", "type": "info", "value": {"problems": []}}]


def with_outcome(run, outcome: dict, **test) -> None:
    body = json.loads((run / "test.json").read_text())
    body.update(test, outcome={"final": {"reached": True}, "node_failures": [],
                               "heal_problems": [], "nemesis": [], "nemesis_error": None,
                               **outcome})
    (run / "test.json").write_text(json.dumps(body))


@pytest.mark.parametrize("outcome, test, key, shown", [
    ({"node_failures": ["n2: the broker was not running at the end of the main phase"]}, {},
     "node-failures", "node-failures: 1 broker failure(s) nobody asked for"),
    ({"heal_problems": ["n1: the firewall chain KCHAOS could not be removed"]}, {},
     "heal-failed", "heal-failed: heal failed (1 problem(s))"),
    ({"nemesis_error": "RuntimeError: the partition fault raised", "nemesis": APPLIED}, {},
     "nemesis-failed", "nemesis-failed: the nemesis raised"),
    ({"nemesis": [{"f": "kill", "type": "fail", "value": {"nodes": ["n1"]}}]},
     {"nemesis_plan": [{"at": 5.0, "fault": "kill"}]},
     "no-fault-applied", "no-fault-applied: no fault applied"),
    ({"precondition_unmet": "partition 0's ISR down to its leader", "nemesis": APPLIED},
     {}, "precondition-unmet",
     "precondition-unmet: the nemesis script's precondition did not happen"),
], ids=["node-failures", "heal-failed", "nemesis-failed", "no-fault-applied",
        "precondition-unmet"])
def test_an_outcome_that_tested_less_makes_the_run_unknown(spark, tmp_path, outcome, test, key, shown):
    run = copy_example(tmp_path)
    with_outcome(run, outcome, **test)
    result = kchaos_here("check", str(run))
    assert result.returncode == 2, result.stdout + result.stderr
    assert shown in result.stdout.splitlines()[0]
    written = json.loads((run / "results.json").read_text())
    assert written["valid"] == "unknown" and list(written["unknown"]) == [key]
    assert written["unknown"][key]["reason"]


def test_a_clean_outcome_keeps_the_run_valid(spark, tmp_path):
    run = copy_example(tmp_path)
    with_outcome(run, {"nemesis": APPLIED}, nemesis_plan=[{"at": 5.0, "fault": "partition"}])
    result = kchaos_here("check", str(run))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"{run}: valid")
