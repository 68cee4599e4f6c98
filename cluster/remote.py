"""Daemons on a node that kchaos reaches only through commands (a docker
container, an ssh host): the part of the `Node` protocol that both
backends share, built on the node's `run`.

A daemon is started detached (`setsid -f`) under a fixed `sh` script, its
supervisor, that appends the daemon's output to the log, runs it in a
session of its own (`setsid`) after it wrote its pid to
`<workdir>/.daemons/<name>.pid`, waits for it and writes its exit status
(128 + N for signal N, as a shell says it) to `<name>.exit`: so
stop_daemon can tell how a daemon ended, as on the local backend, even
one that died before it was asked. The scripts are constants and argv
reaches them as positional parameters, so nothing is ever quoted twice.
The pid is the daemon's process group too: signals reach its children
(and not the supervisor), as on the local backend. The pid file also
holds the process's start time (field 22 of /proc/PID/stat, read by the
daemon's script before it execs): a pid whose process is a zombie or
gone, or that another process now holds (a reused pid, after a reboot or
a container restart), counts as not running.
"""

from __future__ import annotations

import signal as signals
import time
from collections.abc import Mapping, Sequence
from pathlib import PurePath, PurePosixPath

from cluster.node import CommandError, check_argv, stat_fields

DAEMONS = ".daemons"
# The daemon's own script: $0 pid file, then argv. `exec` keeps the pid and
# the start time: the ones written are the daemon's own (and its session's
# and group's: not a group leader, `setsid` makes one in place, without a
# fork). The start time is the 20th field after the ") " that ends the
# command name in /proc/self/stat (the name may hold spaces); the function
# shifts its own positional parameters, not argv. No single quote in it:
# the supervisor quotes it whole.
_RUN = ('read -r stat < /proc/self/stat; started() { shift 19; start=$1; }; '
        'started ${stat##*") "}; echo "$$ $start" > "$0"; exec setsid "$@"')
# The supervisor: $1 pid file, $2 log, then argv. It waits in the
# foreground, so no signal is ignored in the daemon (a shell's background
# job would ignore SIGINT), and records the status beside the pid file.
_LAUNCH = ('pidfile=$1; log=$2; shift 2; exec >> "$log" 2>&1 < /dev/null; '
           f"sh -c '{_RUN}' \"$pidfile\" \"$@\"; "
           'echo $? > "${pidfile%.pid}.exit"')
# How long the supervisor may take to write the status once the daemon is gone.
_EXIT_WAIT = 2.0


class RemoteDaemons:
    """Mixin for a node class that has `name`, `workdir` and `run(argv,
    check=, timeout=, input=)`; gives it start_daemon, signal, is_running,
    pid and stop_daemon, whose state lives on the node (pid files), so a
    new harness process finds the daemons of a dead one."""

    name: str
    workdir: PurePath

    def _pid_file(self, name: str) -> PurePosixPath:
        return PurePosixPath(self.workdir) / DAEMONS / f"{name}.pid"

    def _exit_file(self, name: str) -> PurePosixPath:
        return PurePosixPath(self.workdir) / DAEMONS / f"{name}.exit"

    def start_daemon(self, name: str, argv: Sequence[str], *,
                     env: Mapping[str, str] | None = None,
                     log: str | PurePath | None = None) -> None:
        argv = check_argv(argv)
        if self.is_running(name):
            raise RuntimeError(f"daemon {name!r} already runs on {self.name} "
                               f"(pid {self.pid(name)}): stop_daemon({name!r}) first")
        log_path = PurePosixPath(self.workdir) / (log if log is not None else f"{name}.log")
        pid_file = self._pid_file(name)
        self.run(["mkdir", "-p", str(pid_file.parent), str(log_path.parent)])
        self.run(["rm", "-f", str(pid_file), str(self._exit_file(name))])
        if env:
            argv = ["env", *(f"{k}={v}" for k, v in env.items()), *argv]
        self.run(["setsid", "-f", "sh", "-c", _LAUNCH, "kchaos-daemon", str(pid_file),
                  str(log_path), *argv])
        deadline = time.monotonic() + 10.0
        while self.pid(name) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"daemon {name!r} on {self.name} wrote no pid file "
                                   f"{pid_file} within 10 s")
            time.sleep(0.05)

    def _started(self, name: str) -> tuple[int, str] | None:
        """(pid, start time) from the daemon's pid file; None if it was never
        started (or its launch script has not written the file yet)."""
        fields = (self._read(self._pid_file(name)) or "").split()
        if len(fields) != 2 or not fields[0].isdigit():
            return None
        return int(fields[0]), fields[1]

    def _read(self, path: PurePosixPath) -> str | None:
        """A small file's text (a pid file, /proc/PID/stat), read with `get`
        (an SFTP request, a read through a container's root: no command
        started); None when there is none, or the command that reads it
        fails (a removed container runs nothing)."""
        try:
            return self.get(path).decode(errors="replace")
        except (FileNotFoundError, ProcessLookupError, CommandError):
            return None

    def pid(self, name: str) -> int | None:
        """The daemon's last pid (also its process group's), None if it was
        never started."""
        started = self._started(name)
        return None if started is None else started[0]

    def is_running(self, name: str) -> bool:
        started = self._started(name)
        return started is not None and self._alive(*started)

    def _alive(self, pid: int, start: str) -> bool:
        # The state (Z is a zombie nobody reaped) and the start time.
        fields = stat_fields(self._read(PurePosixPath(f"/proc/{pid}/stat")) or "")
        return len(fields) > 19 and fields[0] != "Z" and fields[19] == start

    def signal(self, name: str, sig: int) -> None:
        started = self._started(name)
        if started is not None and self._alive(*started):
            self.run(["kill", f"-{int(sig)}", "--", f"-{started[0]}"], check=False,
                     timeout=30.0)

    def stop_daemon(self, name: str, *, sig: int = signals.SIGTERM,
                    timeout: float = 10.0) -> int | None:
        """As `Node.stop_daemon`: the status its supervisor recorded (-N for
        signal N); -sig (or -SIGKILL) when there is none, the supervisor
        having gone with its node (a reboot, a removed container)."""
        started = self._started(name)
        if started is None:
            return None
        pid = started[0]
        self.signal(name, signals.SIGCONT)  # a paused process cannot act on SIGTERM
        self.signal(name, sig)
        for final in (False, True):
            deadline = time.monotonic() + timeout
            while self._alive(*started):
                if time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            else:
                status = self._exit_status(name)
                if status is not None:
                    return status
                return -int(sig) if not final else -int(signals.SIGKILL)
            self.signal(name, signals.SIGKILL)
        raise RuntimeError(f"daemon {name!r} (pid {pid}) on {self.name} survives SIGKILL "
                           f"after {timeout} s")

    def daemons(self) -> list[str]:
        """Names of every daemon with a pid file here (this harness's or a
        dead one's)."""
        listing = self.run(["ls", str(PurePosixPath(self.workdir) / DAEMONS)], check=False)
        return [e.removesuffix(".pid") for e in listing.stdout.split() if e.endswith(".pid")]

    def signal_all(self, sig: int) -> None:
        """sig to every daemon (heal: SIGCONT)."""
        for name in self.daemons():
            self.signal(name, sig)

    def _exit_status(self, name: str) -> int | None:
        """The status the supervisor wrote, as subprocess reports one (-N
        for a signal); None if it writes none within _EXIT_WAIT."""
        deadline = time.monotonic() + _EXIT_WAIT
        while True:
            text = (self._read(self._exit_file(name)) or "").strip()
            if text.isdigit():
                status = int(text)
                return -(status - 128) if status > 128 else status
            if time.monotonic() > deadline:
                return None
            time.sleep(0.05)

    def stop_all(self) -> None:
        """SIGKILL every daemon with a pid file (teardown)."""
        for name in self.daemons():
            self.stop_daemon(name, sig=signals.SIGKILL)
