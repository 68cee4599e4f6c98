"""CI cancels jobs with SIGTERM: `kchaos run` then tears down as Ctrl-C
does, and `kchaos clean` removes what a SIGKILLed harness left, in setup or
in the main phase, on local or docker nodes — no process, namespace, link,
forwarding rule, mount, container or network survives either."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.addressing import prefix_for
from cluster.docker_engine import RUN_LABEL
from cluster.local import namespaces
from nemesis.disk.fault import FS_TYPE
from tests.docker_support import needs_docker

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="namespaces and FUSE need root")]

SUBNET = "198.18.9.0/24"
PREFIX = prefix_for(SUBNET)
DOCKER_SUBNET = "198.18.24.0/24"
DOCKER_PREFIX = prefix_for(DOCKER_SUBNET) + "-dk"     # cluster.docker's names for it
KCHAOS = [sys.executable, "-m", "cli"]


def start(store: Path, *options: str, subnet: str = SUBNET) -> subprocess.Popen:
    """A harness to be stopped mid-run. Those SIGKILLed never reach a check,
    so they run with --no-check: no Spark start (half a minute under a
    loaded suite) stands between them and their main phase."""
    return subprocess.Popen(
        [*KCHAOS, "run", "--subnet", subnet, "--time-limit", "120", "--nemesis",
         "partition,disk", "--nemesis-interval", "2", "--store", str(store), *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# Generous: a loaded suite (Kafka's JVMs beside it) once took over 90 s to
# bring a run to its main phase; the wait ends as soon as the moment comes.
def wait_for(condition, what: str, harness: subprocess.Popen, timeout: float = 180.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if harness.poll() is not None:
            raise AssertionError(f"the harness ended before {what}: {harness.stderr.read()}")
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def run_dir_of(store: Path) -> Path | None:
    found = list(store.glob("queue/*/test.json"))
    return found[0].parent if found else None


def leftovers(run_dir: Path) -> list[str]:
    found = [f"namespace {n}" for n in namespaces() if n.startswith(f"{PREFIX}-")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines()
              if f" {PREFIX}-" in line]
    rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True).stdout
    found += [f"rule {line}" for line in rules.splitlines() if f"kchaos:{PREFIX}-" in line]
    for line in Path("/proc/self/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == FS_TYPE and fields[1].startswith(str(run_dir)):
            found.append(f"mount {fields[1]}")
    return found + processes_naming(run_dir)


def processes_naming(path: Path) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if str(path) in cmdline:
                found.append(f"pid {proc.name}: {cmdline[:120]}")
    return found


def docker_leftovers() -> list[str]:
    import docker
    client = docker.from_env()
    try:
        selector = {"label": f"{RUN_LABEL}={DOCKER_PREFIX}"}
        return ([f"container {c.name}" for c in client.containers.list(all=True,
                                                                        filters=selector)]
                + [f"network {n.name}" for n in client.networks.list(filters=selector)])
    finally:
        client.close()


def history_lines(run_dir: Path) -> int:
    path = run_dir / "history.jsonl"
    return len(path.read_bytes().splitlines()) if path.exists() else 0


@pytest.mark.parametrize("phase", ["setup", "main"])
def test_sigterm_tears_everything_down(tmp_path, phase):
    store = tmp_path / "store"
    harness = start(store)
    try:
        run_dir = wait_for(lambda: run_dir_of(store), "a run directory", harness)
        if phase == "setup":
            wait_for(lambda: f"{PREFIX}-n1" in namespaces(), "the namespaces", harness)
        else:
            wait_for(lambda: history_lines(run_dir) > 200, "the main phase", harness)
        harness.send_signal(signal.SIGTERM)
        try:
            harness.wait(timeout=120)   # its output is a few lines: no pipe fills
        except subprocess.TimeoutExpired:
            harness.send_signal(signal.SIGUSR1)     # its threads' stacks, on stderr
            time.sleep(2)
            harness.kill()
            raise AssertionError("no exit 120 s after SIGTERM; where it was:\n"
                                 + harness.communicate(timeout=30)[1][-6000:]) from None
        # Nor Spark's driver, which the run starts beside the cluster (its
        # spark.local.dir is in the store): one still starting would live on
        # until its gateway was up, up to a minute on a loaded machine.
        spark_left = processes_naming(store)
        _, stderr = harness.communicate(timeout=30)
    finally:
        if harness.poll() is None:
            harness.kill()
    assert harness.returncode == 128 + signal.SIGTERM, stderr
    assert "terminated (SIGTERM)" in stderr
    assert leftovers(run_dir) == []
    assert spark_left == []


def killed_then_cleaned(store: Path, harness: subprocess.Popen, ready, left) -> None:
    """SIGKILL the harness once ready(run_dir) holds; what it left (left(run_dir))
    is gone after `kchaos clean`, which can be run again."""
    run_dir = wait_for(lambda: run_dir_of(store), "a run directory", harness)
    wait_for(lambda: ready(run_dir), "the moment to kill", harness)
    harness.send_signal(signal.SIGKILL)
    harness.wait(30)
    assert left(run_dir), "SIGKILL left nothing: this test shows nothing"
    for _ in range(2):      # idempotent
        cleaned = subprocess.run([*KCHAOS, "clean", str(run_dir)], capture_output=True,
                                 text=True, timeout=120)
        assert cleaned.returncode == 0, cleaned.stdout + cleaned.stderr
        assert left(run_dir) == []


@pytest.mark.parametrize("phase", ["setup", "main"])
def test_clean_after_the_harness_was_killed(tmp_path, phase):
    store = tmp_path / "store"
    harness = start(store, "--no-check")
    ready = ((lambda run_dir: f"{PREFIX}-n2" in namespaces()) if phase == "setup" else
             (lambda run_dir: history_lines(run_dir) > 100))
    try:
        killed_then_cleaned(store, harness, ready, leftovers)
    finally:
        if harness.poll() is None:
            harness.kill()
        subprocess.run([*KCHAOS, "clean", str(run_dir_of(store) or tmp_path)],
                       capture_output=True, timeout=120)


@needs_docker
@pytest.mark.slow
def test_clean_after_a_harness_on_docker_nodes_was_killed(tmp_path):
    store = tmp_path / "store"
    harness = start(store, "--backend", "docker", "--no-check", subnet=DOCKER_SUBNET)
    try:
        killed_then_cleaned(store, harness, lambda run_dir: history_lines(run_dir) > 100,
                            lambda run_dir: docker_leftovers() + leftovers(run_dir))
    finally:
        if harness.poll() is None:
            harness.kill()
        subprocess.run([*KCHAOS, "clean", str(run_dir_of(store) or tmp_path)],
                       capture_output=True, timeout=120)
