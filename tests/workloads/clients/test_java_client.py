"""What only the Java client has, with real JVMs and a real broker: a
cluster that cannot be reached, a client JVM that is killed (kill -9) or
hangs (SIGSTOP) — in an adapter and in the queue workload, which goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

from cluster.broker_process import free_port
from history_analysis.history import HistoryWriter
from history_analysis.history.reader import HistoryReader
from workloads.clients import ClientSettings, Outcome, java, make_consumer, make_producer
from workloads import queue
from workloads.queue import Stats, run_queue
from workloads.queue_config import QueueConfig, Target

TIMEOUT = 30


def test_an_unreachable_cluster_fails_or_is_unknown_with_a_readable_error(clients):
    bootstrap = f"127.0.0.1:{free_port()}"     # nothing listens there
    settings = ClientSettings(max_block_ms=1000, default_api_timeout_ms=1500)
    p = make_producer("java", bootstrap, settings, "p-unreachable")
    c = make_consumer("java", bootstrap, settings, "c-unreachable", "g")
    clients += [p, c]

    def timed(operation, bound: float) -> Outcome:
        started = time.monotonic()
        outcome = operation()
        assert time.monotonic() - started < bound, outcome
        return outcome
    # The first operations of a client may start a JVM and warm it up
    # (java.WARM_UP_TIMEOUT: the cluster never answers it).
    first = 5 + java.WARM_UP_TIMEOUT
    sent = timed(lambda: p.send([("t", 0, 1), ("t", 0, 2)], 3), first + 2)
    # Never queued: the topic's metadata never came.
    assert sent.type == "fail", sent
    assert sent.error.startswith("REQUEST_TIMED_OUT: Topic t not present in metadata after "
                                 "1000 ms."), sent
    assert timed(lambda: c.assign([("t", 0)], True), first).type == "ok"    # local
    assert timed(lambda: c.poll(0.5), 3) == Outcome("ok", {"reads": [], "rebalances": []})
    # A commit retried until its timeout: `info`, as any unanswered commit.
    committed = timed(lambda: c.commit("g", [("t", 0, 1)]), 4)
    assert committed.type == "info" and committed.error.startswith("REQUEST_TIMED_OUT: ")
    for read in (timed(lambda: c.committed("g", [("t", 0)], 1), 3),
                 timed(lambda: c.end_offsets([("t", 0)], 1), 3)):
        assert read.type == "fail" and read.error.startswith("REQUEST_TIMED_OUT: "), read


def test_a_killed_jvm_ends_the_poll_in_flight_and_the_next_operation_as_info(broker, topic,
                                                                           clients):
    c = make_consumer("java", broker.bootstrap, ClientSettings(), "c-killed", None)
    clients.append(c)
    assert c.assign([(topic, 0)], True).type == "ok"
    assert c.poll(0.5).type == "ok"
    polled: list[Outcome] = []
    poller = threading.Thread(target=lambda: polled.append(c.poll(20)))
    poller.start()
    time.sleep(1.0)                         # the poll waits in the JVM for records
    pid = c.jvm.pid
    os.kill(pid, signal.SIGKILL)
    poller.join(10)
    assert not poller.is_alive(), "a poll outlived its JVM"
    assert polled[0].type == "info", polled
    assert polled[0].error.startswith(f"JVM_EXITED: the client's JVM (pid {pid}) exited "
                                      f"(signal SIGKILL)")
    assert c.end_offsets([(topic, 0)], 5).type == "info"


def test_a_killed_jvm_makes_the_next_send_info_and_a_new_client_works(broker, topic, clients):
    p = make_producer("java", broker.bootstrap, ClientSettings(), "p-killed")
    clients.append(p)
    assert p.send([(topic, 0, 1)], 10).type == "ok"
    os.kill(p.jvm.pid, signal.SIGKILL)
    p.jvm.process.wait(TIMEOUT)
    outcome = p.send([(topic, 0, 2)], 10)
    assert outcome == Outcome("info", {"sends": [
        {"topic": topic, "partition": 0, "value": 2, "offset": None}]}, outcome.error)
    assert outcome.error.startswith("JVM_EXITED: ")
    p.close()
    again = make_producer("java", broker.bootstrap, ClientSettings(), "p-again")
    clients.append(again)
    assert again.send([(topic, 0, 3)], 10).value["sends"][0]["offset"] == 1


def test_a_hung_jvm_is_killed_and_its_send_is_info(broker, topic, clients, monkeypatch):
    monkeypatch.setattr(java, "GRACE", 1.0)     # the wait past Kafka's own timeouts
    p = make_producer("java", broker.bootstrap, ClientSettings(max_block_ms=500), "p-hung")
    clients.append(p)
    assert p.send([(topic, 0, 1)], 10).type == "ok"
    process = p.jvm.process
    os.kill(process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        outcome = p.send([(topic, 0, 2)], 1.0)
        elapsed = time.monotonic() - started
        assert outcome.type == "info", outcome
        assert outcome.error.startswith("JVM_UNRESPONSIVE: no answer within 2.5 s; the client's "
                                        f"JVM (pid {process.pid}) was killed")
        # Bounded by its own 2.5 s, not by Kafka's timeouts nor forever (a
        # loaded machine adds seconds to the kill and the wait).
        assert 2.4 < elapsed < 20
        assert process.wait(TIMEOUT) == -signal.SIGKILL
    finally:
        # Never left stopped: a py4j finalizer that reaches a stopped JVM
        # blocks the test process for good (a whole suite hung on one).
        process.kill()


def test_the_queue_workload_goes_on_when_its_jvms_are_killed(broker, topic, tmp_path):
    config = QueueConfig(client="java", partitions=2, concurrency=2, rate=20,
                         consumer_mode="assign")
    path = tmp_path / "history.jsonl"
    history = HistoryWriter(path)
    failures: list[BaseException] = []

    def run() -> None:
        try:
            run_queue(config, Target(broker.bootstrap, (topic,), ("g",), seed=1), history,
                      25.0, Stats())
        except BaseException as e:  # noqa: BLE001 — asserted on below
            failures.append(e)

    def ok_slots() -> set[int]:
        return {e["process"] % 2 for e in map(json.loads, path.read_text().splitlines())
                if e["type"] == "ok"}

    runner = threading.Thread(target=run)
    runner.start()
    deadline = time.monotonic() + 15
    while ok_slots() != {0, 1} and time.monotonic() < deadline:
        time.sleep(0.2)
    assert ok_slots() == {0, 1}, "the workers did not start"
    # Every client JVM of this process, the workers' among them.
    pids = subprocess.run(["pgrep", "-P", str(os.getpid()), "-f", "py4j.GatewayServer"],
                          capture_output=True, text=True).stdout.split()
    for pid in pids:
        os.kill(int(pid), signal.SIGKILL)
    runner.join(60)
    history.close()
    assert not runner.is_alive() and not failures, failures
    events = list(HistoryReader(path))
    for slot in (0, 1):     # the producer's and the consumer's
        ends = [e for e in events if e["process"] % 2 == slot and e["type"] != "invoke"]
        crashed = [i for i, e in enumerate(ends)
                   if e["type"] == "info" and e["error"].startswith("JVM_EXITED: ")]
        assert crashed, f"slot {slot}: no operation ended by its JVM's death"
        after = ends[crashed[0] + 1:]
        assert any(e["type"] == "ok" and e["process"] > ends[crashed[0]]["process"]
                   for e in after), f"slot {slot} did not go on as a new process"


def test_a_consumer_whose_jvm_dies_before_its_assign_ends_its_process(broker, topic, tmp_path,
                                                                      monkeypatch):
    """The assign that starts a consumer process ends `info` when its JVM
    is gone: that process is over, and the next one starts (the suite once
    saw the old process poll on, a history the reader refuses)."""
    real, killed = queue.make_consumer, []

    def dead_on_arrival(*args, **kwargs):
        client = real(*args, **kwargs)
        if not killed:      # the JVM its first operation would use, killed
            client.jvm = java.jvms.acquire()
            killed.append(client.jvm.pid)
            os.kill(client.jvm.pid, signal.SIGKILL)
        return client
    monkeypatch.setattr(queue, "make_consumer", dead_on_arrival)
    path = tmp_path / "history.jsonl"
    history = HistoryWriter(path)
    config = QueueConfig(client="java", partitions=1, concurrency=2, rate=20,
                         consumer_mode="assign")
    run_queue(config, Target(broker.bootstrap, (topic,), ("g",), seed=1), history, 6.0, Stats())
    history.close()
    starts = [(e["process"], e["type"]) for e in HistoryReader(path)
              if e["f"] == "assign" and e["type"] != "invoke"]
    assert killed and starts[:2] == [(1, "info"), (3, "ok")], starts


def test_a_java_exception_stays_the_client_s_own_beside_pyspark(broker, clients, monkeypatch):
    """PySpark replaces py4j's answer handler for every gateway of the process
    (a `kchaos run` checks with Spark in it) with one that asks Spark's JVM
    about each Java exception, by an object id that means nothing there. In
    the suite Spark's JVM failed on the question, the client's JVM was
    killed as broken and a send that failed was `info`; whether it fails
    depends on the ids, so a handler that always fails stands in for it."""
    import py4j.java_gateway
    from py4j.protocol import Py4JError

    def foreign(*args, **kwargs):
        raise Py4JError("An error occurred while calling z:org.apache.spark.util.Utils."
                        "exceptionString")
    from workloads.clients import jvm
    # Both put back afterwards: the handler in front, and what it passes on to.
    monkeypatch.setattr(jvm, "_others_answer", jvm._others_answer)
    monkeypatch.setattr(py4j.java_gateway, "get_return_value", foreign)
    p = make_producer("java", broker.bootstrap, ClientSettings(max_block_ms=1000), "p-beside")
    clients.append(p)
    outcome = p.send([("no-such-topic", 0, 30)], 10)
    assert outcome.type == "fail", outcome
    assert "JVM" not in (outcome.error or ""), outcome
