"""The broker's command line: `python -m reference_broker` and `kchaos
broker` start a node, SIGTERM shuts it down cleanly, bad options and a busy
port are clear errors."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys

import pytest

from cluster.broker_process import BrokerProcess, free_port


def test_sigterm_is_a_clean_shutdown(tmp_path):
    broker = BrokerProcess(tmp_path / "data").start()
    assert broker.stop() == 0
    log = broker.log_path.read_text()
    assert "listening on" in log and "shutting down" in log
    assert "Traceback" not in log


@pytest.mark.parametrize("entry", [["-m", "reference_broker"],
                                   ["-c", "from cli.main import main; main()", "broker"]],
                         ids=["python -m reference_broker", "kchaos broker"])
def test_a_broker_starts_without_hypothesis_in_a_fresh_directory(entry, tmp_path):
    """kio builds Hypothesis strategies at import when Hypothesis is
    installed (as the test extras install it), and that fills .hypothesis/
    in the working directory for seconds: a broker does without it."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, *entry, "--node-id", "7", "--listen", f"127.0.0.1:{port}",
         "--data-dir", str(tmp_path / "d")], cwd=tmp_path, stderr=subprocess.PIPE, text=True)
    try:
        BrokerProcess.wait_for_port("127.0.0.1", port, process, timeout=20)
        process.send_signal(signal.SIGTERM)
        assert process.wait(20) == 0
        assert "node 7 (broker,controller) listening" in process.stderr.read()
        assert not (tmp_path / ".hypothesis").exists()
    finally:
        process.kill()


def test_bad_config_is_named(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", "from cli.main import main; main()", "broker",
         "--node-id", "1", "--listen", "127.0.0.1:1", "--data-dir", str(tmp_path),
         "--config", "num.partitions=many"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 3
    assert "--config 'num.partitions=many': bad value 'many'" in result.stderr


def test_busy_port_is_an_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "reference_broker", "--node-id", "1",
             "--listen", f"127.0.0.1:{port}", "--data-dir", str(tmp_path)],
            capture_output=True, text=True, timeout=30)
    assert result.returncode == 1
    assert f"cannot serve on 127.0.0.1:{port}" in result.stderr


def test_bug_switches_are_announced(tmp_path):
    broker = BrokerProcess(tmp_path / "data", bugs=["dedup-window-one", "no-generation-fencing"])
    broker.start()
    assert broker.stop() == 0
    assert "bug switches on: dedup-window-one, no-generation-fencing" in broker.log_path.read_text()


def test_process_roles_and_controller_are_checked(tmp_path):
    def run(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", "from cli.main import main; main()", "broker",
             "--node-id", "1", "--listen", "127.0.0.1:1", "--data-dir", str(tmp_path),
             *options], capture_output=True, text=True, timeout=30)
    lonely = run("--process-roles", "broker")
    assert lonely.returncode == 3
    assert "a broker-only node needs --controller HOST:PORT" in lonely.stderr
    both = run("--process-roles", "broker,controller", "--controller", "127.0.0.1:2")
    assert both.returncode == 3 and "drop one of them" in both.stderr
    unknown = run("--process-roles", "observer")
    assert unknown.returncode == 3 and "expected broker, controller or broker,controller" \
        in unknown.stderr


def test_a_broker_waits_for_its_controller_before_listening(tmp_path):
    """A broker-only node registers first: until a controller answers it
    does not accept clients; then it does."""
    controller = BrokerProcess(tmp_path / "controller", node_id=0, process_roles="controller")
    broker = BrokerProcess(tmp_path / "broker", node_id=1, controller=controller.bootstrap)
    broker.launch()
    try:
        with pytest.raises(TimeoutError):
            broker.wait_ready(2)
        assert "cannot register with the controller" in broker.log_path.read_text()
        controller.start()
        broker.wait_ready(20)
        assert broker.stop() == 0
    finally:
        broker.kill()
        controller.kill()
