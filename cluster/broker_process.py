"""A reference broker as a local process on a loopback port: what tests and
benchmarks start when they need a real broker, and can stop, kill, pause and
restart.

The broker's stderr goes to `<data_dir>/../<role>-<node id>.log` so a
failing test can show why; readiness is a TCP connect, the same thing a
client needs (a broker listens only once its controller has unfenced it).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


class BrokerProcess:
    def __init__(self, data_dir: Path, *, node_id: int = 1, host: str = "127.0.0.1",
                 port: int | None = None, config: list[str] = (), bugs: list[str] = (),
                 log_level: str = "INFO", process_roles: str | None = None,
                 controller: str | None = None):
        self.data_dir = Path(data_dir)
        self.node_id = node_id
        self.host = host
        self.port = port or free_port(host)
        self.config = list(config)
        self.bugs = list(bugs)
        self.log_level = log_level
        self.process_roles = process_roles
        self.controller = controller
        role = "controller" if process_roles == "controller" else "broker"
        self.log_path = self.data_dir.parent / f"{role}-{node_id}.log"
        self.process: subprocess.Popen | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def argv(self) -> list[str]:
        argv = [sys.executable, "-m", "reference_broker", "--node-id", str(self.node_id),
                "--listen", self.bootstrap, "--data-dir", str(self.data_dir),
                "--log-level", self.log_level]
        for setting in self.config:
            argv += ["--config", setting]
        for bug in self.bugs:
            argv += ["--bug", bug]
        if self.process_roles:
            argv += ["--process-roles", self.process_roles]
        if self.controller:
            argv += ["--controller", self.controller]
        return argv

    def start(self, timeout: float = 20.0) -> "BrokerProcess":
        self.launch()
        self.wait_ready(timeout)
        return self

    def launch(self) -> None:
        """Start the process without waiting (several nodes start together)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "ab")
        self.process = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        log.close()

    def wait_ready(self, timeout: float) -> None:
        try:
            self.wait_for_port(self.host, self.port, self.process, timeout)
        except (RuntimeError, TimeoutError) as e:
            raise type(e)(f"broker {self.node_id}: {e}; see {self.log_path}:\n"
                          f"{self.log_tail()}") from None

    @staticmethod
    def wait_for_port(host: str, port: int, process: subprocess.Popen, timeout: float) -> None:
        """Until `process` accepts connections on host:port."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(f"exited with {process.returncode} before listening")
            try:
                with socket.create_connection((host, port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise TimeoutError(f"not listening on {host}:{port} after {timeout} s")

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: int) -> None:
        if self.running():
            os.kill(self.process.pid, sig)

    def stop(self, timeout: float = 20.0) -> int | None:
        """SIGTERM and wait: a clean shutdown."""
        return self._end(signal.SIGTERM, timeout)

    def kill(self) -> int | None:
        """SIGKILL: a crash."""
        return self._end(signal.SIGKILL, 10.0)

    def pause(self) -> None:
        self.signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.signal(signal.SIGCONT)

    def _end(self, sig: int, timeout: float) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.signal(signal.SIGCONT)
            self.signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        return self.process.returncode

    def __enter__(self) -> "BrokerProcess":
        return self.start()

    def __exit__(self, *exc) -> None:
        self._end(signal.SIGKILL, 10.0)
