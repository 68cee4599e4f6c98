"""The history writer: concurrent appends, durability across SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from history_analysis.history import HistoryWriter, validate_history


def test_concurrent_writers_produce_a_valid_history(tmp_path):
    path = tmp_path / "history.jsonl"
    threads, ops = 8, 500
    with HistoryWriter(path) as writer:
        def worker(process: int) -> None:
            for i in range(ops):
                value = process * ops + i
                asked = {"sends": [{"topic": "t", "partition": i % 3, "value": value,
                                    "offset": None}]}
                writer.append(process, "invoke", "send", asked)
                done = {"sends": [{**asked["sends"][0], "offset": i}]}
                writer.append(process, "ok", "send", done)
        workers = [threading.Thread(target=worker, args=(p,)) for p in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    report = validate_history(path)
    assert report.events == threads * ops * 2
    assert report.operations[("send", "ok")] == threads * ops
    assert report.unmatched == [] and report.truncated is None
    lines = path.read_text().splitlines()
    # Each process's own events keep their program order.
    for process in range(threads):
        values = [json.loads(line)["value"]["sends"][0]["value"] for line in lines
                  if json.loads(line)["process"] == process]
        assert values == sorted(values)


def test_index_time_and_optional_fields(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path, start_ns=time.monotonic_ns() - 1_000) as writer:
        writer.append(3, "invoke", "poll", {}, phase="final")
        writer.append(3, "info", "poll", {}, error="timed out", phase="final")
    first, second = (json.loads(line) for line in path.read_text().splitlines())
    assert list(first)[:2] == ["index", "time"]
    assert (first["index"], second["index"]) == (0, 1)
    assert 1_000 <= first["time"] <= second["time"]
    assert second["error"] == "timed out" and second["phase"] == "final"
    assert "error" not in first


def test_refuses_to_overwrite_a_history(tmp_path):
    path = tmp_path / "history.jsonl"
    path.write_text("")
    with pytest.raises(FileExistsError, match="already exists"):
        HistoryWriter(path)


def test_append_after_close_is_an_error(tmp_path):
    writer = HistoryWriter(tmp_path / "history.jsonl")
    writer.close()
    writer.close()  # idempotent
    with pytest.raises(ValueError, match="closed"):
        writer.append(0, "invoke", "poll", {})


def test_unencodable_value_is_refused_at_append(tmp_path):
    with HistoryWriter(tmp_path / "history.jsonl") as writer:
        with pytest.raises(ValueError):
            writer.append(0, "invoke", "poll", {"x": float("nan")})
    assert (tmp_path / "history.jsonl").read_text() == ""


KILLED_WRITER = textwrap.dedent("""
    import sys, threading
    from history_analysis.history import HistoryWriter
    writer = HistoryWriter(sys.argv[1], fsync_interval=0.05)
    def worker(process):
        i = 0
        while True:
            value = process * 10**9 + i
            sends = [{"topic": "t", "partition": 0, "value": value, "offset": None}]
            writer.append(process, "invoke", "send", {"sends": sends})
            writer.append(process, "ok", "send", {"sends": [dict(sends[0], offset=i)]})
            i += 1
    for p in range(4):
        threading.Thread(target=worker, args=(p,), daemon=True).start()
    print("writing", flush=True)
    threading.Event().wait()
""")


def test_sigkill_mid_run_leaves_a_readable_history(tmp_path):
    path = tmp_path / "history.jsonl"
    child = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(path)],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "writing"
        deadline = time.monotonic() + 30
        while path.stat().st_size < 200_000 and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    report = validate_history(path)
    assert report.events > 500
    # Killed mid-operation: at most one invocation per process is left open.
    assert len(report.unmatched) <= 4
    assert all(u.f == "send" for u in report.unmatched)
