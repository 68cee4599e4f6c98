"""Hand-written histories for the validator's tests: events built from
tuples, written one per line, and the check that a history is refused at
its bad line in the expected words.

`assert_rejected` validates with `validate_history` (the fast pass);
test_fast_validation.py points it at the exact reader instead.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from history_analysis.history import HistoryError
from history_analysis.history.scan import validate_history


def history(*events) -> list[dict]:
    """Events as (process, type, f, value[, extra fields]); index and time
    (1000 ns apart) are filled in file order."""
    out = []
    for i, (process, type_, f, value, *extra) in enumerate(events):
        event = {"index": i, "time": 1000 * (i + 1), "process": process,
                 "type": type_, "f": f, "value": value}
        out.append({**event, **(extra[0] if extra else {})})
    return out


def op(f, invoked, completed=None, type_="ok", process=0, **extra):
    """One operation: its invocation and, if `completed` is given, its completion."""
    events = [(process, "invoke", f, invoked)]
    if completed is not None:
        events.append((process, type_, f, completed, extra))
    return history(*events)


def write(tmp_path: Path, lines, end: str = "\n") -> Path:
    """Write dicts as JSON and strings verbatim, one per line; `end` follows the last."""
    text = "\n".join(json.dumps(x) if isinstance(x, dict) else x for x in lines)
    path = tmp_path / "history.jsonl"
    path.write_text(text + end, encoding="utf-8")
    return path


def assert_rejected(tmp_path: Path, lines, line: int, *fragments: str, end: str = "\n"):
    path = write(tmp_path, lines, end)
    with pytest.raises(HistoryError) as caught:
        validate_history(path)
    error = caught.value
    assert (error.path, error.line) == (str(path), line), error
    for fragment in fragments:
        assert fragment in error.message, error
    assert str(error) == f"{path}:{line}: {error.message}"
    return error


def send(value=17, offset=None, partition=1, topic="jt0"):
    return {"topic": topic, "partition": partition, "value": value, "offset": offset}


def tp(partition=0, topic="jt0"):
    return {"topic": topic, "partition": partition}


def read(offset=42, value=17, partition=1, **extra):
    return {"topic": "jt0", "partition": partition, "offset": offset, "value": value, **extra}


# A valid four-line history: poll by process 0, then send by process 1.
BASE = history(
    (0, "invoke", "poll", {}),
    (0, "ok", "poll", {"reads": [], "rebalances": []}),
    (1, "invoke", "send", {"sends": [send()]}),
    (1, "ok", "send", {"sends": [send(offset=42)]}),
)


def changed(line: int, drop: str | None = None, **changes) -> list[dict]:
    """BASE with the event on `line` (1-based) changed; `type_` sets `type`."""
    events = [dict(e) for e in BASE]
    event = events[line - 1]
    if "type_" in changes:
        changes["type"] = changes.pop("type_")
    event.update(changes)
    if drop:
        del event[drop]
    return events
