"""Reading a local container's files from the host, without `docker exec`.

A `docker exec` costs about 0.1 s and 0.12 CPU-seconds on this project's
machine (the CLI, dockerd, containerd and runc each take part), and the
harness reads small files on its nodes all the time: pid files and
/proc/PID/stat for every liveness look, every pause and kill, and every
role the nemesis asks about. Through `/proc/<init>/root` the host sees the
container's own mounts, its /proc included (its pid namespace's view), so
those reads cost microseconds.

The view is used only when it is certainly the container's: the engine is
local, and the container's pid 1 as seen through the view started at the
same instant as the host process `docker inspect` names (field 22 of
/proc/PID/stat counts from the same boot on both sides), checked again on
every read so a restarted container or a reused pid is noticed. A path with
a symbolic link along it is not read this way: an absolute link would
resolve against the host's root, not the container's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path, PurePosixPath

from cluster.docker_engine import docker_cli, engine_url
from cluster.node import stat_fields


class ContainerRoot:
    """The host's view of one container's root directory, when it has one."""

    def __init__(self, container: str):
        self.container = container
        # (host pid, start time); None not looked up yet; False: this host
        # cannot see the container (a remote engine, not root), so ask it.
        self._init: tuple[int, str] | None | bool = None

    def read(self, path: str | PurePosixPath) -> bytes | None:
        """The bytes of the absolute path in the container; None when this
        host cannot read it directly (then ask the container). A missing
        file raises FileNotFoundError, as a read in the container would."""
        root = self._root()
        parts = PurePosixPath(path).parts
        if root is None or not parts or parts[0] != "/":
            return None
        at = root
        for part in parts[1:]:
            at = at / part
            if at.is_symlink():
                return None
        return at.read_bytes()

    def _root(self) -> Path | None:
        if self._init is False:
            return None
        if self._init is None or not self._still(*self._init):
            self._init = self._inspect() if engine_url().startswith("unix://") else False
        return Path(f"/proc/{self._init[0]}/root") if self._init else None

    def _inspect(self) -> tuple[int, str] | None | bool:
        """(host pid, start time) of the container's init; None when it
        does not run now (look again later), False when this host cannot
        see into it."""
        done = subprocess.run([docker_cli(), "inspect", "-f", "{{.State.Pid}}", self.container],
                              capture_output=True, text=True, timeout=60)
        pid = done.stdout.strip()
        if done.returncode != 0 or not pid.isdigit() or pid == "0":
            return None
        start = _start_time(Path(f"/proc/{pid}/stat"))
        return (int(pid), start) if start is not None and self._still(int(pid), start) else False

    @staticmethod
    def _still(pid: int, start: str) -> bool:
        """The host process pid is the one seen before, and it is pid 1 of
        the namespace its root shows."""
        return (_start_time(Path(f"/proc/{pid}/stat")) == start
                and _start_time(Path(f"/proc/{pid}/root/proc/1/stat")) == start)


def _start_time(stat: Path) -> str | None:
    """The start time in a /proc/PID/stat; None when it cannot be read."""
    try:
        fields = stat_fields(stat.read_text(errors="replace"))
    except OSError:
        return None
    return fields[19] if len(fields) > 19 else None
