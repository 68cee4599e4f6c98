"""`kchaos run` with every fault on a seeded schedule, on the correct
broker: the faults happen (each verb's completion is `info`, with the
nodes it hit), the history follows the plan written into test.json, the
cluster is healed, and the verdict is valid."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from kchaos.config import TestConfig
from kchaos.progress import Progress
from validation.profiles import FAST_BROKERS
from kchaos.run import nemesis_plan, run_and_check
from nemesis.schedule import DEFAULT_MIX
from tests.kchaos.plans import first_seed, invocations, no_false_alarm

pytestmark = [pytest.mark.root, pytest.mark.spark,
              pytest.mark.skipif(os.geteuid() != 0, reason="faults need root")]

BROKERS = [*FAST_BROKERS, "min.insync.replicas=2"]


EVERY_KIND = list(DEFAULT_MIX)


@pytest.mark.slow
def test_every_fault_on_a_schedule_is_applied_healed_and_valid(tmp_path, spark):
    """With transactions and an exactly-once pipeline (consume-transform-
    produce), so transactions commit, abort and are fenced under every
    fault; the plain workload's every-fault runs are the backends' and
    Kafka's (test_docker_run.py, test_kafka_run.py)."""
    settings = dict(time_limit=45, nemesis=EVERY_KIND, nemesis_interval=4)
    seed = first_seed(lambda faults: {"partition", "pause", "kill", "packet-loss", "failover"}
                      <= {f["fault"] for f in faults}
                      and {"all"} <= {f.get("targets") for f in faults if f["fault"] == "kill"}
                      and any(f["fault"] == "disk" and f["mode"] != "lose-unsynced"
                              for f in faults), **settings)
    config = TestConfig.build(seed=seed, store=tmp_path, broker_config=BROKERS,
                              recovery_time=3, final_time_limit=90, transactions=True,
                              pipeline=True, **settings)
    result = run_and_check(config, spark, progress=Progress.quiet())
    run_dir = result.run_dir
    stats = json.loads((run_dir / "results.json").read_text())["stats"]
    # Under every fault on a loaded machine, a few dozen transactions.
    assert stats["transactions"]["transactions"] > 0, stats
    assert stats["pipeline"]["transactions"] > 0, stats
    test_json = json.loads((run_dir / "test.json").read_text())
    steps = nemesis_plan(config)
    assert test_json["nemesis_plan"] == [s.to_json() for s in steps]

    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    nemesis = [e for e in events if e["process"] == -1]
    invoked = [e for e in nemesis if e["type"] == "invoke" and e["f"] != "heal"]
    # The plan's starts and stops, in order, were the nemesis's invocations.
    planned = [verb for s in steps for verb in invocations(s)]
    assert [e["f"] for e in invoked][:len(planned)] == planned
    applied = {e["f"] for e in nemesis if e["type"] == "info"}
    wanted = {"start-partition", "stop-partition", "pause", "resume", "kill", "restart",
              "packet-loss", "stop-packet-loss", "heal"}
    assert wanted <= applied, sorted(applied)
    assert applied & {"stall-disk", "disk-errors", "lose-unsynced"}, sorted(applied)
    assert not [e for e in nemesis if e["type"] == "fail"]
    assert test_json["outcome"]["nemesis"] == [
        {k: e[k] for k in ("f", "type", "value")} for e in nemesis if e["type"] != "invoke"]

    assert result.outcome.heal_problems == [] and result.outcome.nemesis_error is None
    assert result.outcome.node_failures == []
    assert result.outcome.final["reached"] is True, (result.outcome.final, run_dir)
    no_false_alarm(result)
    # Nothing left behind: no namespace of ours, no mount under the run.
    assert "kchaos-n" not in subprocess.run(["ip", "netns", "list"], capture_output=True,
                                            text=True).stdout
    assert str(run_dir) not in open("/proc/mounts").read()


@pytest.mark.slow
@pytest.mark.parametrize("synced", [False, True], ids=["acknowledged-before-fsync",
                                                       "flush-every-message"])
def test_a_power_loss_on_every_node_loses_acknowledged_records_unless_each_is_synced(
        tmp_path, spark, synced):
    """Kafka acknowledges before fsync: losing every node's unsynced writes
    at once loses acknowledged records on the correct broker, which is why
    power-loss is opt-in. With every write synced (flush.messages=1, here
    the broker-wide log.flush.interval.messages, so __consumer_offsets too)
    nothing is lost."""
    settings = dict(time_limit=15, nemesis=["power-loss"], nemesis_interval=3)
    seed = first_seed(lambda faults: [f["targets"] for f in faults] == ["all"], **settings)
    config = TestConfig.build(
        seed=seed, store=tmp_path, recovery_time=3, final_time_limit=60,
        broker_config=BROKERS + (["log.flush.interval.messages=1"] if synced else []),
        **settings)
    result = run_and_check(config, spark, progress=Progress.quiet())
    losses = [e for e in result.outcome.nemesis if e["f"] == "lose-unsynced"]
    assert losses and losses[0]["type"] == "info", result.outcome.nemesis
    assert losses[0]["value"]["nodes"] == ["n1", "n2", "n3"]
    if synced:
        assert result.valid is True, (result.counts, result.run_dir)
    else:
        assert result.valid is False, (result.counts, result.run_dir)
        # What a power cut takes varies from run to run: acknowledged
        # records, or acknowledged commits (records of __consumer_offsets,
        # unsynced as well), which show as committed offsets gone back.
        assert {"lost-write", "unseen", "inconsistent-offsets",
                "stale-committed-offset"} & set(result.counts), result.counts


@pytest.mark.slow
def test_a_controller_on_a_node_of_its_own_is_split_and_paused_apart_from_the_brokers(
        tmp_path, spark):
    """--controller-node: the controller alone on n4, the brokers on n1-n3;
    `halves` then puts it with one broker, and a pause of the `controller`
    target stops it and no broker. Valid on the correct broker."""
    settings = dict(time_limit=20, nemesis=["partition", "pause", "kill"], nemesis_interval=3,
                    controller_node=True)
    seed = first_seed(lambda faults: {("partition", "halves"), ("pause", "controller")}
                      <= {(f["fault"], f.get("kind", f.get("targets"))) for f in faults},
                      **settings)
    config = TestConfig.build(seed=seed, store=tmp_path, broker_config=BROKERS, recovery_time=3,
                              final_time_limit=60, **settings)
    result = run_and_check(config, spark, progress=Progress.quiet())
    no_false_alarm(result)
    nodes = result.run_dir / "nodes"
    assert sorted(p.name for p in (nodes / "n4").glob("*.log")) == ["controller.log"]
    assert sorted(p.name for p in (nodes / "n1").glob("*.log")) == ["broker.log"]
    events = [json.loads(line)
              for line in (result.run_dir / "history.jsonl").read_text().splitlines()]
    done = [e["value"] for e in events if e["process"] == -1 and e["type"] == "info"]
    assert ["n4"] in [v["nodes"] for v in done if v.get("targets") == "controller"]
    halves = [v["grudge"] for v in done if v.get("kind") == "halves"]
    assert halves and set(halves[0]["n4"]) == {"n1", "n2"}, halves
