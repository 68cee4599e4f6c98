"""What validating a history comes to: a `HistoryReport` of a valid one, or
a `HistoryError` at the first broken rule.

Both validators hand back these same values — the exact one (reader.py)
and the fast pass (scan.py) — so their verdicts compare as equal.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field


class HistoryError(ValueError):
    """A history breaks the contract at one line."""

    def __init__(self, path: str | os.PathLike, line: int, message: str):
        self.path = os.fspath(path)
        self.line = line
        self.message = message
        super().__init__(f"{self.path}:{line}: {message}")


@dataclass(frozen=True)
class Unmatched:
    """An invocation without a completion: indeterminate (`info`)."""

    line: int
    index: int
    process: int
    f: str


@dataclass(frozen=True)
class TruncatedLine:
    line: int
    bytes: int


@dataclass
class HistoryReport:
    path: str
    events: int = 0
    operations: Counter = field(default_factory=Counter)  # completed ops by (f, type)
    unmatched: list[Unmatched] = field(default_factory=list)
    truncated: TruncatedLine | None = None

    def summary(self) -> str:
        completed = sum(self.operations.values())
        text = (f"{self.path}: valid history, {self.events} events, "
                f"{completed} completed operations, {len(self.unmatched)} unmatched "
                f"invocations (counted as info)")
        if self.truncated:
            text += (f"; truncated last line {self.truncated.line} "
                     f"({self.truncated.bytes} bytes) ignored")
        return text
