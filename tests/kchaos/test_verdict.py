"""What a run's own outcome (test.json) does to its verdict: no outcome at
all, a daemon that died unasked, final reads that did not finish, a failed
heal, a nemesis that raised, faults scheduled of which none was applied, or
a kind of fault none of whose starts was applied make a run `unknown` — exit 2, the reason in
results.json and on the verdict line — while the same history with a clean
outcome stays valid. (A real run with a broker killed by hand:
tests/kchaos/test_run.py.)"""

from __future__ import annotations

import json

import pytest

from tests.cli_support import kchaos_here
from tests.cli.test_cli import copy_example

pytestmark = pytest.mark.spark

APPLIED = [{"f": "start-partition", "type": "info", "value": {"kind": "halves"}},
           {"f": "heal", "type": "info", "value": {"problems": []}}]
PARTITION = {"at": 5.0, "action": "start", "id": 0, "fault": {"fault": "partition",
                                                               "kind": "halves"}}
DISK = {"at": 30.0, "action": "start", "id": 1, "fault": {"fault": "disk", "mode": "stall",
                                                          "targets": "one"}}


def with_outcome(run, outcome: dict, **test) -> None:
    body = json.loads((run / "test.json").read_text())
    body.update(test, outcome={"final": {"reached": True}, "node_failures": [],
                               "heal_problems": [], "nemesis": [], "nemesis_error": None,
                               **outcome})
    (run / "test.json").write_text(json.dumps(body))


@pytest.mark.parametrize("outcome, test, key, shown", [
    ({"node_failures": ["n2: the broker died unasked in the main phase, 12 s into the run"]}, {},
     "node-failures", "node-failures: 1 daemon death(s) nobody asked for"),
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
    ({"final": {"ends": {"t-0": 5}, "reached": False}}, {}, "final-reads-unfinished",
     "final-reads-unfinished: the final reads did not finish"),
    ({"final": None}, {}, "final-reads-unfinished",
     "final-reads-unfinished: the final reads did not finish"),
    ({"nemesis": APPLIED, "dropped": [DISK]},
     {"nemesis_plan": [PARTITION, {**PARTITION, "at": 9.0, "action": "stop"}, DISK]},
     "fault-kind-not-applied", "fault-kind-not-applied: never applied: disk"),
], ids=["node-failures", "heal-failed", "nemesis-failed", "no-fault-applied",
        "precondition-unmet", "final-reads-short", "final-reads-none", "a-kind-dropped"])
def test_an_outcome_that_tested_less_makes_the_run_unknown(spark, tmp_path, outcome, test, key, shown):
    run = copy_example(tmp_path)
    with_outcome(run, outcome, **test)
    result = kchaos_here("check", str(run))
    assert result.returncode == 2, result.stdout + result.stderr
    assert shown in result.stdout.splitlines()[0]
    written = json.loads((run / "results.json").read_text())
    assert written["valid"] == "unknown" and list(written["unknown"]) == [key]
    assert written["unknown"][key]["reason"]


def test_a_run_directory_without_an_outcome_is_unknown(spark, tmp_path):
    run = copy_example(tmp_path)
    body = json.loads((run / "test.json").read_text())
    del body["outcome"]             # as a harness killed before its teardown leaves it
    (run / "test.json").write_text(json.dumps(body))
    result = kchaos_here("check", str(run))
    assert result.returncode == 2, result.stdout + result.stderr
    written = json.loads((run / "results.json").read_text())
    assert list(written["unknown"]) == ["no-outcome"]
    assert "test.json has no outcome" in written["unknown"]["no-outcome"]["reason"]
    (run / "test.json").unlink()
    kchaos_here("check", str(run))
    written = json.loads((run / "results.json").read_text())
    assert "there is no test.json" in written["unknown"]["no-outcome"]["reason"]


def test_a_clean_outcome_keeps_the_run_valid(spark, tmp_path):
    run = copy_example(tmp_path)
    with_outcome(run, {"nemesis": APPLIED}, nemesis_plan=[{"at": 5.0, "fault": "partition"}])
    result = kchaos_here("check", str(run))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"{run}: valid")


def test_a_re_check_judges_a_run_as_the_run_allowed_it(spark, tmp_path):
    """A run of --allow duplicate (recorded in test.json's config) keeps its
    allowance on a second `kchaos check`; the same history recorded
    without it is invalid."""
    from kchaos.config import TestConfig
    from tests.checkers.conftest import Ops, write_events
    ops = Ops().send(0, "t", 0, 1, offsets=[0]).send(1, "t", 0, 1, offsets=[1])
    ops.poll(2, ("t", 0, 0, 1), ("t", 0, 1, 1))                # one value at two offsets
    for allow, verdict, code in ((["duplicate"], "valid", 0), ([], "INVALID", 1)):
        run = tmp_path / ("allowed" if allow else "plain")
        write_events(run, ops.events)
        config = TestConfig.build(allow=allow, max_examples=3).to_json()
        (run / "test.json").write_text(json.dumps({"config": config, "outcome": {
            "final": {"reached": True}, "node_failures": [], "heal_problems": []}}))
        result = kchaos_here("check", str(run))
        assert result.returncode == code, result.stdout + result.stderr
        assert result.stdout.startswith(f"{run}: {verdict}")
        written = json.loads((run / "results.json").read_text())
        assert ("duplicate" in written["allowed_types"]) == bool(allow)
