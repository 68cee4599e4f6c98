"""The history contract of HISTORY.md (schema_version 1), as data and checks.

One event is a JSON object per line. This module knows which fields an event
has, which operation names (`f`) exist, and the shape of `value` for each `f`
on invocation and on completion. It raises `Violation` naming the field and
what was expected; the reader adds the file and line.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Callable

SCHEMA_VERSION = 1

NEMESIS_PROCESS = -1

EVENT_TYPES = ("invoke", "ok", "fail", "info")
COMPLETION_TYPES = ("ok", "fail", "info")
PHASES = ("main", "final")

CLIENT_FS = (
    "send", "poll", "txn", "assign", "subscribe", "commit", "committed",
    "crash", "end-offsets",
)
NEMESIS_FS = (
    "start-partition", "stop-partition", "pause", "resume", "kill", "restart",
    "stall-disk", "unstall-disk", "disk-errors", "stop-disk-errors",
    "lose-unsynced", "packet-loss", "stop-packet-loss", "heal",
)
REBALANCE_KINDS = ("assigned", "revoked", "lost")

# Field name -> (required, description of the expected value).
EVENT_FIELDS = {
    "index": (True, "an integer"),
    "time": (True, "an integer"),
    "process": (True, "an integer"),
    "type": (True, "one of " + ", ".join(EVENT_TYPES)),
    "f": (True, "an operation name"),
    "value": (True, "an object"),
    "error": (False, "a string"),
    "phase": (False, "one of " + ", ".join(PHASES)),
}

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MAX = 2**31 - 1


class Violation(Exception):
    """A field of one event breaks the contract.

    Checkers raise it with the path relative to what they check; containers
    prefix their own part on the way up, so paths cost nothing on valid input.
    """

    def __init__(self, field: str, expected: str, got: Any = None, *, show_got: bool = True):
        self.field = field
        self.expected = expected
        self.got = got
        self.show_got = show_got
        super().__init__(self.describe())

    def within(self, prefix: str) -> "Violation":
        field = prefix + self.field if self.field.startswith("[") or not self.field \
            else f"{prefix}.{self.field}"
        return Violation(field, self.expected, self.got, show_got=self.show_got)

    def describe(self) -> str:
        text = f"field '{self.field}': expected {self.expected}"
        if self.show_got:
            text += f", got {_show(self.got)}"
        return text


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        text = repr(value)
        return text if len(text) <= 60 else text[:57] + "..."
    return repr(value)


def is_int(value: Any) -> bool:
    """JSON integers only: Python's bool is an int, JSON's true is not."""
    return type(value) is int


# A checker validates one JSON value and raises Violation with a relative path
# ("" for the value itself).
Checker = Callable[[Any], None]


def string(value: Any) -> None:
    if type(value) is not str:
        raise Violation("", "a string", value)


def boolean(value: Any) -> None:
    if type(value) is not bool:
        raise Violation("", "true or false", value)


def non_negative(value: Any) -> None:
    if type(value) is not int or not 0 <= value <= INT64_MAX:
        raise Violation("", "a non-negative 64-bit integer", value)


def partition_number(value: Any) -> None:
    # Kafka partitions are int32 on the wire.
    if type(value) is not int or not 0 <= value <= INT32_MAX:
        raise Violation("", "a partition number (0 to 2147483647)", value)


def int64(value: Any) -> None:
    if type(value) is not int or not INT64_MIN <= value <= INT64_MAX:
        raise Violation("", "a 64-bit integer", value)


def null(value: Any) -> None:
    if value is not None:
        raise Violation("", "null", value)


def nullable(checker: Checker) -> Checker:
    def check(value: Any) -> None:
        if value is not None:
            try:
                checker(value)
            except Violation as v:
                raise Violation(v.field, v.expected + " or null", v.got) from None
    return check


def one_of(choices: tuple[str, ...]) -> Checker:
    def check(value: Any) -> None:
        if type(value) is not str or value not in choices:
            raise Violation("", "one of " + ", ".join(choices), value)
    return check


def base64_text(value: Any) -> None:
    string(value)
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise Violation("", "base64 text", value) from None


def list_of(checker: Checker) -> Checker:
    def check(value: Any) -> None:
        if type(value) is not list:
            raise Violation("", "a list", value)
        for i, item in enumerate(value):
            try:
                checker(item)
            except Violation as v:
                raise v.within(f"[{i}]") from None
    return check


def obj(required: dict[str, Checker], optional: dict[str, Checker] | None = None,
        rule: Callable[[dict], None] | None = None) -> Checker:
    """An object with exactly these fields (optional ones may be absent)."""
    optional = optional or {}
    allowed = ", ".join([*required, *optional]) or "no fields"
    required_items = tuple(required.items())

    def check(value: Any) -> None:
        if type(value) is not dict:
            raise Violation("", "an object", value)
        for name, checker in required_items:
            if name not in value:
                raise Violation(name, "to be present", show_got=False)
            try:
                checker(value[name])
            except Violation as v:
                raise v.within(name) from None
        if len(value) > len(required_items):
            for name, item in value.items():
                if name in optional:
                    try:
                        optional[name](item)
                    except Violation as v:
                        raise v.within(name) from None
                elif name not in required:
                    raise Violation(name, f"no such field (allowed: {allowed})",
                                    show_got=False)
        if rule is not None:
            rule(value)
    return check


def _raw_only_undecodable(read: dict) -> None:
    # HISTORY.md: a record that does not decode is read as value null with raw.
    if read.get("raw") is not None and read["value"] is not None:
        raise Violation("raw", "only on a read whose value is null", read["raw"])


TOPIC_PARTITION = {"topic": string, "partition": partition_number}
PARTITIONS = list_of(obj(TOPIC_PARTITION))

SEND_ASKED = obj({**TOPIC_PARTITION, "value": int64, "offset": null})
SEND_DONE = obj({**TOPIC_PARTITION, "value": int64, "offset": nullable(non_negative)})
READ = obj({**TOPIC_PARTITION, "offset": non_negative, "value": nullable(int64)},
           {"raw": nullable(base64_text)}, rule=_raw_only_undecodable)
REBALANCE = obj({"kind": one_of(REBALANCE_KINDS), "group": string, "partitions": PARTITIONS})
COMMIT_OFFSETS = list_of(obj({**TOPIC_PARTITION, "offset": non_negative}))

ASSIGN = obj({"partitions": PARTITIONS, "seek_to_beginning": boolean})
SUBSCRIBE = obj({"group": string, "topics": list_of(string)})
COMMIT = obj({"group": string, "offsets": COMMIT_OFFSETS})
EMPTY = obj({})

INVOKE_VALUE: dict[str, Checker] = {
    "send": obj({"sends": list_of(SEND_ASKED)}),
    "poll": EMPTY,
    "txn": obj({"sends": list_of(SEND_ASKED), "polls": boolean}),
    "assign": ASSIGN,
    "subscribe": SUBSCRIBE,
    "commit": COMMIT,
    "committed": obj({"group": string, "partitions": PARTITIONS}),
    "crash": EMPTY,
    "end-offsets": obj({"partitions": PARTITIONS}),
}

COMPLETION_VALUE: dict[str, Checker] = {
    "send": obj({"sends": list_of(SEND_DONE)}),
    "poll": obj({"reads": list_of(READ)}, {"rebalances": list_of(REBALANCE)}),
    "txn": obj({"sends": list_of(SEND_DONE), "reads": list_of(READ)}),
    "assign": ASSIGN,
    "subscribe": SUBSCRIBE,
    "commit": COMMIT,
    "committed": obj({"group": string,
                      "offsets": list_of(obj({**TOPIC_PARTITION,
                                              "offset": nullable(non_negative)}))}),
    "crash": EMPTY,
    "end-offsets": obj({"offsets": COMMIT_OFFSETS}),
}

# Completions whose value HISTORY.md calls "same" as the invocation's.
ECHOED = frozenset({"assign", "subscribe", "commit"})


def _at_value(checker: Checker, value: Any) -> None:
    try:
        checker(value)
    except Violation as v:
        raise v.within("value") from None


def check_invocation_value(f: str, value: Any) -> None:
    if f in INVOKE_VALUE:
        _at_value(INVOKE_VALUE[f], value)
    elif type(value) is not dict:
        raise Violation("value", "an object", value)


def check_completion_value(f: str, type_: str, value: Any, invoked: Any) -> None:
    """Check a completion's value against its f and its invocation's value."""
    if f not in COMPLETION_VALUE:  # nemesis: free-form description
        if type(value) is not dict:
            raise Violation("value", "an object", value)
        return
    try:
        _at_value(COMPLETION_VALUE[f], value)
    except Violation:
        # A failed or indeterminate operation may echo what was asked.
        if type_ == "ok":
            raise
        try:
            _at_value(INVOKE_VALUE[f], value)
        except Violation:
            pass
        else:
            return _check_same_request(f, value, invoked)
        raise
    _check_same_request(f, value, invoked)


def _check_same_request(f: str, value: dict, invoked: dict) -> None:
    if f in ECHOED and value != invoked:
        raise Violation("value", f"the same value as the {f} invocation ({_show(invoked)})",
                        value)
    if f == "committed" and value["group"] != invoked["group"]:
        raise Violation("value.group", f"the invocation's group {invoked['group']!r}",
                        value["group"])
    if f in ("send", "txn") and "sends" in value:
        asked = invoked["sends"]
        done = value["sends"]
        if len(done) != len(asked):
            raise Violation("value.sends", f"{len(asked)} sends, as invoked", done)
        for i, (a, d) in enumerate(zip(asked, done)):
            for key in ("topic", "partition", "value"):
                if a[key] != d[key]:
                    raise Violation(f"value.sends[{i}].{key}",
                                    f"the invocation's {_show(a[key])}", d[key])
