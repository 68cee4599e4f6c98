"""Admin lookups the nemesis resolves role targets with: bounded, so a
librdkafka handle that does not let go cannot stall the schedule."""

from __future__ import annotations

import gc
import threading

import pytest

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


def test_a_failed_lookup_leaves_no_open_client_for_the_garbage_collector():
    """A failed future's exception holds, through its traceback, the frame
    that held the AdminClient: a reference cycle. Were the client still
    open when a collection finds it inside librdkafka's background thread,
    its destroy would abort the process (admin_client); closed by the
    `with` block, collecting it anywhere is harmless."""
    from confluent_kafka.admin import AdminClient
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        # The request's own timeout (1 s) fails the future before the wait
        # (2 s) ends: the failure path, with its cycle.
        assert readiness.group_coordinator_id("127.0.0.1:9", "g", timeout=1.0) is None
        gc.collect()
        admins = [o for o in gc.garbage if isinstance(o, AdminClient)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert admins, "no AdminClient in a cycle: the case this guards is not exercised"
    for admin in admins:
        with pytest.raises(RuntimeError, match="closed"):
            admin.list_topics(timeout=0.1)
