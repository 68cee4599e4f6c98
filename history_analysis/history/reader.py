"""The exact validator: `history.jsonl` against every rule of the contract,
one line at a time (docs/history.md).

`HistoryReader` yields events one at a time, keeping only the operations
still outstanding (one per live process), so a history larger than memory
reads fine. The first broken rule raises `HistoryError` naming the file, the
line, the field and what was expected. A last line cut short by a killed
writer is not an error: it is dropped and reported, as are invocations that
never completed (they count as `info`).

This is the reference for every rule and every message. Ingest's fast pass
(scan.py) checks whole blocks at once and, to describe a fault, runs
`check_lines` on the faulty block from the state carried into it
(`ReaderState`), so both name a fault in the same words.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from history_analysis.history.outcome import (
    HistoryError, HistoryReport, TruncatedLine, Unmatched,
)
from history_analysis.history.schema import (
    CLIENT_FS, EVENT_FIELDS, EVENT_TYPES, INT64_MAX, NEMESIS_FS, NEMESIS_PROCESS,
    PHASES, Violation, check_completion_value, check_invocation_value,
)
from history_analysis.history.strict_json import loads


@dataclass
class Outstanding:
    """An invocation waiting for its completion."""
    line: int
    index: int
    f: str
    value: Any
    phase: str


@dataclass
class ReaderState:
    """What the rules need to know of the lines before: the next index, the
    last time, the invocations outstanding per process and the processes
    an `info` completion ended."""
    next_index: int = 0
    last_time: int = 0
    outstanding: dict[int, Outstanding] = field(default_factory=dict)
    ended: set[int] = field(default_factory=set)


_FIELD_ORDER = tuple(EVENT_FIELDS)
_ALLOWED_FIELDS = ", ".join(_FIELD_ORDER)
_F_NAMES = frozenset(CLIENT_FS) | frozenset(NEMESIS_FS)


class HistoryReader:
    """Iterate over the validated events of one history file, one line at
    a time (the exact validator: it names the line, the field and what was
    expected).

    After iteration, `report` holds the counts, the unmatched invocations and
    the truncated last line, if any.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = os.fspath(path)
        self.report = HistoryReport(self.path)

    def __iter__(self) -> Iterator[dict]:
        report = self.report = HistoryReport(self.path)
        state = ReaderState()
        try:
            handle = open(self.path, "rb")
        except OSError as e:
            raise HistoryError(self.path, 0, f"cannot read the history: {e.strerror}") from None
        with handle:
            for event in check_lines(self.path, handle, 1, state, report):
                yield event
        report.unmatched = sorted(
            (Unmatched(o.line, o.index, p, o.f) for p, o in state.outstanding.items()),
            key=lambda u: u.index)


def check_lines(path: str, lines: Iterable[bytes], first_line: int, state: ReaderState,
                report: HistoryReport | None = None) -> Iterator[dict]:
    """Validate raw lines (bytes, each ending in a newline but maybe the
    last) from `state`, which they update; yield each event. The first
    broken rule raises HistoryError at its line. A last line without its
    newline that does not parse is dropped and reported (a writer killed
    mid-line)."""
    line_no = first_line - 1
    for raw in lines:
        line_no += 1
        try:
            event = loads(raw.decode())
        except (ValueError, RecursionError) as e:
            # Only the last line can lack its newline: the writer was
            # killed mid-line, which the contract tolerates.
            if not raw.endswith(b"\n"):
                if report is not None:
                    report.truncated = TruncatedLine(line_no, len(raw))
                return
            raise HistoryError(path, line_no,
                               f"expected one JSON object per line: {_json_reason(e)}") \
                from None
        if type(event) is not dict:
            raise HistoryError(path, line_no, "expected one JSON object per "
                               f"line, got {type(event).__name__} {raw[:60]!r}")
        try:
            _check(event, line_no, state)
        except Violation as v:
            raise HistoryError(path, line_no, v.describe()) from None
        if report is not None:
            report.events += 1
            if event["type"] != "invoke":
                report.operations[(event["f"], event["type"])] += 1
        yield event


def _check(event: dict, line: int, state: ReaderState) -> None:
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
    if type(index) is not int or index != state.next_index:
        raise Violation("index", f"{state.next_index} (0, 1, 2, … in file order)", index)
    if type(time_) is not int or not state.last_time <= time_ <= INT64_MAX:
        raise Violation("time", f"an integer of nanoseconds ≥ {state.last_time} "
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
    # The optional fields may be null, as the nullable ones of a value may
    # be left out (schema.py): Arrow and Spark read both the same way.
    phase = event.get("phase")
    if phase is None:
        phase = "main"
    elif type(phase) is not str or phase not in PHASES:
        raise Violation("phase", EVENT_FIELDS["phase"][1], phase)
    if event.get("error") is not None:
        if type_ not in ("fail", "info"):
            raise Violation("error", f"only on fail or info completions, not on {type_}",
                            show_got=False)
        if type(event["error"]) is not str:
            raise Violation("error", "a string", event["error"])
    state.next_index = index + 1
    state.last_time = time_
    outstanding, ended = state.outstanding, state.ended

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
        outstanding[process] = Outstanding(line, index, f, value, phase)
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


def _json_reason(error: Exception) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at column {error.colno}"
    if isinstance(error, RecursionError):
        return "nested too deeply"
    return str(error)
