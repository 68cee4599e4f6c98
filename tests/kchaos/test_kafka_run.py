"""`--db kafka`: Apache Kafka itself under every fault kind of the default
schedule — partitions, pause, kill, restart-all, disk stall / errors /
lost unsynced writes under its log.dirs, packet loss, failover — aimed at
nodes by count and by role (a partition's leader, a group's coordinator,
the active controller), each applied and healed, and the run valid; run as
a user runs it, through the command line."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from kchaos.config import TestConfig
from nemesis.schedule import DEFAULT_MIX
from tests.kchaos.plans import SLACK, applied, every_default_kind, failed, first_seed, starts, \
    verbs

pytestmark = [pytest.mark.root, pytest.mark.spark,
              pytest.mark.skipif(os.geteuid() != 0, reason="faults need root")]

ROLES = {"leader", "controller", "coordinator"}
# Kafka takes seconds to restart (a JVM), so its faults are spaced wider than
# the reference broker's (tests/kchaos/test_command_run.py).
SCHEDULE = dict(time_limit=75, nemesis=list(DEFAULT_MIX), nemesis_interval=6)
WITHIN = SCHEDULE["time_limit"] - SLACK     # the starts checked (tests/kchaos/plans.py)


def every_kind_and_role(faults) -> bool:
    targets = {f.get("targets") for f in faults if isinstance(f.get("targets"), str)}
    return every_default_kind(faults) and ROLES <= targets


@pytest.mark.slow
def test_kafka_takes_every_fault_and_is_valid(tmp_path, spark):
    seed = first_seed(every_kind_and_role, within=WITHIN, **SCHEDULE)
    done = CliRunner().invoke(cli, [
        "run", "--db", "kafka", "--seed", str(seed),
        "--time-limit", str(SCHEDULE["time_limit"]), "--nemesis", ",".join(DEFAULT_MIX),
        "--nemesis-interval", str(SCHEDULE["nemesis_interval"]), "--recovery-time", "3",
        "--final-time-limit", "90",
        "--config", "min.insync.replicas=2",
        # A restarted broker that has not registered within this quits
        # (Kafka's default is 60 s); a loaded suite once took longer.
        "--config", "initial.broker.registration.timeout.ms=180000",
        "--subnet", "198.18.14.0/24",
        "--store", str(tmp_path / "store")], catch_exceptions=False)
    assert done.exit_code == 0, done.stdout + done.stderr
    run_dir = Path(done.stdout.split("run directory: ")[1].split()[0])
    body = json.loads((run_dir / "test.json").read_text())
    config = TestConfig.from_json(body["config"])
    assert (config.db, config.seed) == ("kafka", seed)
    planned = verbs(starts(config, WITHIN))
    assert planned <= applied(run_dir), (sorted(planned), sorted(applied(run_dir)))
    assert failed(run_dir) == []
    hit = {f["value"].get("targets") for f in body["outcome"]["nemesis"]
           if isinstance(f.get("value", {}).get("targets"), str)}
    assert ROLES <= hit, hit
    # A broker that exited of disk errors injected on its node is the
    # fault's effect (nemesis/effects.py), not a node failure.
    assert body["outcome"]["heal_problems"] == [] and body["outcome"]["node_failures"] == []
    assert json.loads((run_dir / "results.json").read_text())["valid"] is True
    server = (run_dir / "nodes" / "n1" / "kafka.log").read_text()
    assert "Kafka Server started" in server
