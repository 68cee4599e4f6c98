"""Ingest: a hand-written history → exactly the expected rows in each table."""

from __future__ import annotations

import json

import pytest

from history_analysis.history import HistoryError
from history_analysis.ingest import IngestError, ingest, read_manifest
from history_analysis.tables import TABLES

pytestmark = pytest.mark.spark

S = lambda topic, partition, value, offset=None: {  # noqa: E731
    "topic": topic, "partition": partition, "value": value, "offset": offset}
TP = lambda topic, partition: {"topic": topic, "partition": partition}  # noqa: E731

# (process, type, f, value, extra) — index and time are the line number × 10.
EVENTS = [
    (0, "invoke", "send", {"sends": [S("t", 0, 11), S("t", 1, 12)]}, {}),
    (1, "invoke", "assign", {"partitions": [TP("t", 0)], "seek_to_beginning": True}, {}),
    (0, "ok", "send", {"sends": [S("t", 0, 11, 5), S("t", 1, 12, 7)]}, {}),
    (1, "ok", "assign", {"partitions": [TP("t", 0)], "seek_to_beginning": True}, {}),
    (-1, "invoke", "kill", {"nodes": ["n1"]}, {}),
    (2, "invoke", "subscribe", {"group": "g", "topics": ["t", "u"]}, {}),
    (-1, "info", "kill", {"nodes": ["n1"], "killed": True}, {}),
    (2, "ok", "subscribe", {"group": "g", "topics": ["t", "u"]}, {}),
    (1, "invoke", "poll", {}, {}),
    (2, "invoke", "poll", {}, {}),
    (1, "ok", "poll", {"reads": [{"topic": "t", "partition": 0, "offset": 5, "value": 11},
                                 {"topic": "t", "partition": 0, "offset": 6, "value": None,
                                  "raw": "eHl6"}], "rebalances": []}, {}),
    (2, "info", "poll", {"reads": [], "rebalances": [
        {"kind": "assigned", "group": "g", "partitions": [TP("t", 1), TP("u", 0)]}]},
     {"error": "session timed out"}),
    (3, "invoke", "commit", {"group": "g", "offsets": [{"topic": "t", "partition": 1,
                                                          "offset": 8}]}, {}),
    (3, "ok", "commit", {"group": "g", "offsets": [{"topic": "t", "partition": 1,
                                                      "offset": 8}]}, {}),
    (4, "invoke", "committed", {"group": "g", "partitions": [TP("t", 0), TP("t", 1)]}, {}),
    (4, "ok", "committed", {"group": "g", "offsets": [{"topic": "t", "partition": 0,
                                                         "offset": None},
                                                        {"topic": "t", "partition": 1,
                                                         "offset": 8}]}, {}),
    (5, "invoke", "send", {"sends": [S("t", 1, 13)]}, {}),
    (5, "fail", "send", {"sends": [S("t", 1, 13)]}, {"error": "invalid config"}),
    (6, "invoke", "end-offsets", {"partitions": [TP("t", 0), TP("t", 1)]}, {"phase": "final"}),
    (6, "ok", "end-offsets", {"offsets": [{"topic": "t", "partition": 0, "offset": 7},
                                          {"topic": "t", "partition": 1, "offset": 8}]},
     {"phase": "final"}),
    (7, "invoke", "send", {"sends": [S("t", 0, 14)]}, {}),  # never completed
]


def write_history(run_dir, events, tail: str = ""):
    run_dir.mkdir(exist_ok=True)
    lines = [json.dumps({"index": i, "time": i * 10, "process": p, "type": t, "f": f,
                         "value": v, **extra})
             for i, (p, t, f, v, extra) in enumerate(events)]
    (run_dir / "history.jsonl").write_text("\n".join(lines) + "\n" + tail)
    return run_dir


def rows(spark, run_dir, table):
    frame = spark.read.parquet(str(run_dir / "history" / table))
    assert frame.columns == TABLES[table].columns
    return [tuple(r) for r in frame.collect()]


def test_every_table_has_exactly_the_expected_rows(spark, tmp_path):
    run = write_history(tmp_path / "run", EVENTS, tail='{"index":21,"time":2')
    result = ingest(spark, run)
    assert result.events == 21 and result.unmatched == 1 and result.truncated_line == 22

    assert rows(spark, run, "ops") == [
        # index, invoke_index, invoke_time, time, process, type, f, phase, error
        (2, 0, 0, 20, 0, "ok", "send", "main", None),
        (3, 1, 10, 30, 1, "ok", "assign", "main", None),
        (6, 4, 40, 60, -1, "info", "kill", "main", None),
        (7, 5, 50, 70, 2, "ok", "subscribe", "main", None),
        (10, 8, 80, 100, 1, "ok", "poll", "main", None),
        (11, 9, 90, 110, 2, "info", "poll", "main", "session timed out"),
        (13, 12, 120, 130, 3, "ok", "commit", "main", None),
        (15, 14, 140, 150, 4, "ok", "committed", "main", None),
        (17, 16, 160, 170, 5, "fail", "send", "main", "invalid config"),
        (19, 18, 180, 190, 6, "ok", "end-offsets", "final", None),
        (20, 20, 200, None, 7, "info", "send", "main", None),
    ]
    assert rows(spark, run, "sends") == [
        # op_index, process, type, pos, topic, partition, value, offset, invoke_time, time
        (20, 7, "info", 0, "t", 0, 14, None, 200, None),
        (2, 0, "ok", 0, "t", 0, 11, 5, 0, 20),
        (17, 5, "fail", 0, "t", 1, 13, None, 160, 170),
        (2, 0, "ok", 1, "t", 1, 12, 7, 0, 20),
    ]
    assert rows(spark, run, "reads") == [
        # op_index, process, type, pos, topic, partition, offset, value, raw, invoke, time, phase
        (10, 1, "ok", 0, "t", 0, 5, 11, None, 80, 100, "main"),
        (10, 1, "ok", 1, "t", 0, 6, None, "eHl6", 80, 100, "main"),
    ]
    assert rows(spark, run, "commits") == [(13, 3, "ok", "g", "t", 1, 8, 120, 130)]
    assert rows(spark, run, "committed") == [
        (15, 4, "ok", "g", "t", 0, None, 140, 150),
        (15, 4, "ok", "g", "t", 1, 8, 140, 150),
    ]
    assert rows(spark, run, "assignments") == [
        # op_index, process, kind, group, topic, partition, time
        (7, 2, "subscribe", "g", "t", None, 70),
        (3, 1, "assign", None, "t", 0, 30),
        (11, 2, "assigned", "g", "t", 1, 110),
        (7, 2, "subscribe", "g", "u", None, 70),
        (11, 2, "assigned", "g", "u", 0, 110),
    ]
    nemesis = rows(spark, run, "nemesis")
    assert [r[:5] for r in nemesis] == [(4, 40, 60, "kill", "info")]
    assert json.loads(nemesis[0][5]) == {"nodes": ["n1"], "killed": True}
    assert rows(spark, run, "end_offsets") == [(19, 6, "t", 0, 7, 190), (19, 6, "t", 1, 8, 190)]

    manifest = read_manifest(run)
    assert manifest["rows"] == {"ops": 11, "sends": 4, "reads": 2, "commits": 1,
                                "committed": 2, "assignments": 5, "nemesis": 1,
                                "end_offsets": 2}


def test_ingest_is_idempotent(spark, tmp_path):
    run = write_history(tmp_path / "run", EVENTS)
    first = ingest(spark, run)
    before = rows(spark, run, "sends")
    second = ingest(spark, run)
    assert first.rows == second.rows
    assert rows(spark, run, "sends") == before
    assert sorted(p.name for p in (run / "history").iterdir()) == sorted(
        [*TABLES, "_ingest.json"])
    assert [p.name for p in run.iterdir() if p.name.startswith(".history")] == []


def test_a_malformed_history_is_refused_and_old_tables_are_kept(spark, tmp_path):
    run = write_history(tmp_path / "run", EVENTS)
    ingest(spark, run)
    broken = (run / "history.jsonl").read_text().replace('"type": "ok", "f": "commit"',
                                                         '"type": "okay", "f": "commit"')
    (run / "history.jsonl").write_text(broken)
    with pytest.raises(HistoryError, match=r"history.jsonl:14: field 'type'"):
        ingest(spark, run)
    assert read_manifest(run)["rows"]["commits"] == 1


def test_a_run_directory_without_history_is_refused(spark, tmp_path):
    with pytest.raises(IngestError, match="no history.jsonl"):
        ingest(spark, tmp_path)
    with pytest.raises(IngestError, match="no such run directory"):
        ingest(spark, tmp_path / "missing")
