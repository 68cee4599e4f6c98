"""The `Node` protocol: one machine of a cluster as kchaos sees it, whatever
backend made it (local processes and network namespaces, docker, ssh).

A node runs commands (argv lists, never shell strings), copies files in and
out, and keeps named daemons it can signal. Paths are paths on the node;
a relative one is relative to the node's working directory. Nemeses and DB
adapters are written against this protocol only, so every backend passes the
same test suite (tests/cluster).
"""

from __future__ import annotations

import re
import signal as signals
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path, PurePath
from typing import Protocol, runtime_checkable


@runtime_checkable
class Node(Protocol):
    name: str
    address: str
    workdir: PurePath
    # A Python on the node that has kchaos installed (the reference broker,
    # the disk gate); None when the node has none (a user's own hosts).
    python: str | None

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float | None = 60.0,
            input: bytes | None = None) -> subprocess.CompletedProcess:
        """Run argv on the node and wait; stdout and stderr come back as text.
        With check, a non-zero exit raises CommandError."""

    def put(self, path: str | PurePath, data: bytes) -> None:
        """Write data to path on the node, creating parent directories."""

    def get(self, path: str | PurePath) -> bytes:
        """The bytes of path on the node (FileNotFoundError if there is none)."""

    def start_daemon(self, name: str, argv: Sequence[str], *,
                     env: Mapping[str, str] | None = None,
                     log: str | PurePath | None = None) -> None:
        """Start argv in the background under name; stdout and stderr are
        appended to log (default `<workdir>/<name>.log`); env adds variables."""

    def signal(self, name: str, sig: int) -> None:
        """Send sig to the daemon's process group; nothing if it is not running."""

    def is_running(self, name: str) -> bool:
        """Whether the daemon name exists and has not exited (a paused one runs)."""

    def pid(self, name: str) -> int | None:
        """The daemon's last pid (its process group's too), None if it was
        never started."""

    def stop_daemon(self, name: str, *, sig: int = signals.SIGTERM,
                    timeout: float = 10.0) -> int | None:
        """Continue, send sig and wait for the daemon to exit (SIGKILL after
        timeout); its exit status, or None if it was never started."""


class Backend(Protocol):
    """What makes a run's nodes (local, docker, ssh, a user's containers)."""
    nodes: list
    namespaced: bool        # each node has a network namespace of its own

    def setup(self) -> None:
        """Make the nodes (removing what a crashed run of the same names left)."""

    def teardown(self) -> None:
        """Remove what setup made; safe in any state."""

    def collect_logs(self, dest_dir: Path) -> None:
        """The nodes' own logs (a container's), as dest_dir/<node>/...;
        nothing where a node has none beyond its daemons' logs."""

    def diagnose(self) -> str | None:
        """Why nodes may not reach each other, when the backend can tell."""


class SetupError(Exception):
    """The nodes or the system under test could not be set up for a reason
    the user can fix (an engine not running, a host key, a spec, a port in
    use): the message says what and how, and the command line prints it as
    one line of bad input rather than an internal error."""


class CommandError(subprocess.CalledProcessError):
    """A command on a node exited non-zero; the message names the node, the
    argv, the status and the command's stderr."""

    def __init__(self, node: str, returncode: int, argv: Sequence[str],
                 output: str = "", stderr: str = ""):
        super().__init__(returncode, list(argv), output, stderr)
        self.node = node

    def __str__(self) -> str:
        detail = (self.stderr or self.output or "").strip()
        return (f"on {self.node}: {subprocess.list2cmdline(self.cmd)} exited with "
                f"{self.returncode}" + (f": {detail}" if detail else ""))


class PortInUse(SetupError, OSError):
    """The port a daemon needs is taken, by whom if that can be found."""


def check_argv(argv: Sequence[str]) -> list[str]:
    """argv as a list of strings; a string (a shell command line) is refused."""
    if isinstance(argv, (str, bytes)) or not all(isinstance(a, str) for a in argv):
        raise TypeError(f"argv={argv!r} ({type(argv).__name__}): pass a list of strings, "
                        f"e.g. ['ls', '-l', path]; kchaos builds no shell strings")
    if not argv:
        raise ValueError("argv=[]: name a program to run")
    return list(argv)


_USERS = re.compile(r'\("([^"]*)",pid=(\d+)')


def port_owner(node: Node, host: str, port: int) -> str | None:
    """Who listens on host:port on node (a wildcard listener counts), as
    "pid N (command line)", "an unknown process" when `ss` cannot see it, or
    None when the port is free. Needs `ss` (iproute2) on the node."""
    try:
        listing = node.run(["ss", "-Hltnp", "sport", "=", f":{port}"], timeout=10.0).stdout
    except (FileNotFoundError, CommandError):
        return None
    for line in listing.splitlines():
        fields = line.split()
        if len(fields) < 4 or not _listens_on(fields[3], host, port):
            continue
        users = _USERS.search(line)
        if users is None:
            return "an unknown process (not visible to this user)"
        pid = users.group(2)
        try:
            cmdline = node.get(f"/proc/{pid}/cmdline").replace(b"\0", b" ").decode().strip()
        except OSError:
            cmdline = users.group(1)
        return f"pid {pid} ({cmdline})"
    return None


def _listens_on(local: str, host: str, port: int) -> bool:
    address, _, listen_port = local.rpartition(":")
    address = address.strip("[]").split("%")[0].removeprefix("::ffff:")
    return listen_port == str(port) and address in ("*", "0.0.0.0", "::", host)


def stat_fields(stat: str) -> list[str]:
    """The fields of a /proc/PID/stat after the ") " that ends the command
    name (which may hold spaces): [0] is the state (field 3), [19] the
    start time (field 22)."""
    return stat.rpartition(") ")[2].split()


def process_state(node: Node, pid: int) -> str | None:
    """The one-letter state of process pid on node, as /proc says ("T"
    stopped, "S" sleeping, "Z" a zombie ...); None when there is none.
    /proc, not ps: a minimal node image has no procps."""
    try:
        text = node.get(f"/proc/{pid}/stat").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat_fields(text)
    return fields[0] if fields else None


def until_frozen(node: Node, pids: Callable[[], list[int]], frozen: bool, what: str,
                 timeout: float = 10.0) -> None:
    """Until every process pids() names is in the stopped state (frozen) or
    none is, as /proc says: a pause or a resume is verified, not assumed.
    Nothing running is neither, and returns. A process in an uninterruptible
    wait (D) counts as stopped once sent SIGSTOP: it cannot take the signal
    in the kernel, and stops before it runs again. A write stalled by the
    disk gate waits so: FUSE turns the wait killable when a signal comes."""
    deadline = time.monotonic() + timeout
    stopped = ("T", "D") if frozen else ("T",)
    while True:
        states = {pid: process_state(node, pid) for pid in pids()}
        states = {pid: state for pid, state in states.items() if state is not None}
        if all((state in stopped) == frozen for state in states.values()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"{node.name}: {what} (pid, state: {sorted(states.items())}) "
                               f"{timeout:g} s after SIG{'STOP' if frozen else 'CONT'}")
        time.sleep(0.05)
