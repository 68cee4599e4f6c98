"""The report: the sections a run with anomalies, a clean run and an
unchecked run get; escaping; the size cap and the timeline's cut; a report
failure that leaves the verdict alone."""

from __future__ import annotations

import json
import logging
import re
import subprocess
import sys

import pytest

from history_analysis.report import build, write_report, write_report_quietly
from history_analysis.report.timeline import MAX_OPERATIONS
from tests.checkers.conftest import Ops
from tests.cli_support import kchaos_here
from tests.history_analysis.report.report_runs import T, anomalous, clean, write_run

PNG = b"\x89PNG\r\n\x1a\n"


def section(html: str, anchor: str) -> str:
    """The text of the section with this id, up to the next section."""
    start = html.index(f'id="{anchor}"')
    end = min([i for i in (html.find("<section", start + 1), html.find("<h2", start + 1))
               if i > 0] or [len(html)])
    return html[start:end]


@pytest.mark.spark
def test_a_run_with_anomalies_gets_every_section(anomalous_run):
    results = json.loads((anomalous_run / "results.json").read_text())
    assert {"lost-write", "duplicate", "unseen", "stale-committed-offset",
            "garbage-read"} <= set(results["counts"]), results["counts"]
    html = write_report(anomalous_run).read_text()
    assert 'class="verdict v-invalid">INVALID' in html
    verdict = section(html, "verdict")
    for type_ in results["invalid_types"]:
        assert f'href="#anomaly-{type_}"' in verdict
    facts = section(html, "run")
    for fact in ("kchaos run --seed 7", "no-fsync", "n1, n2, n3", "python 3.11"):
        assert fact in facts
    # Each type in words, with its cases and their history excerpts.
    lost = section(html, "anomaly-lost-write")
    assert "the record disappeared from the log" in lost
    assert ("value 2 was sent: acknowledged by process 1 at offset 1 at 0.06 s; "
            "offsets 2–8 of t-0 were read by processes 5 and 1000000; no read ever returned 2"
            ) in lost
    [case] = results["anomalies"]["lost-write"]
    for index in case["evidence"][:build.EVIDENCE_SHOWN]:
        assert re.search(rf'<span class="hit">\s*{index}  \{{', lost), index
    assert "value 7 is at offset 6 of t-0, offset 7 of t-0" in section(html, "anomaly-duplicate")
    unseen = section(html, "anomaly-unseen")
    assert "value 20 was sent: acknowledged by process 2 at offset 0" in unseen
    assert "the final reads read t-1 to its end, offset 0" in unseen
    assert ("group g committed offset 5 of t-0 (acknowledged); a later fetch of its committed "
            "offsets returned 3") in section(html, "anomaly-stale-committed-offset")
    # Faults: the table, the timeline image, availability per fault.
    faults = section(html, "faults")
    assert "<td>pause</td><td>n2</td>" in faults
    assert "<td>start-partition</td><td>n1, n2, n3</td>" in faults
    assert "Availability per fault" in faults and "pause n2" in faults
    for name in ("faults", "latency", "throughput", "unseen", "lag", "offsets-0"):
        assert f'src="plots/{name}.png"' in html
        assert (anomalous_run / "plots" / f"{name}.png").read_bytes().startswith(PNG)
    assert "<h3>t-0</h3>" in section(html, "offsets")
    timeline = section(html, "timeline")
    assert timeline.count('<div class="op ') == len(anomalous().events) // 2
    assert 'href="history.jsonl"' in section(html, "files")


@pytest.mark.spark
def test_everything_from_the_history_is_text(anomalous_run):
    html = write_report(anomalous_run).read_text()
    assert "<script" not in html.lower()
    assert "&lt;script&gt;window.pwned = 1;" in html          # the error string, as text
    garbage = section(html, "anomaly-garbage-read")
    assert "undecodable bytes &#x27;//48Yj4=&#x27;" in garbage    # raw, escaped


def test_a_clean_run_says_what_was_tested(tmp_path):
    run_dir = write_run(tmp_path / "clean", clean(), outcome=None)
    (run_dir / "results.json").write_text(json.dumps({
        "valid": True, "counts": {}, "anomalies": {}, "unknown": {}, "errors": [],
        "invalid_types": [], "allowed_types": []}))
    html = write_report(run_dir).read_text()
    assert 'class="verdict v-valid">VALID' in html
    # What the history alone was judged on: this one has no outcome.
    assert "no final reads were recorded with this history" in section(html, "verdict")
    test = json.loads((run_dir / "test.json").read_text())
    (run_dir / "test.json").write_text(json.dumps({**test, "outcome": {"final": {
        "ends": {f"{T}-0": 3, f"{T}-1": 4}, "reached": True}}}))
    html = write_report(run_dir).read_text()
    assert "the final reads reached the end of each of the 2 partition(s) they recorded" \
        in section(html, "verdict")
    assert "<p>None found.</p>" in section(html, "anomalies")
    assert 'id="offsets"' not in html
    assert "No fault was asked for in this run." in section(html, "faults")


def test_fault_starts_the_end_of_the_main_phase_cut_off_are_told(tmp_path):
    run_dir = write_run(tmp_path / "late", anomalous())
    test = json.loads((run_dir / "test.json").read_text())
    late = {"at": 30.0, "action": "start", "id": 4, "fault": {"fault": "disk", "mode": "stall"}}
    (run_dir / "test.json").write_text(json.dumps({**test, "outcome": {"dropped": [late]}}))
    faults = section(write_report(run_dir).read_text(), "faults")
    assert "1 planned fault start(s) never came: the main phase ended before them" in faults
    assert "disk at 30.0 s" in faults


def test_an_unchecked_run_is_reported_as_such(tmp_path):
    run_dir = write_run(tmp_path / "unchecked", clean())
    html = write_report(run_dir).read_text()
    assert 'class="verdict v-unchecked">NOT CHECKED' in html
    assert f"kchaos check {run_dir}" in html
    assert (run_dir / "history" / "ops").is_dir()              # ingested on the way


def test_the_timeline_is_cut_around_the_anomalies_and_the_page_stays_under_its_cap(
        tmp_path, monkeypatch):
    ops = Ops()
    for i in range(MAX_OPERATIONS + 5_000):
        ops.send(i % 8, T, 0, i, offsets=[i])
    run_dir = write_run(tmp_path / "big", ops)
    lost = ops.events.index(next(e for e in ops.events if e["type"] == "ok"
                                 and e["value"]["sends"][0]["value"] == 12_000))
    (run_dir / "results.json").write_text(json.dumps({
        "valid": False, "counts": {"lost-write": 1}, "invalid_types": ["lost-write"],
        "allowed_types": [], "unknown": {}, "errors": [],
        "anomalies": {"lost-write": [{"topic": T, "partition": 0, "value": 12_000,
                                      "offset": 12_000, "send_type": "ok",
                                      "evidence": [lost]}]}}))
    html = write_report(run_dir).read_text()
    timeline = section(html, "timeline")
    assert timeline.count('<div class="op ') == MAX_OPERATIONS
    assert f"{MAX_OPERATIONS:,} operations of {MAX_OPERATIONS + 5_000:,}" in timeline
    assert f"op {lost}: process" in timeline                    # the evidence is in view
    assert len(html.encode()) <= build.MAX_BYTES
    # A smaller cap: the timeline gets what the rest leaves, and says so.
    monkeypatch.setattr(build, "MAX_BYTES", 600_000)
    html = write_report(run_dir).read_text()
    assert len(html.encode()) <= 600_000
    assert "the page&#x27;s size cap (600,000 bytes) left room for" in html
    assert f"op {lost}: process" in section(html, "timeline")


def test_a_report_that_cannot_be_written_is_logged_and_returns_none(tmp_path, caplog):
    run_dir = tmp_path / "not-a-run"
    run_dir.mkdir()
    (run_dir / "history.jsonl").write_text('{"index": 0, "time": "soon"}\n')
    with caplog.at_level(logging.ERROR, logger="history_analysis.report"):
        assert write_report_quietly(run_dir) is None
    assert f"could not write the report of {run_dir}" in caplog.text
    assert not (run_dir / "report.html").exists()


def test_kchaos_report_writes_a_report_per_run_and_names_bad_ones(tmp_path):
    good = write_run(tmp_path / "good", clean())
    done = subprocess.run([sys.executable, "-m", "cli", "report", str(good),
                           str(tmp_path / "missing")], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stderr
    assert done.stdout.startswith(f"{good / 'report.html'} (")
    assert f"kchaos: error: {tmp_path / 'missing'}: no such run directory" in done.stderr
    assert (good / "report.html").is_file()


@pytest.mark.spark
def test_a_failing_report_changes_neither_the_verdict_nor_the_exit_code(anomalous_run,
                                                                        tmp_path):
    import shutil
    run_dir = tmp_path / "run"
    shutil.copytree(anomalous_run, run_dir, ignore=shutil.ignore_patterns("plots", "report*"))
    (run_dir / "plots").write_text("a file where the plots directory belongs")
    # In this process, beside the running session (a Spark of its own would
    # start for half a minute; tests/cli/test_cli.py runs the command in
    # a process of its own).
    done = kchaos_here("check", str(run_dir))
    assert done.returncode == 1, done.stderr                    # invalid, as before
    assert f"{run_dir}: INVALID" in done.stdout
    assert (f"report: none (writing it failed; the verdict stands; see the log, or run "
            f"kchaos report {run_dir})") in done.stdout
    assert json.loads((run_dir / "results.json").read_text())["valid"] is False


def test_a_stale_end_is_told_with_its_epochs_when_they_are_known():
    from history_analysis.report.explain import sentence
    case = {"topic": T, "partition": 0, "offset": 4, "end_offset": 3}
    plain = sentence("stale-end", {**case, "read_epoch": None, "end_epoch": None}, None)
    assert plain == f"a poll had read offset 4 of {T}-0; the end-offsets asked after it " \
                    "answered 3"
    told = sentence("stale-end", {**case, "read_epoch": 1, "end_epoch": 2}, None)
    assert "appended in leader epoch 1" in told and "from the leader of epoch 2" in told


def test_a_stuck_last_stable_offset_is_told_with_what_held_it():
    from history_analysis.report.explain import held_by
    entry = {"topic": T, "partition": 0, "producer_id": 7, "producer_epoch": 2,
             "first_offset": 12, "transactional_id": "kchaos-t0-tx1",
             "coordinator": {"state": "CompleteAbort", "producer_epoch": 3, "partitions": []}}
    told = held_by([entry], T, 0)
    assert "producer 7 epoch 2 (kchaos-t0-tx1) holds a transaction open from offset 12" in told
    assert "its coordinator has it CompleteAbort at epoch 3 over no partitions" in told
    unknown = held_by([{**entry, "transactional_id": None, "coordinator": None}], T, 0)
    assert "producer 7 epoch 2 holds" in unknown and "no coordinator lists it" in unknown
    assert "named no open transaction there" in held_by([entry], T, 1)
    assert held_by([{"error": "KafkaTimeoutError"}], T, 0) == \
        "; asking who held it failed: KafkaTimeoutError"
    assert held_by(None, T, 0) == ""        # the run did not ask
