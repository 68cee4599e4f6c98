"""The validation matrix: every bug switch has a recipe; the fast subset
(in every `make test`) finds its switch;
the whole matrix runs with `--full-matrix` (slow) or `make validate`."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from reference_broker.bugs import CATALOGUE
from validation.generic import (
    Cell, fill, format_generic, generic_config, read_cells, recheck, rows,
)
from validation.matrix import Row, client_errors, failure, format_table, validate_recipe
from validation.profiles import NEMESES
from validation.recipes import RECIPES

FAST = sorted(name for name, recipe in RECIPES.items() if recipe.fast)
# Not the default subnet: the recipes run beside the other end-to-end tests
# under xdist (tests/conftest.py), as `kchaos validate --subnet` lets a user do.
SUBNET = "198.18.12.0/24"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="recipes use network namespaces")


def test_every_bug_switch_has_a_recipe_and_the_fast_subset_is_the_issue_s():
    assert set(RECIPES) == set(CATALOGUE)
    assert set(FAST) == {"acks-all-ignores-min-isr", "truncate-to-local-hw",
                         "no-idempotent-dedup", "offsets-commit-acks-one",
                         "no-generation-fencing"}
    for recipe in RECIPES.values():
        assert recipe.expected and recipe.why and 1 <= recipe.attempts <= 5
        assert not {"bugs", "seed", "store", "nemesis_script"} & set(recipe.config)


@pytest.mark.slow
@needs_root
@pytest.mark.spark
@pytest.mark.root
@pytest.mark.parametrize("switch", FAST)
def test_a_fast_recipe_finds_its_switch(switch, spark, tmp_path):
    # The switch on only, for the suite's time: the clean runs with it off
    # are make validate's (three each); the correct broker under faults is
    # the other end-to-end tests' (test_nemesis_run.py and the backends').
    row = validate_recipe(RECIPES[switch], spark, tmp_path, subnet=SUBNET, clean_runs=0)
    assert row.detected_in is not None, row
    assert not row.failures, row
    assert row.clean_runs == 0 and row.ok, row


@needs_root
@pytest.mark.spark
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("switch", sorted(RECIPES))
def test_the_full_matrix(switch, spark, tmp_path, full_matrix):
    row = validate_recipe(RECIPES[switch], spark, tmp_path, subnet=SUBNET)
    assert row.ok, format_table([row])


def test_the_table_says_what_was_found_and_what_was_not():
    rows = [Row("fetch-above-hw", ["lost-write"], 3, detected_in=2, on_seconds=[61.2, 50.0, 58.9],
                found={"lost-write": 4}, clean_runs=3,
                inconclusive=["on, seed 2: a follower led within 15 s of the leader's kill"]),
            Row("dedup-window-one", ["duplicate"], 2, on_seconds=[40.0, 41.0], clean_runs=2,
                false_alarms=["seed 2: False (duplicate 1)"]),
            Row("epoch-lookup-v0", ["inconsistent-offsets"], 3, detected_in=1,
                on_seconds=[70.0], clean_runs=3,
                failures=["off, seed 1: kill did not apply: FaultError: no such node"])]
    lines = format_table(rows).splitlines()
    assert lines[0].startswith("| switch | expected | detected |")
    assert lines[2] == ("| `fetch-above-hw` | lost-write | yes | 2 of 3 | 61, 50, 59 | 3/3 | "
                        "on, seed 2: a follower led within 15 s of the leader's kill | "
                        "lost-write 4 |")
    assert lines[3] == ("| `dedup-window-one` | duplicate | **no** | — of 2 | 40, 41 | "
                        "1/2 (**3 needed**) — seed 2: False (duplicate 1) | none | — |")
    assert "yes — **recipe failed**: off, seed 1: kill did not apply" in lines[4]
    assert rows[0].ok and not rows[1].ok and not rows[2].ok
    assert not Row("x", ["duplicate"], 3, detected_in=1, clean_runs=2).ok   # 3 clean needed


def test_kchaos_validate_refuses_an_unknown_switch(tmp_path):
    result = CliRunner().invoke(cli, ["validate", "--switch", "no-such-bug",
                                      "--store", str(tmp_path)], standalone_mode=False)
    assert "no-such-bug" in str(result.exception) and "choose from" in str(result.exception)


def test_client_errors_counts_client_operations_with_the_error(tmp_path):
    oosn = "KafkaException: KafkaError{FATAL,code=OUT_OF_ORDER_SEQUENCE_NUMBER}"
    events = [
        (0, "invoke", "send", {"sends": []}, None),
        (0, "info", "send", {"sends": []}, oosn),
        # The nemesis's errors are not a client's.
        (-1, "invoke", "pause", {"nodes": ["n1"]}, None),
        (-1, "fail", "pause", {"nodes": ["n1"]}, "OUT_OF_ORDER_SEQUENCE_NUMBER"),
        # Another error: not counted.
        (6, "invoke", "send", {"sends": []}, None),
        (6, "info", "send", {"sends": []}, "_TIMED_OUT: no delivery report"),
    ]
    lines = [json.dumps({"index": n, "time": n, "process": p, "type": t, "f": f, "value": v,
                         **({"error": e} if e else {})})
             for n, (p, t, f, v, e) in enumerate(events)]
    # A truncated last line (docs/history.md) is skipped.
    history = "\n".join(lines) + \
        '\n{"index": 6, "process": 1, "type": "info", "error": "OUT_OF_ORDER_SEQ'
    (tmp_path / "history.jsonl").write_text(history)
    assert client_errors(tmp_path, "OUT_OF_ORDER_SEQUENCE_NUMBER") == 1
    assert client_errors(tmp_path, None) == 0


@pytest.mark.slow
@needs_root
@pytest.mark.spark
@pytest.mark.root
def test_a_recipe_whose_cluster_never_gets_there_is_inconclusive_never_found_nor_clean(
        spark, tmp_path):
    """Real runs whose recipe cannot reach its first precondition (three
    replicas in the ISR, with a replication factor of 2): the script stops
    with `precondition-unmet`, the run's verdict is unknown, and the
    matrix counts it neither as a detection nor as a clean run."""
    recipe = RECIPES["acks-all-ignores-min-isr"]
    recipe = dataclasses.replace(recipe, attempts=1, config={
        **recipe.config, "time_limit": 5, "replication_factor": 2, "final_time_limit": 20})
    row = validate_recipe(recipe, spark, tmp_path, subnet=SUBNET, clean_runs=1, extra_tries=0)
    assert row.detected_in is None and row.clean_runs == 0 and not row.ok, row
    assert not row.failures and not row.false_alarms, row
    assert [entry.split(":")[0] for entry in row.inconclusive] == ["on, seed 1", "off, seed 1"]
    assert all("partition 0 settled, 3 replicas in its ISR" in e for e in row.inconclusive), row
    for run_dir in row.run_dirs:
        results = json.loads((Path(run_dir) / "results.json").read_text())
        assert results["valid"] == "unknown" and "precondition-unmet" in results["unknown"]


def test_failure_names_a_nemesis_that_raised_or_a_fault_that_did_not_apply():
    # The outcome is built by hand: a fault that will not apply on a real
    # cluster cannot be arranged on purpose (the edge case a fake is for).
    from kchaos.run import RunOutcome, RunResult

    def result(**outcome) -> RunResult:
        return RunResult(True, {}, {}, Path("run"), RunOutcome(Path("run"), **outcome),
                         None, None)
    applied = [{"f": "pause", "type": "info", "value": {"nodes": ["n2"]}}]
    assert failure(result(nemesis=applied)) is None
    assert failure(result(nemesis=applied, precondition_unmet="B led")) is None
    assert failure(result(nemesis_error="RuntimeError: boom")) == \
        "the nemesis raised: RuntimeError: boom"
    assert failure(result(nemesis=applied + [
        {"f": "kill", "type": "fail", "value": {}, "error": "FaultError: no process"}])) == \
        "kill did not apply: FaultError: no process"


def test_the_generic_table_counts_detections_false_alarms_and_unknowns(tmp_path):
    cells = [Cell("fetch-above-hw", 1, 90.0, False, {"inconsistent-offsets": 3}, 41.0),
             Cell("fetch-above-hw", 2, 90.0, True),
             Cell("fetch-above-hw", 3, 90.0, False, {"inconsistent-offsets": 1,
                                                     "lost-write": 1}, 63.0),
             Cell("none", 1, 90.0, True), Cell("none", 2, 90.0, "unknown")]
    table = rows(cells, ["fetch-above-hw", "dedup-window-one", "none"])
    assert [(r.runs, r.detected, r.unknown, r.median_detection) for r in table] == [
        (3, 2, 0, 52.0), (0, 0, 0, None), (2, 0, 1, None)]
    assert table[0].types == {"inconsistent-offsets": 2, "lost-write": 1}
    lines = format_generic(table, {90.0}).splitlines()
    assert lines[2] == ("| `fetch-above-hw` | 3 | 2/3 | 52 s | inconsistent-offsets (2), "
                        "lost-write (1) | 0 |")
    assert lines[3] == "| `dedup-window-one` | 0 | not run | — | — | 0 |"
    assert lines[4] == "| correct broker (false alarms) | 2 | 0/2 | — | — | 1 |"


def test_generic_cells_are_kept_and_a_rerun_skips_them(tmp_path):
    path = tmp_path / "validate-generic" / "cells.jsonl"
    path.parent.mkdir()
    done = Cell("none", 1, 5.0, True, run_dir="r1", commit="abc")
    path.write_text(json.dumps(dataclasses.asdict(done)) + "\n" + '{"switch": "none", "se')
    assert read_cells(tmp_path) == [done]       # a line cut by a crash is skipped
    seen = []
    cells = fill(["none"], None, tmp_path, clean_seeds=1, time_limit=5.0,
                 on_cell=lambda cell, skipped: seen.append((cell, skipped)))
    assert seen == [(None, ("none", 1))] and cells == [done]


def test_a_profile_is_a_table_of_its_own_and_old_cells_are_kafka_defaults(tmp_path):
    path = tmp_path / "validate-generic" / "cells.jsonl"
    path.parent.mkdir()
    old = {"switch": "none", "seed": 1, "time_limit": 5.0, "valid": True}   # before profiles
    path.write_text(json.dumps(old) + "\n")
    [cell] = read_cells(tmp_path)
    assert cell.key == ("kafka-defaults", "none", 1, 5.0)
    seen = []
    fill(["none"], None, tmp_path, clean_seeds=1, time_limit=5.0, profile="kafka-defaults",
         on_cell=lambda cell, skipped: seen.append(skipped))
    assert seen == [("none", 1)]


@pytest.mark.spark
def test_recheck_judges_kept_runs_again_with_these_checkers(spark, tmp_path):
    from tests.checkers.conftest import Ops, write_events
    # A stale answer while a partition was in force: an earlier checker
    # called it stale-committed-offset; these call it unknown (a replaced
    # coordinator's cache, checkers/group_offsets.py).
    ops = Ops()
    ops.commit(1, "g", "t", 0, 5)
    ops.op(-1, "start-partition", {"kind": "halves"}, {"kind": "halves"}, type="info")
    ops.committed(2, "g", "t", 0, 3)
    ops.op(-1, "stop-partition", {"kind": "halves"}, {"kind": "halves"}, type="info")
    write_events(tmp_path / "run", ops.events)
    path = tmp_path / "validate-generic" / "cells.jsonl"
    path.parent.mkdir()
    judged = Cell("none", 1, 90.0, False, {"stale-committed-offset": 1}, 3.0,
                  str(tmp_path / "run"), profile="stress")
    other = Cell("none", 1, 90.0, False, {"stale-committed-offset": 1}, 3.0,
                 str(tmp_path / "run"))                 # kafka-defaults: left alone
    path.write_text("".join(json.dumps(dataclasses.asdict(c)) + "\n" for c in (judged, other)))
    seen = []
    cells = recheck(spark, tmp_path, profile="stress", time_limit=90.0, on_cell=seen.append)
    assert [(c.valid, c.counts, c.first_detection) for c in seen] == [("unknown", {}, None)]
    assert seen[0].checked and seen[0].commit == judged.commit
    assert read_cells(tmp_path) == cells == [seen[0], other]


def test_the_stress_profile_adds_its_settings_to_the_same_run(tmp_path):
    plain = generic_config("none", seed=3, time_limit=90, store=tmp_path)
    stress = generic_config("none", seed=3, time_limit=90, store=tmp_path, profile="stress")
    assert plain.broker_config == ["min.insync.replicas=2"]
    assert stress.broker_config[0] == "min.insync.replicas=2"
    assert "replica.lag.time.max.ms=3000" in stress.broker_config
    assert "offsets.load.buffer.size=2048" in stress.broker_config
    assert plain.workload.stall_consumers_every is None
    assert stress.workload.stall_consumers_every
    assert stress.workload.client_settings.max_poll_interval_ms == 6000
    assert (plain.workload.end_offsets_every, stress.workload.end_offsets_every) == (None, 1.0)
    # Everything else is the same run: nemesis, schedule, seed, the switch.
    for name in ("nemesis", "nemesis_interval", "seed", "time_limit", "bugs"):
        assert getattr(plain, name) == getattr(stress, name), name


def test_stress_failover_is_the_stress_run_with_every_kind_and_the_first_tables_keep_theirs(
        tmp_path):
    stress = generic_config("none", seed=3, time_limit=90, store=tmp_path, profile="stress")
    more = generic_config("none", seed=3, time_limit=90, store=tmp_path,
                          profile="stress-failover")
    assert more.nemesis == NEMESES and "failover" in NEMESES
    # The first two tables were measured without failover; their runs keep that mix.
    assert stress.nemesis == [n for n in NEMESES if n != "failover"]
    assert generic_config("none", seed=3, time_limit=90, store=tmp_path).nemesis == \
        stress.nemesis
    for name in ("nemesis_interval", "broker_config", "workload", "seed", "bugs"):
        assert getattr(stress, name) == getattr(more, name), name


def test_the_transactions_profile_is_the_every_kind_run_with_transactions(tmp_path):
    plain = generic_config("none", seed=3, time_limit=90, store=tmp_path)
    txn = generic_config("lso-inclusive", seed=3, time_limit=90, store=tmp_path,
                         profile="transactions")
    assert txn.workload.transactions and not plain.workload.transactions
    assert txn.nemesis == NEMESES and txn.bugs == ["lso-inclusive"]
    for name in ("nemesis_interval", "broker_config", "seed"):
        assert getattr(plain, name) == getattr(txn, name), name


def test_the_stress_command_in_the_docs_is_the_stress_profiles_run(tmp_path):
    from click.core import ParameterSource

    from cli.run import run_command
    from kchaos.config import TestConfig
    from kchaos.options import from_flat, given
    page = (Path(__file__).parents[2] / "docs" / "validation.md").read_text()
    block = page.split("A user gets the stress profile's run", 1)[1]
    command = block.split("```sh", 1)[1].split("```", 1)[0].replace("\\\n", " ").split()
    assert command[:2] == ["kchaos", "run"]
    ctx = run_command.make_context("run", command[2:])
    options = {name: value for name, value in ctx.params.items() if name not in (
        "config_file", "allow", "max_examples", "junit", "spark_master", "spark_conf")}
    sources = {name: ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
               for name in options}
    theirs = from_flat(TestConfig, given(TestConfig, options, sources))
    ours = generic_config("none", seed=theirs.seed, time_limit=theirs.time_limit,
                          store=theirs.store, subnet=theirs.subnet, profile="stress")
    for name in ("nemesis", "nemesis_interval", "broker_config", "workload"):
        assert getattr(theirs, name) == getattr(ours, name), name


@pytest.mark.slow
@needs_root
@pytest.mark.spark
@pytest.mark.root
def test_a_generic_cell_runs_every_fault_kind_and_is_kept(spark, tmp_path):
    cells = fill(["none"], spark, tmp_path, clean_seeds=1, time_limit=20, subnet=SUBNET,
                 profile="stress-failover")
    [cell] = cells
    assert cell.switch == "none" and cell.seed == 1 and cell.valid is True, cell
    test = json.loads((Path(cell.run_dir) / "test.json").read_text())
    assert test["config"]["nemesis"] == NEMESES and test["config"]["bugs"] == []
    assert [c.run_dir for c in read_cells(tmp_path)] == [cell.run_dir]


@pytest.mark.parametrize("args, message", [
    (["--generic", "--switch", "no-such-bug"], "not a bug switch"),
    (["--generic", "--fast"], "--generic takes neither"),
    (["--seeds", "3"], "go with --generic"),
    (["--profile", "stress"], "go with --generic"),
    (["--recheck"], "go with --generic"),
])
def test_kchaos_validate_names_options_that_do_not_go_together(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["validate", *args, "--store", str(tmp_path)],
                                standalone_mode=False)
    assert message in str(result.exception)


def test_a_table_goes_only_between_its_markers(tmp_path):
    from validation.figures import write_block
    page = tmp_path / "page.md"
    page.write_text("before\n<!-- figures:t -->\nold\n<!-- /figures:t -->\nafter\n")
    write_block(page, "t", "| new |")
    assert page.read_text() == "before\n<!-- figures:t -->\n| new |\n<!-- /figures:t -->\nafter\n"
    with pytest.raises(ValueError, match="no <!-- figures:other -->"):
        write_block(page, "other", "x")
