"""This machine's processes, read from /proc: what `kchaos heal` and
`kchaos clean` look for by a run's directory in their command lines, and
what a cancelled run looks for among its own children (kchaos/session.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator


def processes() -> Iterator[tuple[int, int, str]]:
    """(pid, parent pid, command line, its arguments joined by spaces) of
    every process still there when read, this one excepted."""
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                # The command name in parentheses may hold spaces and ")".
                ppid = int(f.read().rsplit(b")", 1)[1].split()[1])
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue        # gone meanwhile
        yield int(entry.name), ppid, cmdline
