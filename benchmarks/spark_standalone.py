"""A real Spark standalone cluster on this machine: a master and N workers,
started with the `spark-class` launcher PySpark ships (Spark's own Master
and Worker classes), each a JVM of its own, on 127.0.0.1.

    with StandaloneCluster(workers=2, cores=1, memory="2g", root=DIR) as cluster:
        kchaos check --spark-master cluster.url RUN_DIR

The test of `--spark-master` against a cluster and the benchmark's
2-worker figures use it. Executors run on this machine, so a run directory
here is storage every executor reads; on machines of their own it must be
shared storage (docs/checking.md). Standalone mode needs no cluster
manager besides these processes; `stop` (and leaving the `with`) kills
them all.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pyspark

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
HOST = "127.0.0.1"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class StandaloneCluster:
    """A master and `workers` workers of `cores` cores and `memory` each."""

    def __init__(self, root: Path, *, workers: int = 2, cores: int = 1, memory: str = "2g"):
        self.root = Path(root)
        self.workers, self.cores, self.memory = workers, cores, memory
        self.port, self.ui_port = _free_port(), _free_port()
        self.processes: list[subprocess.Popen] = []

    @property
    def url(self) -> str:
        return f"spark://{HOST}:{self.port}"

    def __enter__(self) -> "StandaloneCluster":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self, timeout: float = 90.0) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self._launch("master", "org.apache.spark.deploy.master.Master", "--host", HOST,
                     "--port", str(self.port), "--webui-port", str(self.ui_port))
        for i in range(1, self.workers + 1):
            work_dir = self.root / f"worker-{i}"
            work_dir.mkdir(exist_ok=True)
            self._launch(f"worker-{i}", "org.apache.spark.deploy.worker.Worker",
                         "--host", HOST, "--cores", str(self.cores), "--memory", self.memory,
                         "--work-dir", str(work_dir), "--webui-port", str(_free_port()),
                         self.url)
        deadline = time.monotonic() + timeout
        while (alive := self.alive_workers()) < self.workers:
            dead = [p.args[1] for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"Spark standalone cluster at {self.url}: {alive} of {self.workers} "
                    f"workers registered{' (exited: ' + ', '.join(dead) + ')' if dead else ''}"
                    f" within {timeout:g} s; logs in {self.root}")
            time.sleep(0.5)

    def _launch(self, name: str, main_class: str, *args: str) -> None:
        log = open(self.root / f"{name}.log", "wb")
        env = {**os.environ, "SPARK_NO_DAEMONIZE": "1"}
        self.processes.append(subprocess.Popen(
            [str(SPARK_CLASS), main_class, *args], stdout=log, stderr=subprocess.STDOUT,
            env=env, start_new_session=True))
        log.close()

    def alive_workers(self) -> int:
        """The workers the master counts alive (its web UI's JSON)."""
        try:
            with urllib.request.urlopen(f"http://{HOST}:{self.ui_port}/json/", timeout=2) as r:
                return int(json.load(r).get("aliveworkers", 0))
        except (OSError, ValueError):
            return 0

    def stop(self) -> None:
        # Workers first: a master that goes first leaves them retrying it.
        for process in reversed(self.processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in reversed(self.processes):
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.processes.clear()
