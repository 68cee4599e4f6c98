"""The nemesis thread when a fault never finishes applying: the run must go
on, heal, and keep a valid history (one operation at a time for process
-1), and say where the script was stuck.

A fault stuck for minutes (a `docker exec` into a node whose disk is
stalled, in one CI run) cannot be produced on demand, so the stuck fault
here is a stand-in whose start blocks until the test releases it; the
history writer and the history reader are the real ones."""

from __future__ import annotations

import threading

from history_analysis.history.reader import HistoryReader
from history_analysis.history.writer import HistoryWriter
from nemesis.runner import Nemesis, NemesisThread


class Stuck:
    """A fault whose start blocks until `release` is set."""
    start_f, stop_f = "kill", "restart"

    def __init__(self):
        self.release = threading.Event()

    def asked(self) -> dict:
        return {"targets": "coordinator"}

    def start(self, cluster, rng) -> dict:
        self.release.wait(30)
        return {"targets": "coordinator", "nodes": ["n3"]}

    def stop(self, cluster) -> dict:
        return {"nodes": ["n3"]}


class Instant(Stuck):
    start_f, stop_f = "start-partition", "stop-partition"

    def start(self, cluster, rng) -> dict:
        return {"kind": "halves"}


def test_a_stuck_fault_is_abandoned_and_the_history_stays_valid(tmp_path, caplog):
    path = tmp_path / "history.jsonl"
    stuck = Stuck()
    with HistoryWriter(path) as history:
        nemesis = Nemesis(cluster=None, history=history)
        thread = NemesisThread(nemesis, lambda n: n.start(stuck))
        thread.start()
        thread.finish(timeout=0.5)
        # The main thread goes on as process -1: it stops a fault and heals.
        partition = Instant()
        assert nemesis.start(partition) == {"kind": "halves"}
        nemesis.stop(partition)
        stuck.release.set()                 # the stuck start completes late: dropped
        thread._thread.join(10)
        assert not thread._thread.is_alive()
    events = list(HistoryReader(path))       # raised HistoryError before
    assert [(e["type"], e["f"]) for e in events] == [
        ("invoke", "kill"), ("info", "kill"), ("invoke", "start-partition"),
        ("info", "start-partition"), ("invoke", "stop-partition"), ("info", "stop-partition")]
    assert "still applying it 0.5 s after the main phase ended" in events[1]["error"]
    assert isinstance(thread.error, TimeoutError)
    assert "stuck in" in str(thread.error) and "test_runner.py" in str(thread.error)
    assert "release.wait" in caplog.text and "dropped info kill" in caplog.text
    assert [e["f"] for e in nemesis.realised] == ["kill", "start-partition", "stop-partition"]


def test_a_script_that_finishes_in_time_is_not_abandoned(tmp_path):
    path = tmp_path / "history.jsonl"
    with HistoryWriter(path) as history:
        nemesis = Nemesis(cluster=None, history=history)
        thread = NemesisThread(nemesis, lambda n: n.start(Instant()))
        thread.start()
        thread.finish(timeout=10)
        nemesis.stop(nemesis.active[0])     # the main thread's records still count
    assert thread.error is None
    assert [(e["type"], e["f"]) for e in HistoryReader(path)] == [
        ("invoke", "start-partition"), ("info", "start-partition"),
        ("invoke", "stop-partition"), ("info", "stop-partition")]
