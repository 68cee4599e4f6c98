"""benchmarks/suite_cpu.py: a command's CPU, by the kind of process that
spent it, the whole machine sampled from /proc."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.suite_cpu import kind_of

BUSY = "import time; t = time.process_time()\nwhile time.process_time() - t < 1.5: pass"


def test_processes_are_told_apart_by_their_command_lines():
    java = "/usr/bin/java -Xms512m -Xmx512m -XX:+UseG1GC -cp /c/lib/* kafka.Kafka /w/server.properties"
    assert kind_of(java, "java") == "Apache Kafka brokers"
    assert kind_of("python -m reference_broker --node-id 1", "python") == "reference brokers"
    assert kind_of("", "kdamond.0") == "kernel: kdamond"
    assert kind_of("/usr/bin/iptables -L", "iptables") == "other: iptables"
    worker = "/w/.venv/bin/python -u -c import sys;exec(eval(sys.stdin.readline()))"
    assert kind_of(worker, "python").startswith("pytest workers")
    check = "/w/.venv/bin/python -m cli check /tmp/pytest-of-root/pytest-1/run"
    assert kind_of(check, "python").startswith("kchaos commands")


def test_a_busy_child_is_counted_with_the_wall_time_and_the_exit_status():
    done = subprocess.run([sys.executable, "benchmarks/suite_cpu.py", "--interval", "0.2", "--",
                           sys.executable, "-c", BUSY], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    head, *kinds = done.stdout.strip().splitlines()
    assert "exit 0" in head and "wall" in head and "busy" in head, head
    spent = {line.split(None, 1)[1]: float(line.split()[0]) for line in kinds}
    assert spent.get("other: python", 0) >= 1.2, spent


def test_a_process_counts_as_what_it_last_exec_d():
    """As Spark's drivers do: a bash script that execs the busy program."""
    script = f"sleep 0.5; exec {sys.executable} -c '{BUSY}'"
    done = subprocess.run([sys.executable, "benchmarks/suite_cpu.py", "--interval", "0.2", "--",
                           "bash", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    spent = {line.split(None, 1)[1]: float(line.split()[0])
             for line in done.stdout.strip().splitlines()[1:]}
    assert spent.get("other: python", 0) >= 1.2 and spent.get("other: bash", 0) < 0.5, spent


ZOMBIE = (f"import os, time\nif os.fork() == 0:\n    exec({BUSY!r})\n    os._exit(0)\n"
          "time.sleep(2.5)")


def test_a_zombie_keeps_the_kind_it_had():
    """An exited child not yet reaped has no command line; its CPU stays
    with what it was, not 'kernel: ...'."""
    done = subprocess.run([sys.executable, "benchmarks/suite_cpu.py", "--interval", "0.2", "--",
                           sys.executable, "-c", ZOMBIE], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    spent = {line.split(None, 1)[1]: float(line.split()[0])
             for line in done.stdout.strip().splitlines()[1:]}
    assert spent.get("other: python", 0) >= 1.2 and not any(
        kind.startswith("kernel: python") for kind in spent), spent
