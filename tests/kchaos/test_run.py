"""`kchaos run` end to end: a local 3-node reference cluster, real clients,
the history, the final reads and the checks — clean runs, seeds, an
external cluster and a broker killed by hand. (A bug switch found, and the
same run without it valid: the validation matrix, tests/validation/test_matrix.py.)"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections import Counter, defaultdict

import pytest
from confluent_kafka.admin import AdminClient

from cluster.local_cluster import LocalCluster
from history_analysis.history import validate_history
from kchaos.config import TestConfig
from kchaos.progress import Progress
from validation.profiles import FAST_BROKERS
from kchaos.run import run_and_check, run_test
from workloads.clients import ClientSettings

pytestmark = pytest.mark.spark
pytest_plugins = ["pytester"]       # the plugin's own test runs a user's suite



def events(run_dir) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]


def completions(run_dir) -> Counter:
    return Counter((e["f"], e["type"]) for e in events(run_dir) if e["type"] != "invoke")


@pytest.mark.slow
def test_a_clean_30_second_run_is_valid(kchaos):
    """Through the pytest plugin's fixture, as a user's suite would."""
    result = kchaos(time_limit=30, seed=1, crash_clients_every=8, concurrency=6, rate=300,
                    broker_config=FAST_BROKERS, recovery_time=2)
    assert result.valid is True, (result.counts, result.run_dir)
    done = completions(result.run_dir)
    sends = done[("send", "ok")]
    reads = sum(len(e["value"]["reads"]) for e in events(result.run_dir)
                if e["f"] == "poll" and e["type"] == "ok")
    # A floor on work done, not a throughput target (those live in
    # benchmarks/): the rate asks for 9000 sends; a loaded CI worker has
    # delivered under 2000, so only a run that barely worked fails here.
    assert sends >= 1000 and reads >= 1000, (sends, reads)
    assert done[("assign", "ok")] and done[("subscribe", "ok")]
    assert done[("commit", "ok")] and done[("committed", "ok")] and done[("crash", "info")]
    assert result.outcome.final["reached"] is True
    test_json = json.loads((result.run_dir / "test.json").read_text())
    assert test_json["seed"] == 1 and test_json["nodes"] == ["n1", "n2", "n3"]
    assert test_json["config"]["workload"]["client_settings"]["acks"] == "all"
    assert sorted(p.name for p in (result.run_dir / "nodes").iterdir()) == ["n1", "n2", "n3"]
    assert (result.run_dir / "results.json").is_file()


def test_several_records_per_send_go_to_one_partition_in_batches_of_one(tmp_path, spark):
    config = TestConfig.build(seed=3, time_limit=6, store=tmp_path, records_per_send=4,
                              partitions=3, client_settings=ClientSettings(batch_size=1),
                              broker_config=FAST_BROKERS, recovery_time=0, final_time_limit=30)
    result = run_and_check(config, spark, progress=Progress.quiet())
    assert result.valid is True, (result.counts, result.run_dir)
    sends = [e["value"]["sends"] for e in events(result.run_dir)
             if e["f"] == "send" and e["type"] == "ok"]
    assert len(sends) > 50
    for records in sends:
        assert len(records) == 4 and len({(s["topic"], s["partition"]) for s in records}) == 1
        values = [s["value"] for s in records]
        assert values == list(range(values[0], values[0] + 4))
        offsets = [s["offset"] for s in records]
        assert offsets == sorted(offsets) and None not in offsets


def decisions(run_dir, concurrency: int) -> dict[int, list]:
    """Per worker slot, what it chose to invoke: the records of its sends,
    the kinds of its other operations (a commit with nothing to commit
    becomes a committed read, so the two count as one choice)."""
    chosen = defaultdict(list)
    for e in events(run_dir):
        if e["type"] != "invoke" or e.get("phase") == "final" or e["process"] < 0:
            continue
        slot = e["process"] % concurrency
        if e["f"] == "send":
            chosen[slot] += [(s["topic"], s["partition"], s["value"]) for s in e["value"]["sends"]]
        else:
            chosen[slot].append("commit/committed" if e["f"] in ("commit", "committed")
                                else e["f"])
    return chosen


@pytest.mark.slow
def test_the_same_seed_invokes_the_same_operations(tmp_path):
    runs = []
    for n in range(2):
        config = TestConfig.build(seed=42, time_limit=8, store=tmp_path / f"s{n}", rate=150,
                                  crash_clients_every=3, broker_config=FAST_BROKERS,
                                  recovery_time=0, final_time_limit=30)
        runs.append(decisions(run_test(config, Progress.quiet()).run_dir,
                              config.workload.concurrency))
    first, second = runs
    assert sorted(first) == sorted(second) == list(range(6))
    for slot in first:
        common = min(len(first[slot]), len(second[slot]))
        assert common >= 20, f"slot {slot} made only {common} choices"
        assert first[slot][:common] == second[slot][:common], f"slot {slot} diverged"
    other = TestConfig.build(seed=43, time_limit=4, store=tmp_path / "s2", rate=150,
                             broker_config=FAST_BROKERS, recovery_time=0, final_time_limit=30)
    third = decisions(run_test(other, Progress.quiet()).run_dir, other.workload.concurrency)
    assert third[0][:20] != first[0][:20], "another seed, other choices"


def test_external_cluster(tmp_path, spark):
    with LocalCluster(tmp_path / "theirs", 3, config=FAST_BROKERS) as theirs:
        config = TestConfig.build(db="external", bootstrap=theirs.bootstrap, time_limit=10,
                                  store=tmp_path / "store", recovery_time=1)
        result = run_and_check(config, spark, progress=Progress.quiet())
        topics = AdminClient({"bootstrap.servers": theirs.bootstrap}).list_topics(
            timeout=10).topics
    assert result.valid is True, (result.counts, result.run_dir)
    # Names unique to the run: an earlier run's records stay out of this one.
    [topic] = json.loads((result.run_dir / "test.json").read_text())["topics"]
    assert re.fullmatch(r"kchaos-t0-\d{8}T\d{6}", topic) and topic in topics
    assert not (result.run_dir / "nodes").exists()   # nothing of theirs to collect


def broker_pids(store, node: str, data: str = "data") -> list[int]:
    """The reference broker's (or with data="controller", the controller's)."""
    found = subprocess.run(["pgrep", "-f", "--", f"--data-dir {store}/.*/scratch/{node}/{data}"],
                           capture_output=True, text=True)
    return [int(pid) for pid in found.stdout.split()]


def when_brokers_run(store, nodes: list[str], timeout: float = 60) -> dict[str, int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = {node: broker_pids(store, node) for node in nodes}
        if all(len(p) == 1 for p in pids.values()):
            return {node: p[0] for node, p in pids.items()}
        time.sleep(0.2)
    raise AssertionError(f"brokers {nodes} not running under {store}")


def when_main_phase_runs(store, ops: int = 50, timeout: float = 60) -> None:
    """Wait for the workload's first operations: a broker killed during setup
    would be restarted by setup's heal-all, silently (a busy machine's setup
    can outlast any fixed sleep)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for history in store.glob("*/*/history.jsonl"):   # store/WORKLOAD/RUN
            if history.read_text().count("\n") >= ops:
                return
        time.sleep(0.2)
    raise AssertionError(f"no run under {store} reached {ops} operations")


class KillOnEntering(Progress):
    """Quiet progress that kills a process by hand as the run enters a phase."""

    def __init__(self, phase: str, pid):
        super().__init__(live=False)
        self.at, self.pid = phase, pid

    def phase(self, name: str, stats=None) -> None:
        super().phase(name, stats)
        if name == self.at:
            subprocess.run(["kill", "-9", str(self.pid())], check=True)


@pytest.mark.slow
def test_daemons_killed_by_hand_are_reported_whenever_they_die(tmp_path, spark):
    """n2's broker dies in the main phase; n1's controller as the recovery
    begins, after the main phase's last look and before the teardown's
    heal-all starts it again. Both are node failures: the run is unknown."""
    store = tmp_path / "store"
    config = TestConfig.build(time_limit=15, store=store, broker_config=FAST_BROKERS,
                              recovery_time=2)

    def kill_n2():
        pid = when_brokers_run(store, ["n2"])["n2"]
        when_main_phase_runs(store)
        subprocess.run(["kill", "-9", str(pid)], check=True)

    killer = threading.Thread(target=kill_n2)
    killer.start()
    controller = KillOnEntering("recovery", lambda: broker_pids(store, "n1", "controller")[0])
    result = run_and_check(config, spark, progress=controller)
    killer.join()
    assert [re.sub(r", \d+ s into", ", _ s into", f) for f in result.outcome.node_failures] == [
        "n2: the broker died unasked in the main phase, _ s into the run",
        "n1: the controller died unasked in the recovery phase, _ s into the run"]
    assert result.outcome.final["reached"] is True
    history = events(result.run_dir)
    assert [e["index"] for e in history] == list(range(len(history)))
    report = validate_history(result.run_dir / "history.jsonl")   # well-formed to the end
    assert report.truncated is None and not report.unmatched
    # acks=all with three replicas: one broker down loses nothing; but a
    # broker that died unasked means the run did not test what it meant to.
    assert result.counts == {}, (result.counts, result.run_dir)
    assert result.valid == "unknown"
    assert set(result.suite.result.unknown) == {"node-failures"}


def test_a_failing_test_names_its_runs_and_their_reports(pytester):
    """The pytest plugin in a suite of its own (a pytest subprocess, as a
    user runs it): a test that runs kchaos and then fails gets a "kchaos
    runs" section with the run's verdict and its report, and the report
    path as a property in --junitxml."""
    pytester.makepyfile(test_user_suite=f"""
        def test_fails_after_a_run(kchaos):
            result = kchaos(time_limit=2, seed=5, concurrency=2, recovery_time=0,
                            broker_config={FAST_BROKERS!r}, subnet="198.18.7.0/24")
            assert result.report is not None and result.report.is_file()
            assert False, "the user's own assertion"
    """)
    outcome = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--junitxml=junit.xml",
                                            timeout=300)
    outcome.assert_outcomes(failed=1)
    output = outcome.stdout.str()
    assert "kchaos runs" in output, output
    run_line = re.search(r"^(\S+/store/queue/\d{8}T\d{6}): valid$", output, re.M)
    assert run_line, output
    report = f"{run_line.group(1)}/report.html"
    assert f"  report: {report}" in output
    junit = (pytester.path / "junit.xml").read_text()
    assert f'<property name="kchaos_report" value="{report}" />' in junit
