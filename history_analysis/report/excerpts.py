"""History excerpts: the lines of `history.jsonl` an anomaly's evidence
names, with their neighbours, read in one pass over the file (a line's
number is its event's index: docs/history.md)."""

from __future__ import annotations

from pathlib import Path

NEIGHBOURS = 2          # lines before and after each evidence line
LINE_CHARS = 400        # a longer line is cut, and says so


def wanted(evidence: list[int], invocations: dict[int, int]) -> list[int]:
    """The lines to show for one case: each evidence operation's
    invocation and completion, and NEIGHBOURS lines around the completion."""
    lines = set()
    for index in evidence:
        lines.update(range(max(0, index - NEIGHBOURS), index + NEIGHBOURS + 1))
        if index in invocations:
            lines.add(invocations[index])
    return sorted(lines)


def read_lines(path: Path, indexes: set[int]) -> dict[int, str]:
    """The lines at `indexes` (0-based), each cut at LINE_CHARS."""
    found: dict[int, str] = {}
    if not indexes or not path.is_file():
        return found
    last = max(indexes)
    with path.open("rb") as file:
        for number, line in enumerate(file):
            if number in indexes:
                text = line.decode("utf-8", "replace").rstrip("\n")
                found[number] = text if len(text) <= LINE_CHARS else (
                    text[:LINE_CHARS] + f" … ({len(text) - LINE_CHARS} more characters)")
            if number >= last:
                break
    return found
