"""The suite: merged verdicts, a throwing checker, results.json."""

from __future__ import annotations

import json
import shutil
from types import SimpleNamespace

import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from checkers import suite
from checkers.result import ALLOWED_BY_DEFAULT, UNKNOWN, CheckOptions, CheckResult, merge_verdicts
from history_analysis.tables import TABLES
from tests.checkers.conftest import Ops


def result(**counts) -> CheckResult:
    r = CheckResult()
    for type_, n in counts.items():
        r.add(type_.replace("_", "-"), n, [{"type": type_.replace("_", "-")}] * n)
    return r


def test_verdict_false_beats_unknown_beats_true():
    assert merge_verdicts([True, UNKNOWN, False]) is False
    assert merge_verdicts([True, UNKNOWN]) == UNKNOWN
    assert merge_verdicts([True, True]) is True
    assert merge_verdicts([]) is True


def test_allowed_types_are_counted_but_keep_the_run_valid():
    r = result(int_send_skip=2, resume_rewind=1)
    assert r.verdict(ALLOWED_BY_DEFAULT) is True
    assert r.verdict(frozenset()) is False
    assert result(duplicate=1).verdict(ALLOWED_BY_DEFAULT | {"duplicate"}) is True
    undecided = CheckResult(unknown={"unseen": {"count": 3}})
    assert undecided.verdict(ALLOWED_BY_DEFAULT) == UNKNOWN
    undecided.add("lost-write", 1, [{}])
    assert undecided.verdict(ALLOWED_BY_DEFAULT) is False


def test_merge_caps_examples_and_sums_counts():
    total = CheckResult()
    total.merge(result(duplicate=3), max_examples=2)
    total.merge(result(duplicate=2), max_examples=2)
    assert total.counts == {"duplicate": 5}
    assert len(total.anomalies["duplicate"]) == 2


@pytest.mark.spark
def test_a_throwing_checker_makes_the_verdict_unknown(spark, monkeypatch):
    from tests.checkers.conftest import history_of

    def broken(found, summary):
        raise ZeroDivisionError("division by zero\nsecond line")

    def finds_a_duplicate(found, summary):
        return result(duplicate=1)

    broken_family = SimpleNamespace(FAMILY="broken", check=broken)
    monkeypatch.setattr(suite, "FAMILIES", (broken_family, SimpleNamespace(
        FAMILY="dup", check=finds_a_duplicate)))
    events = Ops().send(0, "t", 0, 1, offsets=[0]).events
    outcome = suite.check_history(history_of(spark, events), CheckOptions())
    assert outcome.result.errors == [{"checker": "broken",
                                      "error": "ZeroDivisionError: division by zero"}]
    assert outcome.valid is False  # the duplicate still counts: false > unknown
    monkeypatch.setattr(suite, "FAMILIES", (broken_family,))
    outcome = suite.check_history(history_of(spark, events), CheckOptions())
    assert outcome.valid == UNKNOWN


@pytest.mark.spark
def test_results_json_of_a_run_with_a_lost_write(spark, tmp_path):
    from kchaos.check import check_run
    from tests.checkers.conftest import write_events

    ops = Ops().send(0, "t", 0, 10, offsets=[0]).send(0, "t", 0, 11, offsets=[1])
    lost_send = ops.last
    ops.poll(1, ("t", 0, 1, 11))
    write_events(tmp_path, ops.events)
    outcome = check_run(spark, tmp_path, CheckOptions(max_examples=5))
    written = json.loads((tmp_path / "results.json").read_text())
    assert written == json.loads(json.dumps(outcome.to_json(), default=str))
    assert written["valid"] is False
    assert written["anomaly_types"] == ["lost-write"]
    assert written["invalid_types"] == ["lost-write"]
    assert written["allowed_types"] == sorted(ALLOWED_BY_DEFAULT)
    assert written["counts"] == {"lost-write": 1}
    case, = written["anomalies"]["lost-write"]
    assert (case["topic"], case["partition"], case["value"]) == ("t", 0, 10)
    assert lost_send - 2 in case["evidence"]
    assert written["stats"]["ops"] == {"send": {"ok": 2}, "poll": {"ok": 1}}
    assert written["stats"]["realtime_lag"]["polls"] == 1

    # The same tables as another tool may leave them, each in one file and
    # not in buckets (history_analysis/buckets.py), are judged alike.
    (tmp_path / "history.jsonl").unlink()
    for table in TABLES:
        folder = tmp_path / "history" / table
        rows = ds.dataset(folder, format="parquet").to_table()
        shutil.rmtree(folder)
        folder.mkdir()
        pq.write_table(rows, folder / "data.parquet")
    check_run(spark, tmp_path, CheckOptions(max_examples=5))
    again = json.loads((tmp_path / "results.json").read_text())
    for results in (written, again):
        results["stats"].pop("seconds_by_family")
    assert again == written


def test_shuffle_partitions_follow_the_input_and_the_cores():
    from checkers.history import shuffle_partitions
    MiB = 1 << 20
    assert shuffle_partitions(0, 2) == 1                  # a tiny run: one task
    assert shuffle_partitions(3 * MiB, 2) == 1
    assert shuffle_partitions(20 * MiB, 2) == 2           # every core, 10 MiB each
    assert shuffle_partitions(20 * MiB, 8) == 6           # but 4 MiB at least each
    assert shuffle_partitions(480 * MiB, 2) == 11         # 48 MiB each
    assert shuffle_partitions(1 << 50, 2) == 400
