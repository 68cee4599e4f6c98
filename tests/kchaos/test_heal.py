"""The heal guarantee when the harness itself dies: `kchaos run` killed
with SIGKILL while a partition is in place leaves the firewall rules
behind; `kchaos heal RUN_DIR` removes them and the nodes reach each other
again; a second run on the same nodes starts clean and is valid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.addressing import prefix_for
from cluster.local import LocalBackend, LocalNode
from kchaos.config import TestConfig
from kchaos.progress import Progress
from validation.profiles import FAST_BROKERS
from kchaos.run import run_and_check
from nemesis.disk.fault import gate_mounts, mount, unmount_all

pytestmark = [pytest.mark.root, pytest.mark.spark,
              pytest.mark.skipif(os.geteuid() != 0, reason="network faults need root")]

KCHAOS = str(Path(sys.executable).with_name("kchaos"))


def chain(netns: str) -> str:
    """Our chain's rules in netns ("" when there is no chain)."""
    done = subprocess.run(["ip", "netns", "exec", netns, "iptables", "-w", "-S", "KCHAOS"],
                          capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else ""


def partitioned_run_dir(store: Path, harness: subprocess.Popen, timeout: float = 180) -> Path:
    """The run directory once its history shows a partition in place (the
    wait is long for a loaded suite, and ends as soon as it is there)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert harness.poll() is None, harness.stdout.read()
        for history in store.glob("*/*/history.jsonl"):
            nemesis = [json.loads(line) for line in history.read_text().splitlines()
                       if '"process":-1' in line.replace(" ", "")]
            if nemesis and nemesis[-1]["f"] == "start-partition" \
                    and nemesis[-1]["type"] == "info":
                return history.parent
        time.sleep(0.2)
    raise AssertionError(f"no partition started within {timeout} s")


def reaches(from_netns: str, address: str, port: int = 9092) -> bool:
    probe = (f"import socket; socket.create_connection(({address!r}, {port}), timeout=2)")
    return subprocess.run(["ip", "netns", "exec", from_netns, sys.executable, "-c", probe],
                          capture_output=True).returncode == 0


@pytest.mark.slow
def test_kchaos_heal_after_the_harness_was_killed_mid_partition(tmp_path, spark):
    store = tmp_path / "store"
    # The test's settings in a config file, as a suite keeps them; the
    # command line adds to it and overrides it (time_limit).
    test_toml = tmp_path / "test.toml"
    test_toml.write_text(f"time_limit = 5\nnemesis = [\"partition\"]\nnemesis_interval = 3\n"
                         f"broker_config = {json.dumps(FAST_BROKERS)}\n"
                         f"[workload]\npartitions = 2\n")
    harness = subprocess.Popen(
        [KCHAOS, "run", "--config-file", str(test_toml), "--seed", "5", "--time-limit", "120",
         "--store", str(store), "--no-check"],     # SIGKILLed before any check: no Spark
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        run_dir = partitioned_run_dir(store, harness)
        harness.send_signal(signal.SIGKILL)
        harness.wait(10)
        namespaces = [f"kchaos-n{i}" for i in (1, 2, 3)]
        rules = {netns: chain(netns) for netns in namespaces}
        assert any("DROP" in r for r in rules.values()), rules     # the fault outlived it
        cut = [(a, b) for a in (1, 2, 3) for b in (1, 2, 3)
               if a != b and not reaches(f"kchaos-n{a}", f"198.18.0.{10 + b}")]
        assert cut, "the partition cut no pair of nodes"

        healed = subprocess.run([KCHAOS, "heal", str(run_dir)], capture_output=True,
                                text=True, timeout=60)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        assert "firewall chains removed" in healed.stdout
        assert all(chain(netns) == "" for netns in namespaces)
        for a, b in cut:
            assert reaches(f"kchaos-n{a}", f"198.18.0.{10 + b}"), (a, b)

        # The dead harness's brokers still run in the namespaces: the next
        # run on these nodes clears them and starts clean.
        written = json.loads((run_dir / "test.json").read_text())["config"]
        assert (written["time_limit"], written["workload"]["partitions"],
                written["nemesis"]) == (120, 2, ["partition"])
        config = TestConfig.build(seed=6, time_limit=10, store=tmp_path / "second",
                                  broker_config=FAST_BROKERS, recovery_time=1)
        result = run_and_check(config, spark, progress=Progress.quiet())
        assert result.valid is True, (result.counts, result.run_dir)
        assert result.outcome.heal_problems == []
    finally:
        if harness.poll() is None:
            harness.kill()
        LocalBackend(3, tmp_path / "leftovers", use_namespaces=True).teardown()


def test_kchaos_heal_after_the_namespaces_are_gone_unmounts_the_gates(tmp_path):
    """A reboot of the machine (or its container) drops the network
    namespaces but can keep the FUSE mounts of the host: heal reports the
    nodes as having no rules left and still detaches their dead gates."""
    run_dir = tmp_path / "store" / "t" / "20260101T000000"
    run_dir.mkdir(parents=True)
    config = TestConfig.build(store=tmp_path / "store", subnet="198.18.7.0/24")
    (run_dir / "test.json").write_text(json.dumps({"config": config.to_json()}))
    backend = LocalBackend(3, run_dir / "scratch", subnet="198.18.7.0/24", use_namespaces=True,
                           prefix=prefix_for("198.18.7.0/24"))
    try:
        backend.setup()
        node = backend.nodes[0]
        mount(node)
        with open(node.workdir / "data" / "f", "wb") as f:
            f.write(b"x")
            f.flush()
            os.fsync(f.fileno())    # durable: the gate's death must not take it
        backend.teardown()      # kills the gate with the namespace: its mount stays behind
        host = LocalNode("host", "127.0.0.1", run_dir)   # the host's mounts under the run
        assert gate_mounts(host) == [str(node.workdir / "data")]

        healed = subprocess.run([KCHAOS, "heal", str(run_dir)], capture_output=True,
                                text=True, timeout=120)
        assert healed.returncode == 0, healed.stdout + healed.stderr
        assert "no namespace left for n1, n2, n3" in healed.stdout
        assert "firewall chains removed" not in healed.stdout
        assert gate_mounts(host) == []
        assert (node.workdir / "data.backing" / "f").read_bytes() == b"x"
    finally:
        backend.teardown()
        unmount_all([LocalNode(n.name, n.address, n.workdir) for n in backend.nodes])


def test_kchaos_heal_refuses_a_directory_that_is_no_run(tmp_path):
    done = subprocess.run([KCHAOS, "heal", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 3
    assert "no test.json here" in done.stderr
