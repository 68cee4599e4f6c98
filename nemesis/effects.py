"""Deaths a fault explains. A broker that exits because of a fault injected
on its own node is that fault's effect, not a failure nobody asked for:
Apache Kafka halts when its log directory fails (KIP-112: a broker with a
single log directory, or whose metadata log directory fails, shuts down),
and the reference broker exits on an I/O error it cannot serve past. Such
a death is recorded with the log line that shows it, and the run is judged
on its history; any other death stays an unasked node failure.
"""

from __future__ import annotations

import re

# The faults whose injected errors a broker may die of: their start verbs.
ERROR_FAULTS = frozenset({"disk-errors"})
# What the injected errors look like in a broker's log: EIO (errno 5) as
# Java and Python print it; and EIO on a memory-mapped file (Kafka's
# indexes and snapshots), which the kernel delivers as SIGBUS and the JVM
# reports as an InternalError (seen: a Kafka broker starting during disk
# errors died so, with no "Input/output error" in its log).
IO_ERROR = re.compile(r"Input/output error|\[Errno 5\]|\bEIO\b"
                      r"|a fault occurred in (?:a recent|an) unsafe memory access")
LINE_LIMIT = 400        # characters of the log line kept as evidence


def injected_on(node: str, realised: list[dict]) -> bool:
    """Whether an error fault was applied to node in this run (the
    nemesis's completions, as test.json's outcome records them)."""
    return any(e.get("type") == "info" and e.get("f") in ERROR_FAULTS
               and node in ((e.get("value") or {}).get("nodes") or []) for e in realised)


def explained(node: str, realised: list[dict], log: str) -> str | None:
    """The log line by which node's broker died of an error injected on its
    own node, or None when no such fault hit it or its log shows no such
    error."""
    if not injected_on(node, realised):
        return None
    lines = [line.strip() for line in log.splitlines() if IO_ERROR.search(line)]
    return lines[-1][:LINE_LIMIT] if lines else None
