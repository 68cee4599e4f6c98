"""Disk faults on nodes whose broker data directory sits on a disk gate.

`mount(node, directory=...)` starts the node's one gate (daemon "disk") on
`<workdir>/<directory>` (the broker's data directory: `data` unless a
system spec says otherwise) over `<workdir>/<directory>.backing`, its log
`<workdir>/<directory>.gate.log`, its control socket `<workdir>/disk-gate.sock`
wherever it is mounted, so the faults need not know the directory; it
must run before the broker starts (kchaos mounts it when `disk` is among
the nemeses). Every later word to
the gate is `python -m nemesis.disk ctl SOCKET COMMAND` through
`node.run`, so the faults work on any Node backend that has the package
and FUSE.

`DiskFault(mode)`:
- `stall`: `stall-disk`/`unstall-disk` — every filesystem operation blocks;
- `errors`: `disk-errors`/`stop-disk-errors` — I/O fails with EIO;
- `lose-unsynced`: `lose-unsynced`/`restart` — a power cut on every target
  at one instant: stall their disks, kill their brokers, drop what the
  files had not made durable; stop starts the brokers again on what is left.

A local node in a network namespace runs each command through `ip netns
exec`, which gives the command a private mount namespace that nothing
propagates out of. So on such a node the gate mounts, and is unmounted, in
this process's mount namespace (`nsenter --mount`): the broker started
afterwards through `ip netns exec` starts with a copy that holds the gate.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import signal
import time
from pathlib import PurePath

from cluster.db import Kill
from cluster.node import Node
from nemesis.core import Cluster, FaultError, choose_targets, names
from nemesis.process import only_broker

log = logging.getLogger("nemesis.disk")

DAEMON = "disk"
DATA = "data"
FS_TYPE = "fuse.kchaos-disk"
MODES = {"stall": ("stall-disk", "unstall-disk"),
         "errors": ("disk-errors", "stop-disk-errors"),
         "lose-unsynced": ("lose-unsynced", "restart")}
EXIT_NO_GATE, EXIT_NO_ANSWER = 3, 4   # `ctl` exit statuses (nemesis/disk/__main__.py)
LOG_TAIL_LINES = 15


class GateMissing(FaultError):
    """No disk gate is mounted on the node."""


def _paths(node: Node, directory: str) -> tuple[PurePath, PurePath, PurePath]:
    """(mountpoint, backing directory, control socket)."""
    mountpoint = node.workdir / directory
    return (mountpoint, mountpoint.with_name(mountpoint.name + ".backing"),
            _socket(node))


def _socket(node: Node) -> PurePath:
    """The control socket of the node's one gate, wherever it is mounted."""
    return node.workdir / "disk-gate.sock"


def _host_mounts(node: Node) -> list[str]:
    """argv prefix that runs a command in this process's mount namespace
    when the node's commands would get a private one (see the docstring)."""
    if getattr(node, "netns", None):
        return ["nsenter", f"--mount=/proc/{os.getpid()}/ns/mnt", "--"]
    return []


def _unescape(field: str) -> str:
    """/proc/mounts writes space, tab, newline and backslash as \\ooo."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def gate_mounts(node: Node) -> list[str]:
    """Mount points of disk gates under the node's working directory (none
    when that directory does not exist: a run killed before making it)."""
    try:
        listing = node.run(["cat", "/proc/self/mounts"], timeout=30.0).stdout
    except FileNotFoundError as e:
        # A local node runs its commands in its workdir; without one nothing
        # can be mounted under it. Any other missing file is a real error.
        if e.filename is not None and PurePath(e.filename) == PurePath(node.workdir):
            return []
        raise
    root = str(node.workdir).rstrip("/") + "/"
    found = []
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) >= 3 and fields[2] == FS_TYPE:
            mountpoint = _unescape(fields[1])
            if mountpoint.startswith(root):
                found.append(mountpoint)
    return found


def command(node: Node, verb: str, *, python: str | None = None,
            timeout: float = 30.0) -> dict:
    """Send one command (nemesis.disk.control.COMMANDS) to the node's gate;
    its JSON answer. GateMissing when none is mounted; FaultError when it
    does not answer or refuses."""
    done = node.run([python or _node_python(node), "-m", "nemesis.disk", "ctl",
                     str(_socket(node)), verb, "--timeout", str(timeout)],
                    check=False, timeout=timeout + 30)
    detail = (done.stderr or done.stdout).strip()
    if done.returncode == EXIT_NO_GATE:
        raise GateMissing(f"{node.name}: no disk gate is mounted under {node.workdir}: "
                          f"disk faults need the gate mounted under the broker's data "
                          f"directory (kchaos mounts it when `disk` is among the nemeses; "
                          f"by hand: nemesis.disk.fault.mount(node) before the broker starts)")
    if done.returncode != 0:
        raise FaultError(f"{node.name}: disk gate command {verb!r} failed "
                         f"(exit {done.returncode}): {detail}")
    return json.loads(done.stdout)


def mount(node: Node, *, python: str | None = None, writeback_delay: float = 5.0,
          directory: str = DATA, timeout: float = 15.0) -> None:
    """Mount a gate on `<workdir>/<directory>` (over `<directory>.backing`)
    and wait until it serves. A live gate already there is kept; a dead one
    is cleared first. Run it before the broker starts on that directory."""
    if writeback_delay < 0:
        raise ValueError(f"writeback_delay={writeback_delay!r}: seconds, 0 or more "
                         f"(0 writes through)")
    mountpoint, backing, socket = _paths(node, directory)
    if str(mountpoint) in gate_mounts(node):
        try:
            command(node, "status", python=python)
            return
        except FaultError:
            unmount(node, directory=directory, python=python)
    elif node.is_running(DAEMON):
        unmount(node, directory=directory, python=python)
    node.run(["mkdir", "-p", str(mountpoint), str(backing)])
    log = mountpoint.with_name(mountpoint.name + ".gate.log")
    node.start_daemon(DAEMON, [*_host_mounts(node), python or _node_python(node), "-m",
                               "nemesis.disk", "serve", str(backing), str(mountpoint),
                               "--control", str(socket),
                               "--writeback-delay", repr(float(writeback_delay))], log=log)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not node.is_running(DAEMON):
            raise RuntimeError(f"{node.name}: the disk gate exited before mounting "
                               f"{mountpoint}:\n{_tail(node, log)}")
        if str(mountpoint) in gate_mounts(node):
            try:
                command(node, "status", python=python, timeout=5.0)
                return
            except FaultError:
                pass
        time.sleep(0.1)
    node.stop_daemon(DAEMON, sig=signal.SIGKILL)
    _unmount_path(node, directory, python, timeout)
    raise TimeoutError(f"{node.name}: the disk gate did not mount {mountpoint} within "
                       f"{timeout} s:\n{_tail(node, log)}")


def unmount(node: Node, *, directory: str = DATA, python: str | None = None,
            timeout: float = 15.0) -> None:
    """Stop the node's gate (it writes back what it holds) and unmount it;
    a dead gate's mount is detached. Nothing if none is mounted. Stop the
    broker first: a process with a file open on the gate sees errors."""
    if node.is_running(DAEMON):
        node.stop_daemon(DAEMON, sig=signal.SIGTERM, timeout=timeout)
    problem = _unmount_path(node, directory, python, timeout)
    if problem:
        raise RuntimeError(problem)


def _unmount_path(node: Node, directory: str, python: str, timeout: float) -> str | None:
    """Unmount the gate on `<workdir>/<directory>` whoever started it: ask it
    to shut down, else detach it. A problem, or None."""
    mountpoint, _, socket = _paths(node, directory)
    if str(mountpoint) not in gate_mounts(node):
        return None
    try:
        command(node, "shutdown", python=python, timeout=5.0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and str(mountpoint) in gate_mounts(node):
            time.sleep(0.1)
    except FaultError:
        pass    # dead: "Transport endpoint is not connected"
    prefix = _host_mounts(node)
    for argv in (["fusermount3", "-u", "-z", str(mountpoint)], ["umount", "-l", str(mountpoint)]):
        if str(mountpoint) not in gate_mounts(node):
            break
        try:
            node.run([*prefix, *argv], check=False, timeout=30.0)
        except FileNotFoundError:
            continue
    node.run(["rm", "-f", str(socket)], check=False)
    if str(mountpoint) in gate_mounts(node):
        return (f"{node.name}: {mountpoint} is still mounted (fusermount3 -u -z and "
                f"umount -l failed)")
    return None


def unmount_all(nodes: list[Node]) -> list[str]:
    """Unmount every gate under each node's working directory (teardown,
    after the brokers stopped; or a crashed run, by hand); problems as
    strings, one node's never stopping the next."""
    problems = []
    for node in nodes:
        try:
            if node.is_running(DAEMON):
                node.stop_daemon(DAEMON, sig=signal.SIGTERM, timeout=15.0)
            for mountpoint in gate_mounts(node):
                directory = os.path.relpath(mountpoint, str(node.workdir))
                problem = _unmount_path(node, directory, None, 15.0)
                if problem:
                    problems.append(problem)
        except Exception as e:  # noqa: BLE001 — reported; the next node is still unmounted
            problems.append(f"{node.name}: unmounting its disk gate: {type(e).__name__}: {e}")
    return problems


def heal(cluster: Cluster) -> list[str]:
    """Unstall and stop errors on every node that has a gate. Nothing is
    unmounted (brokers run on it) and nothing dropped. Problems as strings."""
    problems = []
    python = _python(cluster)
    for node in cluster.nodes:
        if not (python or node.python):
            continue        # no kchaos there, so no gate either
        try:
            command(node, "heal", python=python)
        except GateMissing:
            continue
        except Exception as e:  # noqa: BLE001 — reported; the next node is still healed
            problems.append(f"{node.name}: healing its disk gate: {e}")
    return problems


def _python(cluster: Cluster) -> str | None:
    """The Python the DB runs on the nodes (ReferenceDB.python), else each
    node's own (None)."""
    return getattr(cluster.db, "python", None)


def _node_python(node: Node) -> str:
    if not node.python:
        raise FaultError(f"{node.name}: disk faults need kchaos installed on the node (its "
                         f"disk gate is `python -m nemesis.disk`), and this node has no "
                         f"Python with kchaos")
    return node.python


def _tail(node: Node, path: PurePath) -> str:
    try:
        lines = node.get(path).decode(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no log)"
    return "\n".join(lines[-LOG_TAIL_LINES:])


class DiskFault:
    """A disk fault of one mode on the targets (nemesis.core.TARGETS or node
    names). Every target must have a gate; that is checked before any is
    touched."""

    def __init__(self, mode: str, targets="one", broker_only: bool = False):
        if mode not in MODES:
            raise ValueError(f"mode={mode!r}: choose one of {', '.join(MODES)}")
        self.mode = mode
        self.targets = targets
        self.start_f, self.stop_f = MODES[mode]
        self.broker_only = broker_only      # lose-unsynced: kill the broker alone
        self.nodes: list[Node] = []

    def asked(self) -> dict:
        return {"mode": self.mode, "targets": self.targets,
                **({"broker_only": True} if self.broker_only else {})}

    def start(self, cluster: Cluster, rng: random.Random) -> dict:
        if self.mode == "lose-unsynced":
            if not isinstance(cluster.db, Kill):
                raise FaultError(f"lose-unsynced: the DB adapter {type(cluster.db).__name__} "
                                 f"cannot kill and start nodes: drop this fault")
        python = _python(cluster)
        targets = choose_targets(cluster, self.targets, rng)
        for node in targets:
            command(node, "status", python=python)
        self.nodes = []
        done = {**self.asked(), "nodes": names(targets)}
        if self.mode == "lose-unsynced":
            return {**done, **self._power_cut(cluster, targets, python)}
        verb = "stall" if self.mode == "stall" else "errors"
        for node in targets:
            self.nodes.append(node)
            command(node, verb, python=python)
        return done

    def _power_cut(self, cluster: Cluster, targets: list[Node], python: str) -> dict:
        """Every target loses power at one instant: stall each disk first
        (nothing more reaches it, nothing is written back), then kill each
        process, then drop what each disk held unsynced. Killing and
        dropping node by node instead let the disks still running write
        back, so a correlated loss lost little or nothing."""
        stalled = []
        try:
            for node in targets:
                command(node, "stall", python=python)
                stalled.append(node)
            for node in targets:
                cluster.db.kill(node, **only_broker(cluster.db, self.broker_only))
                self.nodes.append(node)     # restarted by stop even if the drop fails
            dropped = {}
            for node in targets:
                answer = command(node, "drop", python=python)
                dropped[node.name] = {"files": answer["dropped_files"],
                                      "bytes": answer["dropped_bytes"]}
        finally:
            # Power back on; a node whose kill failed runs on, having lost nothing.
            for node in stalled:
                try:
                    command(node, "unstall", python=python)
                except FaultError as e:     # heal-all unstalls it later; the others now
                    log.warning("%s: unstall after the power cut: %s", node.name, e)
        return {"dropped": dropped, "dropped_bytes": sum(d["bytes"] for d in dropped.values())}

    def stop(self, cluster: Cluster) -> dict:
        python = _python(cluster)
        problems = []
        for node in self.nodes:
            try:
                if self.mode == "lose-unsynced":
                    cluster.db.start(node)
                else:
                    command(node, "unstall" if self.mode == "stall" else "stop-errors",
                            python=python)
            except Exception as e:  # noqa: BLE001 — the other nodes are still restored
                problems.append(f"{node.name}: {e}")
        if problems:
            raise FaultError(f"{self.stop_f}: " + "; ".join(problems))
        return {"mode": self.mode, "nodes": names(self.nodes)}
