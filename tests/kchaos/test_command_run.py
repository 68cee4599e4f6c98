"""`--db command`: the reference broker run from its system spec
(examples/systems/reference.toml) like any other system, with every fault
on a seeded schedule: applied, healed, valid — run as a user runs it,
`kchaos run --config-file test.toml ... --junit FILE`."""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from click.testing import CliRunner

from cli.main import cli
from kchaos.config import TestConfig
from nemesis.schedule import DEFAULT_MIX
from tests.kchaos.plans import SLACK, applied, every_default_kind, first_seed, starts, verbs

pytestmark = [pytest.mark.root, pytest.mark.spark,
              pytest.mark.skipif(os.geteuid() != 0, reason="faults need root")]

SPEC = Path(__file__).resolve().parents[2] / "examples" / "systems" / "reference.toml"
FAULTS = list(DEFAULT_MIX)      # every kind of the default schedule
# Every kind starts within the first WITHIN s of the plan; the rest of the
# main phase is room for the nemesis to fall behind it: on a loaded machine
# a role lookup under a partition or a pause took 10 s, and a 35-s phase
# ended before the kill planned at 13.5 s (the run was rightly `unknown`).
SCHEDULE = dict(time_limit=50, nemesis=FAULTS, nemesis_interval=3)
WITHIN = 35 - SLACK     # the starts checked (tests/kchaos/plans.py)


def results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


@pytest.mark.slow
def test_a_described_system_takes_every_fault_and_is_valid(tmp_path, spark):
    """Through the command line, in this process (its Spark session is the
    test session's), with the test's settings in a file and JUnit out."""
    seed = first_seed(every_default_kind, within=WITHIN, **SCHEDULE)
    test_toml = tmp_path / "test.toml"
    test_toml.write_text(f'db = "command"\nsystem = "{SPEC}"\nnemesis = {json.dumps(FAULTS)}\n'
                         f'nemesis_interval = 3\nrecovery_time = 3\nfinal_time_limit = 90\n'
                         f'subnet = "198.18.11.0/24"\n')
    junit = tmp_path / "kchaos.xml"
    done = CliRunner().invoke(cli, ["run", "--config-file", str(test_toml), "--seed", str(seed),
                                    "--time-limit", str(SCHEDULE["time_limit"]),
                                    "--store", str(tmp_path / "store"),
                                    "--junit", str(junit)], catch_exceptions=False)
    assert done.exit_code == 0, done.stdout + done.stderr
    run_dir = Path(done.stdout.split("run directory: ")[1].split()[0])
    assert f"{run_dir}: valid" in done.stdout
    case = ET.parse(junit).getroot().find("testsuite/testcase")
    assert case.get("name") == str(run_dir) and list(case) == []
    config = TestConfig.from_json(json.loads((run_dir / "test.json").read_text())["config"])
    assert (config.db, config.seed, config.time_limit) == ("command", seed, 50.0)
    assert results(run_dir)["valid"] is True
    planned = verbs(starts(config, WITHIN))
    assert planned <= applied(run_dir), (sorted(planned), sorted(applied(run_dir)))
    assert json.loads((run_dir / "test.json").read_text())["outcome"]["heal_problems"] == []
    logs = sorted(p.name for p in (run_dir / "nodes" / "n1").iterdir())
    assert {"broker.log", "controller.log", "data-listing.txt"} <= set(logs)


def test_the_disk_gate_goes_under_the_spec_s_data_directory(tmp_path):
    """A spec that keeps its data elsewhere than `data` gets its disk faults
    there: the gate is mounted on the directory the broker writes."""
    from kchaos.cluster import SystemUnderTest
    from nemesis.disk.fault import command, gate_mounts
    spec = tmp_path / "elsewhere.toml"
    spec.write_text(SPEC.read_text().replace('data_dir = "data"', 'data_dir = "broker-data"'))
    config = TestConfig.build(db="command", system=str(spec), nemesis=["disk"],
                              subnet="198.18.15.0/24", store=tmp_path / "store")
    cluster = SystemUnderTest(config, tmp_path / "run")
    try:
        cluster.start()
        for node in cluster.nodes:
            assert gate_mounts(node) == [str(node.workdir / "broker-data")]
            assert command(node, "status")["stalled"] is False
    finally:
        cluster.teardown()
