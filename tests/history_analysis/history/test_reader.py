"""The history reader against every rule of docs/history.md (schema_version 1).

Each rejection test writes a small hand-made history (handwritten.py) and
checks that `validate_history` raises `HistoryError` at the bad line,
naming the field and what was expected.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from history_analysis.history import HistoryError, Unmatched
from history_analysis.history.scan import validate_history
from tests.history_analysis.history.handwritten import (
    BASE, assert_rejected, changed, history, op, read, send, tp, write,
)

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "queue-sample" / "history.jsonl"


# ---------------------------------------------------------------- lines

@pytest.mark.parametrize("text", [
    pytest.param("not json", id="not-json"),
    pytest.param('{"index": 1, "time": 20', id="cut-json-followed-by-newline"),
    pytest.param("", id="empty-line"),
    pytest.param("[1, 2]", id="json-list"),
    pytest.param("42", id="json-number"),
    pytest.param("null", id="json-null"),
])
def test_middle_line_must_be_a_json_object(tmp_path, text):
    lines = [BASE[0], text, *BASE[1:]]
    assert_rejected(tmp_path, lines, 2, "expected one JSON object per line")


def test_deeply_nested_json_is_an_error_not_a_crash(tmp_path):
    lines = [BASE[0], "[" * 100_000 + "]" * 100_000, *BASE[1:]]
    assert_rejected(tmp_path, lines, 2, "expected one JSON object per line")


# ---------------------------------------------------------------- top-level fields

@pytest.mark.parametrize("name", ["index", "time", "process", "type", "f", "value"])
def test_required_field_missing(tmp_path, name):
    assert_rejected(tmp_path, changed(2, drop=name), 2,
                    f"field '{name}': expected to be present")


@pytest.mark.parametrize("line, changes, fragments", [
    pytest.param(2, {"extra": 1}, ["field 'extra': expected no such field (allowed: index"],
                 id="unknown-field"),
    pytest.param(2, {"index": "1"}, ["field 'index': expected 1", "got '1'"], id="index-string"),
    pytest.param(2, {"index": True}, ["field 'index': expected 1", "got true"], id="index-bool"),
    pytest.param(2, {"index": 1.0}, ["field 'index': expected 1", "got 1.0"], id="index-float"),
    pytest.param(1, {"index": 1}, ["field 'index': expected 0", "got 1"], id="index-not-from-0"),
    pytest.param(3, {"index": 3}, ["field 'index': expected 2", "got 3"], id="index-gap"),
    pytest.param(3, {"index": 1}, ["field 'index': expected 2", "got 1"], id="index-duplicate"),
    pytest.param(1, {"time": -1}, ["field 'time': expected an integer of nanoseconds ≥ 0",
                                   "got -1"], id="time-negative"),
    pytest.param(3, {"time": 1500}, ["field 'time': expected an integer of nanoseconds ≥ 2000",
                                      "monotonic", "got 1500"], id="time-backwards"),
    pytest.param(2, {"time": 2000.5}, ["field 'time': expected an integer"], id="time-float"),
    pytest.param(1, {"process": -2}, ["field 'process': expected a non-negative integer, "
                                      "or -1 for the nemesis", "got -2"], id="process-minus-2"),
    pytest.param(1, {"process": True}, ["field 'process': expected a non-negative integer",
                                        "got true"], id="process-bool"),
    pytest.param(2, {"type_": "done"}, ["field 'type': expected one of invoke, ok, fail, info",
                                        "got 'done'"], id="type-unknown"),
    pytest.param(1, {"f": "produce"}, ["field 'f': expected a client operation (send",
                                       "or a nemesis operation", "got 'produce'"],
                 id="f-unknown"),
    pytest.param(1, {"f": "kill"}, ["field 'f': expected a client operation for process 0",
                                    "got 'kill'"], id="nemesis-f-on-client"),
    pytest.param(1, {"process": -1}, ["field 'f': expected a nemesis operation for process -1",
                                      "got 'poll'"], id="client-f-on-nemesis"),
    pytest.param(1, {"error": "boom"}, ["field 'error': expected only on fail or info "
                                        "completions, not on invoke"], id="error-on-invoke"),
    pytest.param(2, {"error": "boom"}, ["field 'error': expected only on fail or info "
                                        "completions, not on ok"], id="error-on-ok"),
    pytest.param(2, {"type_": "fail", "error": 42}, ["field 'error': expected a string",
                                                     "got 42"], id="error-not-string"),
    pytest.param(1, {"phase": "setup"}, ["field 'phase': expected one of main, final",
                                         "got 'setup'"], id="phase-unknown"),
])
def test_event_field_rules(tmp_path, line, changes, fragments):
    assert_rejected(tmp_path, changed(line, **changes), line, *fragments)


# ---------------------------------------------------------------- invocations and completions

POLLED = {"reads": [], "rebalances": []}


@pytest.mark.parametrize("events, line, fragments", [
    pytest.param(history((0, "ok", "poll", POLLED)), 1,
                 ["field 'type': expected invoke: process 0 has no outstanding operation"],
                 id="completion-without-invocation"),
    pytest.param(history((0, "invoke", "poll", {}), (0, "ok", "crash", {})), 2,
                 ["field 'f': expected 'poll', the operation process 0 invoked at line 1",
                  "got 'crash'"], id="completion-of-other-f"),
    pytest.param(history((0, "invoke", "poll", {}), (1, "invoke", "poll", {}),
                         (0, "invoke", "crash", {})), 3,
                 ["field 'type': expected a completion of process 0's poll invoked at line 1",
                  "one operation outstanding", "got 'invoke'"], id="second-invoke-outstanding"),
    pytest.param(history((0, "invoke", "poll", {}), (0, "info", "poll", {}),
                         (0, "invoke", "poll", {})), 3,
                 ["field 'process': expected a process that has not ended", "got 0"],
                 id="invoke-after-info"),
    pytest.param(history((0, "invoke", "crash", {}), (0, "info", "crash", {}),
                         (0, "invoke", "poll", {})), 3,
                 ["field 'process': expected a process that has not ended"],
                 id="invoke-after-crash"),
    pytest.param(op("crash", {}, {}, "ok"), 2,
                 ["field 'type': expected info for a crash completion", "got 'ok'"],
                 id="crash-completed-ok"),
    pytest.param(op("kill", {"nodes": ["n1"]}, {"nodes": ["n1"]}, "ok", process=-1), 2,
                 ["field 'type': expected info or fail for a nemesis completion", "got 'ok'"],
                 id="nemesis-completed-ok"),
    pytest.param(op("poll", {}, POLLED, phase="final"), 2,
                 ["field 'phase': expected 'main', the phase of the invocation at line 1",
                  "got 'final'"], id="phase-final-completion-of-main-invoke"),
    pytest.param(history((0, "invoke", "poll", {}, {"phase": "final"}),
                         (0, "ok", "poll", POLLED)), 2,
                 ["field 'phase': expected 'final', the phase of the invocation at line 1",
                  "got 'main'"], id="phase-main-completion-of-final-invoke"),
])
def test_operation_protocol(tmp_path, events, line, fragments):
    assert_rejected(tmp_path, events, line, *fragments)


# ---------------------------------------------------------------- values per f

GROUP_PARTS = {"group": "g0", "partitions": [tp(0)]}
COMMIT_VALUE = {"group": "g0", "offsets": [{**tp(0), "offset": 3}]}


@pytest.mark.parametrize("events, line, field, expected", [
    # send
    pytest.param(op("send", {"sends": [send(offset=5)]}), 1,
                 "value.sends[0].offset", "null, got 5", id="send-invoke-offset-not-null"),
    pytest.param(op("send", {"sends": [send(value=2**63)]}), 1, "value.sends[0].value",
                 "a 64-bit integer, got 9223372036854775808", id="send-value-beyond-int64"),
    pytest.param(op("send", {"sends": [send(partition=-1)]}), 1, "value.sends[0].partition",
                 "a partition number (0 to 2147483647), got -1", id="send-partition-negative"),
    pytest.param(op("send", {"sends": [send(partition=2**31)]}), 1, "value.sends[0].partition",
                 "a partition number (0 to 2147483647), got 2147483648",
                 id="send-partition-beyond-int32"),
    pytest.param(op("send", {}), 1, "value.sends", "to be present", id="send-missing-sends"),
    pytest.param(op("send", {"sends": [{**send(), "key": "k"}]}), 1, "value.sends[0].key",
                 "no such field (allowed: topic, partition, value, offset)",
                 id="send-extra-field"),
    pytest.param(op("send", {"sends": [send()]}, {"sends": [send(0, 1), send(1, 2)]}), 2,
                 "value.sends", "1 sends, as invoked", id="send-completion-other-count"),
    pytest.param(op("send", {"sends": [send(17)]}, {"sends": [send(18, 42)]}), 2,
                 "value.sends[0].value", "the invocation's 17, got 18",
                 id="send-completion-other-value"),
    pytest.param(op("send", {"sends": [send()]}, {"sends": [send(offset=-1)]}), 2,
                 "value.sends[0].offset", "a non-negative 64-bit integer or null, got -1",
                 id="send-completion-offset-negative"),
    # poll
    pytest.param(op("poll", {"max": 10}), 1, "value.max",
                 "no such field (allowed: no fields)", id="poll-invoke-not-empty"),
    pytest.param(op("poll", []), 1, "value", "an object, got []", id="poll-invoke-list"),
    pytest.param(op("poll", {}, {}), 2, "value.reads", "to be present",
                 id="poll-ok-without-reads"),
    pytest.param(op("poll", {}, {"reads": [{"topic": "jt0", "partition": 1, "value": 17}]}), 2,
                 "value.reads[0].offset", "to be present", id="poll-read-offset-missing"),
    pytest.param(op("poll", {}, {"reads": [read(value=None, raw="not base64!")]}), 2,
                 "value.reads[0].raw", "base64 text", id="read-raw-not-base64"),
    pytest.param(op("poll", {}, {"reads": [read(value=17, raw="MTc=")]}), 2,
                 "value.reads[0].raw", "only on a read whose value is null",
                 id="read-raw-with-int-value"),
    pytest.param(op("poll", {}, {"reads": [], "rebalances": [
        {"kind": "gained", "group": "g0", "partitions": [tp(0)]}]}), 2,
                 "value.rebalances[0].kind",
                 "one of assigned, revoked, lost, reset, got 'gained'",
                 id="rebalance-kind-unknown"),
    pytest.param(op("poll", {}, {"reads": [], "rebalances": [
        {"kind": "assigned", "group": None, "partitions": [tp(0)]}]}), 2,
                 "value.rebalances[0].group", "a string unless the kind is reset",
                 id="rebalance-without-group"),
    # assign, subscribe
    pytest.param(op("assign", {"partitions": [tp(0)]}), 1, "value.seek_to_beginning",
                 "to be present", id="assign-without-seek"),
    pytest.param(op("subscribe", {"group": "g0", "topics": ["jt0", 1]}), 1, "value.topics[1]",
                 "a string, got 1", id="subscribe-topic-not-string"),
    pytest.param(op("subscribe", {"group": "g0", "topics": "jt0"}), 1, "value.topics",
                 "a list, got 'jt0'", id="subscribe-topics-not-list"),
    # commit, committed
    pytest.param(op("commit", {"group": "g0", "offsets": [{**tp(0), "offset": -1}]}), 1,
                 "value.offsets[0].offset", "a non-negative 64-bit integer, got -1",
                 id="commit-offset-negative"),
    pytest.param(op("commit", COMMIT_VALUE, {**COMMIT_VALUE, "group": "g1"}), 2, "value",
                 "the same value as the commit invocation", id="commit-completion-not-same"),
    pytest.param(op("assign", {"partitions": [tp(0)], "seek_to_beginning": True},
                    {"partitions": [tp(1)], "seek_to_beginning": True}), 2, "value",
                 "the same value as the assign invocation", id="assign-completion-not-same"),
    pytest.param(op("committed", GROUP_PARTS,
                    {"group": "g1", "offsets": [{**tp(0), "offset": None}]}), 2,
                 "value.group", "the invocation's group 'g0', got 'g1'",
                 id="committed-other-group"),
    pytest.param(op("committed", GROUP_PARTS, {**GROUP_PARTS, "group": "g1"}, "info"), 2,
                 "value.group", "the invocation's group 'g0', got 'g1'",
                 id="committed-echo-other-group"),
    # end-offsets, txn
    pytest.param(op("end-offsets", {"partitions": [tp(0)]},
                    {"offsets": [{**tp(0), "offset": None}]}), 2,
                 "value.offsets[0].offset", "a non-negative 64-bit integer, got null",
                 id="end-offsets-offset-null"),
    pytest.param(op("txn", {"sends": [], "polls": "yes"}), 1, "value.polls",
                 "true or false, got 'yes'", id="txn-polls-not-bool"),
    pytest.param(op("txn", {"sends": [], "polls": True}, {"sends": []}), 2, "value.reads",
                 "to be present", id="txn-ok-without-reads"),
    # nemesis
    pytest.param(op("kill", ["n1"], process=-1), 1, "value", "an object, got ['n1']",
                 id="nemesis-invoke-value-list"),
    pytest.param(op("kill", {"nodes": ["n1"]}, "killed", "info", process=-1), 2, "value",
                 "an object, got 'killed'", id="nemesis-completion-value-string"),
])
def test_value_rules(tmp_path, events, line, field, expected):
    assert_rejected(tmp_path, events, line, f"field '{field}': expected {expected}")


# ---------------------------------------------------------------- valid histories

def test_valid_history_with_every_f(tmp_path):
    events = history(
        (0, "invoke", "send", {"sends": [send(1, partition=0), send(2, partition=1)]}),
        (1, "invoke", "assign", {"partitions": [tp(0), tp(1)], "seek_to_beginning": True}),
        (0, "ok", "send", {"sends": [send(1, 0, partition=0), send(2, 0, partition=1)]}),
        (1, "ok", "assign", {"partitions": [tp(0), tp(1)], "seek_to_beginning": True}),
        (2, "invoke", "subscribe", {"group": "g0", "topics": ["jt0"]}),
        (2, "ok", "subscribe", {"group": "g0", "topics": ["jt0"]}),
        (2, "invoke", "poll", {}),
        # "/w==" is the single byte 0xff: a record value that is not ASCII decimal.
        (2, "ok", "poll", {"reads": [read(0, 1, partition=0), read(0, None, raw="/w==")],
                           "rebalances": [{"kind": "assigned", "group": "g0",
                                           "partitions": [tp(0), tp(1)]}]}),
        (-1, "invoke", "start-partition", {"kind": "majority-ring", "grudge": {"n1": ["n2"]}}),
        (0, "invoke", "txn", {"sends": [send(3, partition=0)], "polls": True}),
        (-1, "info", "start-partition", {"grudge": {"n1": ["n2"]}}),
        (0, "ok", "txn", {"sends": [send(3, 1, partition=0)], "reads": [read(1, 2)]}),
        (2, "invoke", "commit", COMMIT_VALUE),
        (2, "ok", "commit", COMMIT_VALUE),
        (2, "invoke", "committed", {"group": "g0", "partitions": [tp(0), tp(1)]}),
        (2, "ok", "committed", {"group": "g0", "offsets": [{**tp(0), "offset": 3},
                                                           {**tp(1), "offset": None}]}),
        (3, "invoke", "crash", {}),
        (3, "info", "crash", {}),
        (-1, "invoke", "stop-partition", {}),
        (-1, "fail", "stop-partition", {}, {"error": "iptables: permission denied"}),
        (4, "invoke", "end-offsets", {"partitions": [tp(0), tp(1)]}, {"phase": "final"}),
        (4, "ok", "end-offsets", {"offsets": [{**tp(0), "offset": 2}, {**tp(1), "offset": 1}]},
         {"phase": "final"}),
    )
    report = validate_history(write(tmp_path, events))
    assert report.events == len(events) == 22
    assert report.operations == Counter({
        ("send", "ok"): 1, ("assign", "ok"): 1, ("subscribe", "ok"): 1, ("poll", "ok"): 1,
        ("start-partition", "info"): 1, ("txn", "ok"): 1, ("commit", "ok"): 1,
        ("committed", "ok"): 1, ("crash", "info"): 1, ("stop-partition", "fail"): 1,
        ("end-offsets", "ok"): 1})
    assert report.unmatched == [] and report.truncated is None


@pytest.mark.parametrize("f, invoked, completed, type_", [
    pytest.param("poll", {}, {}, "info", id="poll-info-empty"),
    pytest.param("poll", {}, {}, "fail", id="poll-fail-empty"),
    pytest.param("committed", GROUP_PARTS, GROUP_PARTS, "info", id="committed-info-echo"),
    pytest.param("send", {"sends": [send()]}, {"sends": [send()]}, "fail", id="send-fail-echo"),
    pytest.param("txn", {"sends": [send()], "polls": True}, {"sends": [send()], "polls": True},
                 "fail", id="txn-fail-echo"),
    pytest.param("end-offsets", {"partitions": [tp(0)]}, {"partitions": [tp(0)]}, "info",
                 id="end-offsets-info-echo"),
])
def test_fail_or_info_completion_may_echo_the_invocation(tmp_path, f, invoked, completed, type_):
    events = op(f, invoked, completed, type_, error="TimeoutError: no answer")
    report = validate_history(write(tmp_path, events))
    assert report.events == 2 and report.operations == Counter({(f, type_): 1})


def test_read_with_null_value_and_base64_raw_is_accepted(tmp_path):
    events = op("poll", {}, {"reads": [read(value=None, raw="aGVsbG8=")]})
    assert validate_history(write(tmp_path, events)).operations[("poll", "ok")] == 1


def test_truncated_last_line_is_reported_not_an_error(tmp_path):
    cut = json.dumps(BASE[2])[:25]
    report = validate_history(write(tmp_path, [*BASE[:2], cut], end=""))
    assert report.truncated is not None
    assert (report.truncated.line, report.truncated.bytes) == (3, len(cut))
    assert report.events == 2
    assert report.operations == Counter({("poll", "ok"): 1})


def test_truncated_text_on_a_middle_line_is_an_error(tmp_path):
    cut = json.dumps(BASE[2])[:25]
    assert_rejected(tmp_path, [*BASE[:2], cut, *BASE[2:]], 3,
                    "expected one JSON object per line")


def test_complete_last_line_without_newline_is_an_event(tmp_path):
    report = validate_history(write(tmp_path, BASE, end=""))
    assert report.events == 4 and report.truncated is None
    assert report.operations == Counter({("poll", "ok"): 1, ("send", "ok"): 1})


def test_unmatched_invocations_are_reported_sorted_by_index(tmp_path):
    events = history(
        (0, "invoke", "poll", {}),
        (5, "invoke", "send", {"sends": [send()]}),
        (0, "ok", "poll", POLLED),
        (0, "invoke", "crash", {}),
        (-1, "invoke", "kill", {"nodes": ["n1"]}),
    )
    report = validate_history(write(tmp_path, events))
    assert [(u.index, u.process, u.f) for u in report.unmatched] == [
        (1, 5, "send"), (3, 0, "crash"), (4, -1, "kill")]
    assert report.unmatched[0] == Unmatched(line=2, index=1, process=5, f="send")
    assert report.events == 5 and report.operations == Counter({("poll", "ok"): 1})


def test_missing_file_is_a_history_error(tmp_path):
    path = tmp_path / "absent.jsonl"
    with pytest.raises(HistoryError) as caught:
        validate_history(path)
    assert caught.value.path == str(path)
    assert "cannot read the history" in caught.value.message


def test_shipped_example_validates():
    report = validate_history(EXAMPLE)
    assert report.events == len(EXAMPLE.read_text().splitlines())
    assert report.truncated is None
    assert report.operations[("crash", "info")] >= 1
    assert report.operations[("end-offsets", "ok")] >= 1


def test_nan_is_not_json(tmp_path):
    lines = [BASE[0], '{"index": 1, "time": 1000000, "process": -1, "type": "invoke", '
                      '"f": "kill", "value": {"x": NaN}}']
    assert_rejected(tmp_path, lines, 2, "NaN is not JSON")
