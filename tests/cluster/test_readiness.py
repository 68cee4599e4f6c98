"""Admin lookups the nemesis resolves role targets with: bounded, so a
librdkafka handle that does not let go cannot stall the schedule."""

from __future__ import annotations

import threading

from cluster import readiness


def test_a_lookup_that_never_returns_answers_otherwise(monkeypatch):
    monkeypatch.setattr(readiness, "DESTROY_GRACE", 0.2)
    stuck = threading.Event()
    assert readiness.bounded(lambda: stuck.wait() or 2, 0.1, None) is None
    stuck.set()
    assert readiness.bounded(lambda: 2, 0.1, None) == 2


def test_lookups_with_nobody_listening_answer_that_nobody_knows():
    nobody = "127.0.0.1:9"      # discard: nothing of ours listens there
    assert readiness.group_coordinator_id(nobody, "g", timeout=1.0) is None
    assert readiness.partition_state(nobody, "t", 0, timeout=1.0) is None
    assert readiness.metadata_problem(nobody, {1}, 1.0).startswith("metadata failed")
