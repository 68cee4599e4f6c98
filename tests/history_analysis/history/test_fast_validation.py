"""The fast pass (scan.py: whole blocks at once) against the exact validator
(HistoryReader: one line at a time), on generated histories: valid ones,
and the same with one thing changed — both must accept with the same
report, or both refuse at the same line with the same message.

test_reader.py's cases run here too, on the exact reader (there,
`validate_history` runs the fast pass), so every one of them holds for both.
"""

from __future__ import annotations

import json
from unittest.mock import patch

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from history_analysis.history import HistoryError, scan
from history_analysis.history.reader import HistoryReader
from history_analysis.history.scan import validate_history
from tests.history_analysis.history import handwritten, test_reader
from tests.history_analysis.history.generated import histories


def exact(path):
    reader = HistoryReader(path)
    for _ in reader:
        pass
    return reader.report


@pytest.fixture(autouse=True)
def exact_reader_for_test_reader(monkeypatch):
    # Both call validate_history: test_reader.py's tests and the helper
    # they share (handwritten.assert_rejected).
    monkeypatch.setattr(test_reader, "validate_history", exact)
    monkeypatch.setattr(handwritten, "validate_history", exact)


# test_reader.py's tests, collected here as well: on the exact reader.
globals().update({name: test for name, test in vars(test_reader).items()
                  if name.startswith("test_")})


def events_of(model) -> list[dict]:
    return [{"index": i, "time": 1000 * (i + 1), "process": p, "type": t, "f": f, "value": v,
             **extra} for i, (p, t, f, v, extra) in enumerate(model.events)]


def _paths(event: dict, prefix=()):
    """Every (path, value) in an event, nested ones included."""
    for key, value in event.items():
        yield prefix + (key,), value
        if isinstance(value, dict):
            yield from _paths(value, prefix + (key,))
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if isinstance(item, dict):
                    yield from _paths(item, prefix + (key, i))


def _holder(event, path):
    for key in path[:-1]:
        event = event[key]
    return event, path[-1]


def _renumbered(events: list[dict]) -> None:
    for n, e in enumerate(events):
        if type(e.get("index")) is int and type(e.get("time")) is int:
            e["index"], e["time"] = n, 1000 * (n + 1)


MUTATIONS = (
    "none", "retype", "drop", "add", "swap", "blank", "index", "time", "duplicate",
    "delete", "echo", "type", "f", "reuse-ended", "error-null", "truncate", "garbage-tail",
    "nemesis-spacing", "escaped-key", "duplicate-key", "non-ascii", "bad-utf8",
)


def mutate(events: list[dict], kind: str, draw) -> bytes:
    """The history's text with one thing changed (sometimes harmlessly)."""
    i = draw(st.integers(0, len(events) - 1))
    event = events[i]
    if kind in ("retype", "drop", "add"):
        path, _ = draw(st.sampled_from(list(_paths(event))))
        holder, key = _holder(event, path)
        if kind == "retype":
            holder[key] = draw(st.sampled_from(["x", 1.5, -1, None, True, [], {}, 2**63, 2**31]))
        elif kind == "drop" and isinstance(holder, dict):
            del holder[key]
        elif isinstance(holder, dict):
            holder["extra"] = 1
    elif kind == "swap" and i + 1 < len(events):
        events[i], events[i + 1] = events[i + 1], events[i]
    elif kind == "index":
        event["index"] += draw(st.sampled_from([1, -1]))
    elif kind == "time":
        event["time"] = draw(st.sampled_from([-1, 0, 2**63, 2**62]))
    elif kind == "duplicate":
        events.insert(i, json.loads(json.dumps(event)))
    elif kind == "delete":
        del events[i]
    elif kind == "echo" and event["type"] != "invoke":
        value = event["value"]
        listed = next((value[k] for k in ("sends", "offsets", "partitions", "topics")
                       if value.get(k)), None)
        if listed:
            listed.pop()
        elif "group" in value:
            value["group"] += "-other"
    elif kind == "type":
        event["type"] = draw(st.sampled_from(["ok", "fail", "info", "invoke"]))
    elif kind == "f":
        event["f"] = draw(st.sampled_from(["send", "poll", "commit", "kill", "heal"]))
    elif kind == "reuse-ended":
        ended = [e["process"] for e in events if e["type"] == "info" and e["process"] >= 0]
        if ended:
            events.append({"process": draw(st.sampled_from(ended)), "type": "invoke",
                           "f": "poll", "value": {}})
            events[-1] = {"index": len(events) - 1, "time": 1000 * len(events), **events[-1]}
    elif kind == "error-null":
        event["error"] = None
    elif kind == "non-ascii" and event["type"] in ("fail", "info"):
        event["error"] = "délai dépassé ⏱"
    if kind in ("swap", "duplicate", "delete") and draw(st.booleans()):
        _renumbered(events)   # so the order itself is what breaks a rule

    separators = draw(st.sampled_from([(",", ":"), (", ", ": ")]))
    lines = [json.dumps(e, separators=separators, ensure_ascii=False) for e in events]
    if kind == "nemesis-spacing":
        lines = [line.replace('"process":', '"process"\t :  ').replace('"process": ', '"process" :')
                 if e.get("process") == -1 else line for line, e in zip(lines, events)]
    elif kind == "escaped-key":
        lines[i] = lines[i].replace('"process"', '"\\u0070rocess"')
    elif kind == "duplicate-key":
        lines[i] = '{"time": "first", ' + lines[i][1:]   # Python's json: the last one wins
    elif kind == "blank":
        lines.insert(i, draw(st.sampled_from(["", " ", "\t"])))
    elif kind == "garbage-tail":
        lines.append("{not json")
    text = "".join(line + "\n" for line in lines).encode()
    if kind == "bad-utf8":
        text = text.replace(b'"type"', b'"t\xffpe"', 1)
    if kind == "truncate":
        text = text[:-draw(st.integers(1, max(1, len(lines[-1]))))]
    return text


def outcome(validator, path):
    try:
        report = validator(path)
    except HistoryError as e:
        return ("refused", e.line, e.message)
    return ("accepted", report.events, dict(report.operations), report.unmatched,
            report.truncated)


@settings(max_examples=250, deadline=None, suppress_health_check=[
    HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
@given(model=histories(max_steps=30), kind=st.sampled_from(MUTATIONS), data=st.data())
def test_the_fast_pass_and_the_exact_one_agree(tmp_path_factory, model, kind, data):
    events = events_of(model)
    text = mutate(events, kind, data.draw) if events else b"{}\n"
    path = tmp_path_factory.mktemp("h") / "history.jsonl"
    path.write_bytes(text)
    # Small blocks too: operations then span blocks, and so does the state.
    block = data.draw(st.sampled_from([scan.BLOCK_BYTES, 64, 400]), label="block bytes")
    with patch.object(scan, "BLOCK_BYTES", block):
        fast = outcome(validate_history, path)
    assert fast == outcome(exact, path)


def test_a_disagreement_is_reported_not_written(tmp_path, monkeypatch):
    """Should the fast pass ever flag a line the exact validator passes,
    ingest says so and writes nothing."""
    from history_analysis.ingest import ingest

    run = tmp_path / "run"
    run.mkdir()
    path = run / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in handwritten.BASE))
    monkeypatch.setattr(scan, "envelope_faults", lambda env, *_: env.index == 2)
    with pytest.raises(scan.Disagreement, match=r"history.jsonl:3: the fast validation "
                                                r"flagged this line, the exact validator "
                                                r"passes it"):
        ingest(run)
    assert not (run / "history").exists()


@pytest.mark.parametrize("block", [scan.BLOCK_BYTES, 64])
@pytest.mark.parametrize("dropped", ["type", "f"])
def test_a_completion_without_its_type_or_f_is_refused_as_the_exact_pass_does(
        tmp_path, block, dropped):
    """Hypothesis's find (a completion whose `type` was dropped right after
    its invocation): the fast pass paired it as a completion and crashed."""
    events = [{"index": 0, "time": 1000, "process": 0, "type": "invoke", "f": "send",
               "value": {"sends": []}},
              {"index": 1, "time": 2000, "process": 0, "type": "info", "f": "send",
               "value": {"sends": []}}]
    del events[1][dropped]
    path = tmp_path / "history.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    with patch.object(scan, "BLOCK_BYTES", block):
        fast = outcome(validate_history, path)
    assert fast[0] == "refused" and fast[1] == 2
    assert fast == outcome(exact, path)
