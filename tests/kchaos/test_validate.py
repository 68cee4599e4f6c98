"""The validation matrix: every bug switch has a recipe; the fast subset
(in every `make test`) finds its switch and raises no alarm without it;
the whole matrix runs with `--full-matrix` (slow) or `make validate`."""

from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from kchaos.cli import cli
from kchaos.recipes import RECIPES
from kchaos.validate import Row, client_errors, format_table, validate_recipe
from reference_broker.bugs import CATALOGUE

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
def test_a_fast_recipe_finds_its_switch_and_only_then(switch, spark, tmp_path):
    row = validate_recipe(RECIPES[switch], spark, tmp_path, subnet=SUBNET)
    assert row.detected_in is not None, row
    assert not row.false_alarms, row
    assert row.clean_runs == row.detected_in


@needs_root
@pytest.mark.spark
@pytest.mark.root
@pytest.mark.slow
@pytest.mark.parametrize("switch", sorted(RECIPES))
def test_the_full_matrix(switch, spark, tmp_path, full_matrix):
    row = validate_recipe(RECIPES[switch], spark, tmp_path, subnet=SUBNET)
    assert row.ok, format_table([row])


def test_the_table_says_what_was_found_and_what_was_not():
    rows = [Row("fetch-above-hw", ["lost-write"], 3, detected_in=2, on_seconds=[61.2, 58.9],
                found={"lost-write": 4}, clean_runs=2),
            Row("dedup-window-one", ["duplicate"], 2, on_seconds=[40.0, 41.0], clean_runs=2,
                false_alarms=["seed 2: False (duplicate 1)"])]
    lines = format_table(rows).splitlines()
    assert lines[0].startswith("| switch | expected | detected |")
    assert lines[2] == ("| `fetch-above-hw` | lost-write | yes | 2 of 3 | 61, 59 | 2/2 | "
                        "lost-write 4 |")
    assert lines[3] == ("| `dedup-window-one` | duplicate | **no** | — of 2 | 40, 41 | "
                        "1/2 — seed 2: False (duplicate 1) | — |")
    assert rows[0].ok and not rows[1].ok


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
