"""Where a command's time goes: its wall time, how busy the machine's
cores were, and the CPU of every process on the machine while it ran, by
kind (docs/testing.md's table for `make test`).

    python benchmarks/suite_cpu.py [--interval 2] [-- COMMAND ...]   # default: make test

Every process's own user and system time is read from /proc each interval
and kept at its last value, so a process that lives less than an interval
is missed or undercounted (the `runc`, `iptables` and `docker exec` of a
run are each a few milliseconds). The whole machine is counted, not only
the command's descendants: brokers in containers belong to dockerd, and
kernel threads (the machine's own memory reclaim) take CPU the command
needs too. Run it on an idle machine.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")

# (what the command line holds, the kind), the first match wins.
KINDS = [
    ("reference_broker", "reference brokers"),
    ("kafka.Kafka ", "Apache Kafka brokers"),
    ("StorageTool", "Kafka storage formats"),
    ("deploy.master.Master", "Spark standalone master and workers"),
    ("deploy.worker.Worker", "Spark standalone master and workers"),
    ("CoarseGrainedExecutorBackend", "Spark standalone executors"),
    ("pyspark/jars", "Spark driver JVMs (sessions, kchaos check subprocesses)"),
    ("pyspark.daemon", "PySpark's Python workers"),
    ("pyspark.worker", "PySpark's Python workers"),
    ("workloads.clients", "the Java client's JVMs"),
    ("-XX:TieredStopAtLevel=1", "the Java client's JVMs"),
    # pytest-xdist's workers start as `python -u -c "import sys;exec(eval(
    # sys.stdin.readline()))"` (execnet's bootstrap).
    ("exec(eval(sys.stdin.readline()))",
     "pytest workers (clients, histories, nemeses, checks' driver side)"),
    ("-m cli ", "kchaos commands the tests start (harnesses, checks' Python side)"),
    ("-m pytest", "pytest's controller"),
    ("dockerd", "dockerd and containerd"),
    ("containerd", "dockerd and containerd"),
    ("sshd", "sshd"),
    ("chrom", "Chromium"),
    ("pip", "pip and venvs"),
]


def kind_of(cmdline: str, comm: str) -> str:
    if not cmdline:
        return f"kernel: {comm.rstrip('0123456789/:-_.')}"
    for marker, kind in KINDS:
        if marker in cmdline:
            return kind
    return f"other: {Path(cmdline.split()[0]).name}"


class Sampler(threading.Thread):
    def __init__(self, interval: float):
        super().__init__(daemon=True)
        self.interval, self.stop = interval, threading.Event()
        self.seen: dict[str, list] = {}        # pid:starttime -> [ticks, kind]

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)
        self.sample()

    def sample(self) -> None:
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
                fields = stat[stat.rindex(")") + 2:].split()
                ticks, key = int(fields[11]) + int(fields[12]), f"{pid}:{fields[19]}"
                # The kind is looked up again at every sample: a process is
                # what it last exec'd (Spark's drivers start as the bash
                # script spark-submit and exec java in the same pid). A
                # zombie has no command line any more: it keeps its kind.
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
                comm = stat[stat.index("(") + 1:stat.rindex(")")]
                kind = kind_of(cmdline.decode(errors="replace").strip(), comm)
                if key in self.seen and not cmdline:
                    kind = self.seen[key][1]
                self.seen[key] = [ticks, kind]
            except (OSError, ValueError, IndexError):
                continue                                # gone between listing and reading

    def by_kind(self) -> Counter:
        found = Counter()
        for ticks, kind in self.seen.values():
            found[kind] += ticks / TICK
        return found


def busy() -> tuple[int, int]:
    """(busy, total) jiffies of all cores since boot."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n")[0].split()[1:8]]
    return sum(values) - values[3] - values[4], sum(values)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interval", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("command", nargs="*", default=["make", "test"])
    args = parser.parse_args()
    sampler = Sampler(args.interval)
    sampler.sample()
    before = {key: ticks for key, (ticks, _) in sampler.seen.items()}
    (busy0, total0), started = busy(), time.monotonic()
    sampler.start()
    status = subprocess.call(args.command)
    sampler.stop.set()
    sampler.join()
    (busy1, total1), wall = busy(), time.monotonic() - started
    for key, ticks in before.items():          # only what was spent while the command ran
        sampler.seen[key][0] -= ticks
    kinds = sampler.by_kind()
    command = shlex.join(args.command).replace("\n", " ")
    print(f"\n{command}: exit {status}, {wall:.0f} s wall, cores "
          f"{(busy1 - busy0) / (total1 - total0):.0%} busy; {sum(kinds.values()):,.0f} "
          f"CPU-seconds sampled, by kind:")
    for kind, seconds in kinds.most_common(20):
        if seconds >= 0.1:
            print(f"  {seconds:8.1f}  {kind}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
