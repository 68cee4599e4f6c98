"""`kchaos validate --kafka`'s rows, cells and table (validation/kafka.py).
The rows' runs are the measurement itself (docs/validation.md's Apache Kafka
section); Kafka under every fault in the suite is tests/kchaos/test_kafka_run.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from cli.main import cli
from validation.generic import Cell
from validation.kafka import (
    BY_KEY, CELLS_DIR, ROWS, cells, fill, format_outcomes, kafka_config, outcomes, profile_of,
    write_table,
)
from validation.profiles import NEMESES


def config(key: str, tmp_path):
    return kafka_config(BY_KEY[key], seed=1, store=tmp_path)


def test_the_safe_rows_are_kafka_s_safe_configuration_with_and_without_faults(tmp_path):
    safe = [row for row in ROWS if row.safe]
    assert [row.key for row in safe] == ["safe-clean", "safe-clean-stress", "safe-faults",
                                         "safe-faults-stress", "safe-faults-txn",
                                         "power-loss-flushed"]
    for row in safe[:4]:
        c = kafka_config(row, seed=1, store=tmp_path)
        assert c.db == "kafka" and c.time_limit == 90 and row.seeds == 10
        assert c.workload.client_settings.acks == "all"
        assert c.workload.replication_factor == 3
        assert c.broker_config[:2] == ["min.insync.replicas=2",
                                       "unclean.leader.election.enable=false"]
        assert c.nemesis == (NEMESES if "faults" in row.key else [])
    # The stress rows add the stress profile's Kafka keys, nothing else differs.
    plain, stress = config("safe-faults", tmp_path), config("safe-faults-stress", tmp_path)
    assert "replica.lag.time.max.ms=3000" in stress.broker_config
    assert "replica.lag.time.max.ms=3000" not in plain.broker_config
    assert (plain.nemesis, plain.nemesis_interval) == (stress.nemesis, stress.nemesis_interval)
    # The transactional row is the plain every-fault row with transactions.
    txn = config("safe-faults-txn", tmp_path)
    assert txn.workload.transactions and not plain.workload.transactions
    assert dataclasses.replace(txn.workload, transactions=False) == plain.workload
    assert (txn.broker_config, txn.nemesis) == (plain.broker_config, plain.nemesis)


def test_the_unsafe_rows_set_the_unsafe_setting_and_expect_what_a_user_would(tmp_path):
    acks = config("acks-1", tmp_path)
    assert acks.workload.client_settings.acks == "1" and acks.fault_targets == ["leader"]
    assert "partition" in acks.nemesis
    unclean = config("unclean", tmp_path)
    assert "unclean.leader.election.enable=true" in unclean.broker_config
    assert unclean.controller_node and unclean.nemesis_script == "lone-leader-acks-then-dies"
    assert not any(c.startswith("min.insync.replicas") for c in unclean.broker_config)
    lost, flushed = config("power-loss", tmp_path), config("power-loss-flushed", tmp_path)
    assert lost.nemesis == flushed.nemesis == ["power-loss"]
    assert set(flushed.broker_config) - set(lost.broker_config) == \
        {"log.flush.interval.messages=1"}
    dup = config("no-idempotence", tmp_path)
    assert dup.workload.client_settings.idempotence is False
    assert dup.workload.client_settings.retries is None          # the client's: retrying
    assert {row.key: set(row.expected) for row in ROWS if not row.safe} == {
        "acks-1": {"lost-write", "unseen"}, "unclean": {"lost-write", "unseen"},
        "power-loss": {"lost-write", "unseen"},
        "no-idempotence": {"duplicate"}}
    # Lost records show as lost-write only if no group read them first.
    for c in (acks, unclean, lost):
        assert c.workload.consumer_mode == "subscribe"
        wait = int(next(s for s in c.broker_config
                        if s.startswith("group.initial.rebalance.delay.ms=")).split("=")[1])
        assert wait >= c.time_limit * 1000
        assert c.workload.client_settings.max_poll_interval_ms >= wait


def test_outcomes_count_valid_safe_runs_and_unsafe_runs_that_found_the_expected_type():
    p = profile_of("4.4.0")
    found = [Cell("acks-1", 1, 60.0, False, {"lost-write": 4}, 20.0, profile=p),
             Cell("acks-1", 2, 60.0, False, {"inconsistent-offsets": 2}, 30.0, profile=p),
             Cell("acks-1", 3, 60.0, False, {"lost-write": 1, "duplicate": 1}, 40.0,
                  profile=p)]
    safe = [Cell("safe-clean", 1, 90.0, True, profile=p),
            Cell("safe-clean", 2, 90.0, "unknown", profile=p)]
    table = outcomes(found + safe, [BY_KEY["acks-1"], BY_KEY["safe-clean"],
                                    BY_KEY["no-idempotence"]])
    acks, clean, dup = table
    # The second run found an anomaly, but not the one a user expects.
    assert (acks.runs, acks.as_expected, acks.median_detection, acks.ok) == (3, 2, 30.0, True)
    assert acks.types == {"lost-write": 2, "inconsistent-offsets": 1, "duplicate": 1}
    assert (clean.runs, clean.as_expected, clean.unknown, clean.ok) == (2, 1, 1, False)
    assert (dup.runs, dup.ok) == (0, False)
    lines = format_outcomes(table).splitlines()
    assert lines[2] == ("| acks=1 | partitions; the leader killed and paused | 60 | lost-write, unseen | "
                        "2/3 found | "
                        "duplicate (1), inconsistent-offsets (1), lost-write (2) | 0 | 30 s |")
    assert lines[3].startswith("| safe, Kafka timings | none | 90 | valid | 1/2 valid **(short)**; "
                               "8 of 10 runs to go |")
    assert "| not run |" in lines[4]


def test_a_store_without_a_rows_cells_keeps_the_pages_line_for_it(tmp_path):
    """The page's rows measured elsewhere (their store not here) stay as
    the page has them, with their commits; the rows run here are
    rewritten, and a row run nowhere says so."""
    p = profile_of("4.4.0")
    page = tmp_path / "validation.md"
    earlier = ("| safe, Kafka timings | none | 90 | valid | 10/10 valid | — | 0 | — |\n"
               "| acks=1 | partitions; the leader killed and paused | 60 | lost-write, unseen | "
               "2/3 found | lost-write (2) | 0 | 74 s |")
    page.write_text(f"# page\n<!-- figures:kafka-matrix -->\n| setting | faults |\n|---|---|\n"
                    f"{earlier}\n\n(Apache Kafka 4.4.0; cells measured on commit(s) 614ca24, "
                    f"73ccdd5.)\n<!-- /figures:kafka-matrix -->\ntail\n")
    here = [Cell("acks-1", seed, 60.0, False, {"lost-write": 1}, 20.0, commit="59dc1e7",
                 profile=p) for seed in (1, 2, 3)]
    rows = [BY_KEY["safe-clean"], BY_KEY["acks-1"], BY_KEY["no-idempotence"]]
    write_table(outcomes(here, rows), here, "4.4.0", page)
    text = page.read_text()
    lines = [line for line in text.splitlines() if line.startswith("| ")]
    assert lines[1] == earlier.splitlines()[0]                       # kept
    assert lines[2].startswith("| acks=1 |") and "3/3 found" in lines[2]    # rewritten
    assert "| not run |" in lines[3]
    assert "commit(s) 59dc1e7, 614ca24, 73ccdd5.)" in text and text.endswith("tail\n")


def test_cells_are_per_kafka_version_and_a_rerun_skips_them(tmp_path):
    path = tmp_path / CELLS_DIR / "cells.jsonl"
    path.parent.mkdir()
    done = [Cell("acks-1", seed, 60.0, False, {"lost-write": 1}, profile=profile_of("4.4.0"))
            for seed in (1, 2)]
    other = Cell("acks-1", 1, 60.0, True, profile=profile_of("3.9.1"))
    path.write_text("".join(json.dumps(dataclasses.asdict(c)) + "\n" for c in done + [other]))
    seen = []
    assert fill([BY_KEY["acks-1"]], None, tmp_path, version="4.4.0", seeds=2,
                on_cell=lambda cell, skipped: seen.append(skipped)) == done
    assert seen == [("acks-1", 1), ("acks-1", 2)]
    assert cells(tmp_path, "3.9.1") == [other]


@pytest.mark.parametrize("args, message", [
    (["--kafka", "--switch", "no-such-row"], "not a row of the Kafka evidence"),
    (["--kafka", "--generic"], "--kafka takes only"),
    (["--kafka", "--soak", "1"], "--kafka takes only"),
    (["--kafka-version", "4.4.0"], "--kafka-version goes with --kafka"),
])
def test_kchaos_validate_kafka_refuses_what_does_not_go_with_it(tmp_path, args, message):
    result = CliRunner().invoke(cli, ["validate", *args, "--store", str(tmp_path)],
                                standalone_mode=False)
    assert message in str(result.exception)


def test_a_record_lost_at_the_tail_counts_as_found_a_mere_reordering_does_not():
    """A proven `unseen` is an acknowledged record gone from the partition's
    end: power loss's usual sign. inconsistent-offsets alone is not loss."""
    p = profile_of("4.4.0")
    cells = [Cell("power-loss", 1, 60.0, False, {"unseen": 32}, 44.0, profile=p),
             Cell("power-loss", 2, 60.0, False, {"inconsistent-offsets": 3}, 40.0, profile=p),
             Cell("power-loss", 3, 60.0, True, profile=p)]
    [outcome] = outcomes(cells, [BY_KEY["power-loss"]])
    assert (outcome.runs, outcome.as_expected, outcome.ok) == (3, 1, False)
