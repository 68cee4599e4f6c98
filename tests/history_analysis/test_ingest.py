"""Ingest: a hand-written history → exactly the expected rows in each table."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from history_analysis.history import HistoryError
from history_analysis.ingest import (IngestError, ingest, read_manifest, tables_are_stale,
                                     tables_from_events)
from history_analysis.tables import TABLES

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
    (1, "ok", "poll", {"reads": [{"topic": "t", "partition": 0, "offset": 5, "value": 11,
                                  "epoch": 2},
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
    (6, "ok", "end-offsets", {"offsets": [{"topic": "t", "partition": 0, "offset": 7,
                                           "epoch": 3},
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


def rows(run_dir, table):
    frame = pq.read_table(run_dir / "history" / table)
    assert frame.column_names == TABLES[table].columns
    return [tuple(r.values()) for r in frame.to_pylist()]


def test_every_table_has_exactly_the_expected_rows(tmp_path):
    run = write_history(tmp_path / "run", EVENTS, tail='{"index":21,"time":2')
    result = ingest(run)
    assert result.events == 21 and result.unmatched == 1 and result.truncated_line == 22

    # Every table: op_index, invoke_index, invoke_time, time, process, type,
    # phase, then its own columns (ops: f, error, committing: a txn's only);
    # rows in history order of the completions.
    assert rows(run, "ops") == [
        (2, 0, 0, 20, 0, "ok", "main", "send", None, None),
        (3, 1, 10, 30, 1, "ok", "main", "assign", None, None),
        (6, 4, 40, 60, -1, "info", "main", "kill", None, None),
        (7, 5, 50, 70, 2, "ok", "main", "subscribe", None, None),
        (10, 8, 80, 100, 1, "ok", "main", "poll", None, None),
        (11, 9, 90, 110, 2, "info", "main", "poll", "session timed out", None),
        (13, 12, 120, 130, 3, "ok", "main", "commit", None, None),
        (15, 14, 140, 150, 4, "ok", "main", "committed", None, None),
        (17, 16, 160, 170, 5, "fail", "main", "send", "invalid config", None),
        (19, 18, 180, 190, 6, "ok", "final", "end-offsets", None, None),
        (20, 20, 200, None, 7, "info", "main", "send", None, None),
    ]
    envelope = {2: (2, 0, 0, 20, 0, "ok", "main"), 17: (17, 16, 160, 170, 5, "fail", "main"),
                20: (20, 20, 200, None, 7, "info", "main")}
    assert rows(run, "sends") == [
        (*envelope[2], 0, "t", 0, 11, 5),
        (*envelope[2], 1, "t", 1, 12, 7),
        (*envelope[17], 0, "t", 1, 13, None),
        (*envelope[20], 0, "t", 0, 14, None),
    ]
    poll = (10, 8, 80, 100, 1, "ok", "main")
    assert rows(run, "reads") == [(*poll, 0, "t", 0, 5, 11, None, 2),
                                  (*poll, 1, "t", 0, 6, None, "eHl6", None)]
    assert rows(run, "commits") == [(13, 12, 120, 130, 3, "ok", "main", "g", "t", 1, 8)]
    fetch = (15, 14, 140, 150, 4, "ok", "main", "g")
    assert rows(run, "committed") == [(*fetch, "t", 0, None), (*fetch, "t", 1, 8)]
    assign, subscribe = (3, 1, 10, 30, 1, "ok", "main"), (7, 5, 50, 70, 2, "ok", "main")
    rebalance = (11, 9, 90, 110, 2, "info", "main")
    assert rows(run, "assignments") == [
        (*assign, "assign", None, "t", 0),
        (*subscribe, "subscribe", "g", "t", None),
        (*subscribe, "subscribe", "g", "u", None),
        (*rebalance, "assigned", "g", "t", 1),
        (*rebalance, "assigned", "g", "u", 0),
    ]
    nemesis = rows(run, "nemesis")
    assert [r[:8] for r in nemesis] == [(6, 4, 40, 60, -1, "info", "main", "kill")]
    assert json.loads(nemesis[0][8]) == {"nodes": ["n1"], "killed": True}
    ends = (19, 18, 180, 190, 6, "ok", "final")
    # isolation: null, the client's own (an end asked under a level names it)
    assert rows(run, "end_offsets") == [(*ends, None, "t", 0, 7, 3),
                                        (*ends, None, "t", 1, 8, None)]

    manifest = read_manifest(run)
    assert manifest["rows"] == {"ops": 11, "sends": 4, "reads": 2, "commits": 1,
                                "committed": 2, "assignments": 5, "end_offsets": 2,
                                "nemesis": 1}


def test_ingest_is_idempotent(tmp_path):
    run = write_history(tmp_path / "run", EVENTS)
    first = ingest(run)
    before = rows(run, "sends")
    second = ingest(run)
    assert first.rows == second.rows
    assert rows(run, "sends") == before
    assert sorted(p.name for p in (run / "history").iterdir()) == sorted(
        [*TABLES, "_ingest.json"])
    assert [p.name for p in run.iterdir() if p.name.startswith(".history")] == []


def test_tables_of_an_older_layout_are_stale(tmp_path):
    run = write_history(tmp_path / "run", EVENTS)
    ingest(run)
    assert not tables_are_stale(run)
    manifest_path = run / "history" / "_ingest.json"
    manifest = json.loads(manifest_path.read_text())
    # As ingested before reads had their epoch column.
    manifest["layout"]["reads"].remove("epoch")
    manifest_path.write_text(json.dumps(manifest))
    assert tables_are_stale(run)
    del manifest["layout"]
    manifest_path.write_text(json.dumps(manifest))
    assert tables_are_stale(run)
    ingest(run)
    assert not tables_are_stale(run)


def test_a_malformed_history_is_refused_and_old_tables_are_kept(tmp_path):
    run = write_history(tmp_path / "run", EVENTS)
    ingest(run)
    broken = (run / "history.jsonl").read_text().replace('"type": "ok", "f": "commit"',
                                                         '"type": "okay", "f": "commit"')
    (run / "history.jsonl").write_text(broken)
    with pytest.raises(HistoryError, match=r"history.jsonl:14: field 'type'"):
        ingest(run)
    assert read_manifest(run)["rows"]["commits"] == 1
    assert [p.name for p in run.iterdir() if p.name.startswith(".history")] == []


def test_a_run_directory_without_history_is_refused(tmp_path):
    with pytest.raises(IngestError, match="no history.jsonl"):
        ingest(tmp_path)
    with pytest.raises(IngestError, match="no such run directory"):
        ingest(tmp_path / "missing")


def test_blocks_carry_outstanding_operations_and_ended_processes(tmp_path, monkeypatch):
    """Blocks far smaller than the history: operations completed blocks
    after their invocation, and a process ended in one block and reused in
    a later one is refused there, at its line."""
    import history_analysis.ingest as module
    monkeypatch.setattr(module, "BLOCK_BYTES", 256)
    run = write_history(tmp_path / "run", EVENTS)
    whole = ingest(run)
    assert whole.rows["ops"] == 11 and whole.unmatched == 1
    assert rows(run, "reads")[1][-2] == "eHl6"
    events = EVENTS[:-1] + [(2, "invoke", "poll", {}, {})]   # process 2 ended (info poll)
    write_history(run, events)
    with pytest.raises(HistoryError, match=r"history.jsonl:21: field 'process': expected a "
                                           r"process that has not ended"):
        ingest(run)


def test_valid_lines_arrow_refuses_are_parsed_by_python(tmp_path):
    """JSON that Python's reader takes and Arrow's does not: a key written
    twice (the last wins) and an escaped key. The exact validator passes the
    block, so it is parsed line by line instead — same tables."""
    run = write_history(tmp_path / "run", EVENTS)
    plain = ingest(run)
    text = (run / "history.jsonl").read_text().splitlines()
    text[0] = text[0].replace('"time": 0,', '"time": 7, "time": 0,')
    text[4] = text[4].replace('"process": -1', '"\\u0070rocess": -1')
    (run / "history.jsonl").write_text("\n".join(text) + "\n")
    again = ingest(run)
    assert again.rows == plain.rows
    assert rows(run, "ops")[0] == (2, 0, 0, 20, 0, "ok", "main", "send", None, None)
    assert [r[7] for r in rows(run, "nemesis")] == ["kill"]


def test_tables_from_events_are_the_tables_ingest_writes(tmp_path):
    """The in-memory entry point runs the same validation and pairing."""
    run = write_history(tmp_path / "run", EVENTS)
    ingest(run)
    events = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    tables = tables_from_events(events)
    assert list(tables) == list(TABLES)
    for name, table in tables.items():
        assert table.schema == TABLES[name].schema
        assert table.to_pylist() == pq.read_table(run / "history" / name).to_pylist(), name
    events[13]["type"] = "okay"
    with pytest.raises(HistoryError, match=r"^<events>:14: field 'type': expected one of"):
        tables_from_events(events)
