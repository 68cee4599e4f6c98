"""Stream and validate `history.jsonl` against every rule of HISTORY.md.

`HistoryReader` yields events one at a time, keeping only the operations
still outstanding (one per live process), so a history larger than memory
reads fine. The first broken rule raises `HistoryError` naming the file, the
line, the field and what was expected. A last line cut short by a killed
writer is not an error: it is dropped and reported, as are invocations that
never completed (they count as `info`, HISTORY.md).
"""

from __future__ import annotations

import json
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator

from history_analysis.history.contract import (
    CLIENT_FS, EVENT_FIELDS, EVENT_TYPES, INT64_MAX, NEMESIS_FS, NEMESIS_PROCESS,
    PHASES, Violation, check_completion_value, check_invocation_value,
)


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


@dataclass
class _Outstanding:
    line: int
    index: int
    f: str
    value: Any
    phase: str


_FIELD_ORDER = tuple(EVENT_FIELDS)
_ALLOWED_FIELDS = ", ".join(_FIELD_ORDER)
_F_NAMES = frozenset(CLIENT_FS) | frozenset(NEMESIS_FS)


class HistoryReader:
    """Iterate over the validated events of one history file.

    After iteration, `report` holds the counts, the unmatched invocations and
    the truncated last line, if any.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.report = HistoryReport(self.path)

    def __iter__(self) -> Iterator[dict]:
        report = self.report = HistoryReport(self.path)
        outstanding: dict[int, _Outstanding] = {}
        ended: set[int] = set()
        state = [0, 0]  # next index, last time
        try:
            handle = open(self.path, "rb")
        except OSError as e:
            raise HistoryError(self.path, 0, f"cannot read the history: {e.strerror}") from None
        with handle:
            line_no = 0
            for raw in handle:
                line_no += 1
                try:
                    event = _loads(raw.decode())
                except (ValueError, RecursionError) as e:
                    # Only the last line can lack its newline: the writer was
                    # killed mid-line, which HISTORY.md tolerates.
                    if not raw.endswith(b"\n"):
                        report.truncated = TruncatedLine(line_no, len(raw))
                        break
                    raise HistoryError(self.path, line_no,
                                       f"expected one JSON object per line: {_json_reason(e)}") \
                        from None
                if type(event) is not dict:
                    raise HistoryError(self.path, line_no, "expected one JSON object per "
                                       f"line, got {type(event).__name__} {raw[:60]!r}")
                try:
                    self._check(event, line_no, state, outstanding, ended)
                except Violation as v:
                    raise HistoryError(self.path, line_no, v.describe()) from None
                report.events += 1
                if event["type"] != "invoke":
                    report.operations[(event["f"], event["type"])] += 1
                yield event
        report.unmatched = sorted(
            (Unmatched(o.line, o.index, p, o.f) for p, o in outstanding.items()),
            key=lambda u: u.index)

    def _check(self, event: dict, line: int, state: list, outstanding: dict, ended: set) -> None:
        for name, (required, expected) in EVENT_FIELDS.items():
            if required and name not in event:
                raise Violation(name, f"to be present ({expected})", show_got=False)
        if len(event) > 6:
            for name in event:
                if name not in EVENT_FIELDS:
                    raise Violation(name, f"no such field (allowed: {_ALLOWED_FIELDS})",
                                    show_got=False)
        index, time_, process = event["index"], event["time"], event["process"]
        type_, f, value = event["type"], event["f"], event["value"]
        if type(index) is not int or index != state[0]:
            raise Violation("index", f"{state[0]} (0, 1, 2, … in file order)", index)
        if type(time_) is not int or not state[1] <= time_ <= INT64_MAX:
            raise Violation("time", f"an integer of nanoseconds ≥ {state[1]} "
                            "(the previous event's time; the clock is monotonic)", time_)
        if type(type_) is not str or type_ not in EVENT_TYPES:
            raise Violation("type", EVENT_FIELDS["type"][1], type_)
        if type(f) is not str or f not in _F_NAMES:
            raise Violation("f", "a client operation (" + ", ".join(CLIENT_FS)
                            + ") or a nemesis operation (" + ", ".join(NEMESIS_FS) + ")", f)
        if type(process) is not int or not NEMESIS_PROCESS <= process <= INT64_MAX:
            raise Violation("process", "a non-negative integer, or -1 for the nemesis", process)
        if process == NEMESIS_PROCESS and f not in NEMESIS_FS:
            raise Violation("f", "a nemesis operation for process -1", f)
        if process != NEMESIS_PROCESS and f not in CLIENT_FS:
            raise Violation("f", f"a client operation for process {process} "
                            "(nemesis operations belong to process -1)", f)
        phase = event.get("phase", "main")
        if type(phase) is not str or phase not in PHASES:
            raise Violation("phase", EVENT_FIELDS["phase"][1], phase)
        if "error" in event:
            if type_ not in ("fail", "info"):
                raise Violation("error", f"only on fail or info completions, not on {type_}",
                                show_got=False)
            if type(event["error"]) is not str:
                raise Violation("error", "a string", event["error"])
        state[0] = index + 1
        state[1] = time_

        if type_ == "invoke":
            if process in outstanding:
                prior = outstanding[process]
                raise Violation("type", f"a completion of process {process}'s {prior.f} "
                                f"invoked at line {prior.line} (a process has one "
                                "operation outstanding at a time)", type_)
            if process in ended:
                raise Violation("process", "a process that has not ended: an info "
                                "completion ends a process, the worker goes on as a new one",
                                process)
            check_invocation_value(f, value)
            outstanding[process] = _Outstanding(line, index, f, value, phase)
            return

        prior = outstanding.pop(process, None)
        if prior is None:
            raise Violation("type", f"invoke: process {process} has no outstanding "
                            "operation to complete", type_)
        if prior.f != f:
            raise Violation("f", f"{prior.f!r}, the operation process {process} invoked at "
                            f"line {prior.line}", f)
        if phase != prior.phase:
            raise Violation("phase", f"{prior.phase!r}, the phase of the invocation at "
                            f"line {prior.line}", phase)
        if process == NEMESIS_PROCESS:
            if type_ not in ("info", "fail"):
                raise Violation("type", "info or fail for a nemesis completion", type_)
        else:
            if f == "crash" and type_ != "info":
                raise Violation("type", "info for a crash completion", type_)
            if type_ == "info":
                ended.add(process)
        check_completion_value(f, type_, value, prior.value)


def _not_json(constant: str) -> None:
    raise ValueError(f"{constant} is not JSON")


_loads = json.JSONDecoder(parse_constant=_not_json).decode


def _json_reason(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at column {error.colno}"
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return str(error)


def validate_history(path: str | os.PathLike) -> HistoryReport:
    """Read a whole history, raising HistoryError at the first broken rule."""
    reader = HistoryReader(path)
    for _ in reader:
        pass
    return reader.report
