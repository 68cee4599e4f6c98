"""The one definition of the history's shape (schema_version 1; docs/history.md).

An event is one JSON object per line: an envelope (`index`, `time`,
`process`, `type`, `f`, `value`, `error`, `phase`) whose `value` has a shape
per `f`, one for the invocation and one for the completion. The shapes are
declared here once, from a handful of kinds, and everything else derives
from them:

- `Kind.check` (kinds.py): the exact validator, naming the field and what
  was expected (the streaming reader, reader.py);
- `Kind.arrow` and `VALUE`: the Arrow types ingest parses every line with;
- `Kind.violations`: the same rules over a whole Arrow column at once, for
  ingest's parallel pass (vectorised.py);
- the Parquet tables (`history_analysis/tables.py`) take their column types
  from the shapes of the records they hold;
- `Shape.__call__`: the constructors workloads and tests build values with,
  so a field name is spelled here and nowhere else.

A field whose value may be null may also be left out: JSON writers differ on
this, and Arrow and Spark read both the same way.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.history.kinds import (  # noqa: F401 (the kinds are part of the schema)
    INT32_MAX, INT64_MAX, INT64_MIN, Base64Text, Flag, Int, Kind, ListOf, Null, Nullable,
    Rule, Shape, Text, Violation, nulls, as_mask, show,
)

SCHEMA_VERSION = 1
NEMESIS_PROCESS = -1

EVENT_TYPES = ("invoke", "ok", "fail", "info")
PHASES = ("main", "final")
# assigned, revoked, lost: the group's callbacks; reset: the client restarted
# a partition's position by itself (workloads/clients/confluent.py).
REBALANCE_KINDS = ("assigned", "revoked", "lost", "reset")
NEMESIS_FS = (
    "start-partition", "stop-partition", "pause", "resume", "kill", "restart",
    "stall-disk", "unstall-disk", "disk-errors", "stop-disk-errors",
    "lose-unsynced", "packet-loss", "stop-packet-loss", "heal",
)


def _raw_only_undecodable(read: dict) -> None:
    # A record that does not decode is read as value null with its bytes in raw.
    if read.get("raw") is not None and read.get("value") is not None:
        raise Violation("raw", "only on a read whose value is null", read["raw"])


RAW_ONLY_UNDECODABLE = Rule(_raw_only_undecodable, lambda a: pc.and_(
    pc.is_valid(pc.struct_field(a, "raw")), pc.is_valid(pc.struct_field(a, "value"))))


# -- the values of client operations ---------------------------------------------

INT64 = Int("a 64-bit integer")
OFFSET = Int("a non-negative 64-bit integer", low=0)
# Kafka partitions are int32 on the wire.
PARTITION = Int("a partition number (0 to 2147483647)", low=0, high=INT32_MAX,
                arrow=pa.int32())
TEXT = Text()
# Leader epochs are int32 on the wire too: a read record's is the epoch its
# batch was appended in; an end's, the epoch of the leader that answered.
EPOCH = Int("a leader epoch (0 to 2147483647)", low=0, high=INT32_MAX, arrow=pa.int32())

# KIP-98: read_committed ends at the last stable offset, read_uncommitted at
# the high watermark.
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")

# The envelope's `time`: nanoseconds since the history's start.
HISTORY_TIME = Int("nanoseconds since the history's start", low=0)

TOPIC_PARTITION = Shape({"topic": TEXT, "partition": PARTITION})
PARTITIONS = ListOf(TOPIC_PARTITION)
# A consume-transform-produce pipeline's transform: what it writes to its
# output topic for a value it read (the workload's values stay below 2^62),
# so that every value in a history is still sent once and an output names
# its input.
PIPELINE_OUTPUT = 1 << 62
SEND_ASKED = Shape({**TOPIC_PARTITION.fields, "value": INT64, "offset": Null(pa.int64())})
SEND_DONE = Shape({**TOPIC_PARTITION.fields, "value": INT64, "offset": Nullable(OFFSET)})
READ = Shape({**TOPIC_PARTITION.fields, "offset": OFFSET, "value": Nullable(INT64),
              "raw": Nullable(Base64Text()), "epoch": Nullable(EPOCH)},
             rule=RAW_ONLY_UNDECODABLE)


def _group_unless_reset(rebalance: dict) -> None:
    # An assign-mode consumer has no group; only its own resets can lack one.
    if rebalance.get("group") is None and rebalance.get("kind") != "reset":
        raise Violation("group", "a string unless the kind is reset", None)


GROUP_UNLESS_RESET = Rule(_group_unless_reset, lambda a: pc.and_(
    pc.is_null(pc.struct_field(a, "group")),
    pc.not_equal(pc.struct_field(a, "kind"), "reset")))
REBALANCE = Shape({"kind": Text(REBALANCE_KINDS), "group": Nullable(TEXT),
                   "partitions": PARTITIONS}, rule=GROUP_UNLESS_RESET)
OFFSET_AT = Shape({**TOPIC_PARTITION.fields, "offset": OFFSET})
OFFSET_FOUND = Shape({**TOPIC_PARTITION.fields, "offset": Nullable(OFFSET)})
END_AT = Shape({**OFFSET_AT.fields, "epoch": Nullable(EPOCH)})

EMPTY = Shape({})
ASSIGN = Shape({"partitions": PARTITIONS, "seek_to_beginning": Flag()})
SUBSCRIBE = Shape({"group": TEXT, "topics": ListOf(TEXT)})
COMMIT = Shape({"group": TEXT, "offsets": ListOf(OFFSET_AT)})
TXN_OFFSETS = {"group": Nullable(TEXT), "offsets": Nullable(ListOf(OFFSET_AT))}

# f -> (invocation shape, completion shape).
OPERATIONS: dict[str, tuple[Shape, Shape]] = {
    "send": (Shape({"sends": ListOf(SEND_ASKED)}), Shape({"sends": ListOf(SEND_DONE)})),
    "poll": (EMPTY, Shape({"reads": ListOf(READ), "rebalances": Nullable(ListOf(REBALANCE))})),
    # `committing`: the history time at which the client asked to commit
    # (null if it never did), so a read before it is a precommitted read.
    # `group` and `offsets`: a consume-transform-produce transaction's input
    # positions, committed for the group inside it (KIP-447).
    "txn": (Shape({"sends": ListOf(SEND_ASKED), "polls": Flag(), **TXN_OFFSETS}),
            Shape({"sends": ListOf(SEND_DONE), "reads": ListOf(READ),
                   "committing": Nullable(HISTORY_TIME), **TXN_OFFSETS})),
    "assign": (ASSIGN, ASSIGN),
    "subscribe": (SUBSCRIBE, SUBSCRIBE),
    "commit": (COMMIT, COMMIT),
    "committed": (Shape({"group": TEXT, "partitions": PARTITIONS}),
                  Shape({"group": TEXT, "offsets": ListOf(OFFSET_FOUND)})),
    "crash": (EMPTY, EMPTY),
    # `isolation`: asked under this isolation level rather than the
    # client's own (the final phase's last-stable-offset check).
    "end-offsets": (Shape({"partitions": PARTITIONS,
                           "isolation": Nullable(Text(ISOLATION_LEVELS))}),
                    Shape({"offsets": ListOf(END_AT)})),
}
CLIENT_FS = tuple(OPERATIONS)
FS = CLIENT_FS + NEMESIS_FS

# Completions whose value is "the same" as the invocation's.
ECHOED = frozenset({"assign", "subscribe", "commit"})


def invocation(f: str, **fields: Any) -> dict:
    """The invocation value of client operation `f`, e.g.
    invocation("send", sends=[SEND_ASKED(topic="t", partition=0, value=7)])."""
    return OPERATIONS[f][0](**fields)


def completion(f: str, **fields: Any) -> dict:
    return OPERATIONS[f][1](**fields)


def _merged(types: list[pa.DataType]) -> pa.DataType:
    """One Arrow type holding every shape in `types` (struct fields by name)."""
    first = types[0]
    if pa.types.is_struct(first):
        fields: dict[str, list[pa.DataType]] = {}
        for t in types:
            if not pa.types.is_struct(t):
                raise TypeError(f"cannot merge {t} with {first}")
            for f in t:
                fields.setdefault(f.name, []).append(f.type)
        return pa.struct([(name, _merged(ts)) for name, ts in fields.items()])
    if pa.types.is_list(first):
        return pa.list_(_merged([t.value_type for t in types]))
    if any(t != first for t in types):
        raise TypeError(f"one field name, two types: {sorted(set(map(str, types)))}")
    return first


def _wide(type_: pa.DataType) -> pa.DataType:
    """`type_` with every integer as int64."""
    if pa.types.is_struct(type_):
        return pa.struct([(f.name, _wide(f.type)) for f in type_])
    if pa.types.is_list(type_):
        return pa.list_(_wide(type_.value_type))
    return pa.int64() if pa.types.is_integer(type_) else type_


# Every client operation's value, invocation or completion, as one Arrow
# struct: what ingest parses each line's value as. Its integers are all
# int64: Arrow's JSON reader parses a block 20% slower when it must narrow
# partitions to int32; the kinds check their range (Kind.violations) and the
# tables store them as their shapes declare (tables.py).
VALUE: pa.StructType = _wide(_merged([shape.arrow for pair in OPERATIONS.values()
                                      for shape in pair]))

# The envelope. Nemesis values are free-form objects: kept as their JSON text.
EVENT = pa.schema([
    ("index", pa.int64()), ("time", pa.int64()), ("process", pa.int64()),
    ("type", pa.string()), ("f", pa.string()), ("value", VALUE),
    ("error", pa.string()), ("phase", pa.string()),
])
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


# -- the exact value rules, one event at a time -------------------------------------

def _at_value(kind: Kind, value: Any) -> None:
    try:
        kind.check(value)
    except Violation as v:
        raise v.within("value") from None


def check_invocation_value(f: str, value: Any) -> None:
    if f in OPERATIONS:
        _at_value(OPERATIONS[f][0], value)
    elif type(value) is not dict:  # nemesis: a free-form description
        raise Violation("value", "an object", value)


def check_completion_value(f: str, type_: str, value: Any, invoked: Any) -> None:
    """A completion's value against its f and its invocation's value. A
    failed or indeterminate operation may echo what was asked instead."""
    if f not in OPERATIONS:
        if type(value) is not dict:
            raise Violation("value", "an object", value)
        return
    asked, done = OPERATIONS[f]
    try:
        _at_value(done, value)
    except Violation:
        if type_ == "ok":
            raise
        try:
            _at_value(asked, value)
        except Violation:
            pass
        else:
            return check_same_request(f, value, invoked)
        raise
    check_same_request(f, value, invoked)


def check_same_request(f: str, value: dict, invoked: dict) -> None:
    """What a completion must repeat of its invocation (ECHOED: all of it;
    committed: the group; send and txn: each record's topic, partition and
    value, in order; txn: its group and offsets too). `same_request_violations`,
    next, is the same rule over many operations at once."""
    if f in ECHOED and value != invoked:
        raise Violation("value", f"the same value as the {f} invocation ({show(invoked)})",
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
                                    f"the invocation's {show(a[key])}", d[key])
    if f == "txn" and "sends" in value:
        for key in TXN_OFFSETS:
            if value.get(key) != invoked.get(key):
                raise Violation(f"value.{key}", f"the invocation's {show(invoked.get(key))}",
                                value.get(key))


def same_request_violations(f: np.ndarray, invoked: pa.Array, value: pa.Array) -> np.ndarray:
    """check_same_request over paired operations at once: per operation
    (its f as a code into FS, its invocation's and its completion's values,
    both VALUE arrays that fit their shapes), does the completion fail to
    repeat what it must?"""
    bad = np.zeros(len(f), dtype=bool)

    def compare(names: tuple[str, ...], type_: pa.DataType) -> None:
        """The operations of these fs: the parts of both values `type_` names."""
        rows = np.flatnonzero(np.isin(f, [FS.index(name) for name in names]))
        if len(rows):
            at = pa.array(rows, type=pa.int64())
            bad[rows] = ~_equal(_project(invoked, type_).take(at),
                                _project(value, type_).take(at))

    for name in ECHOED:
        compare((name,), OPERATIONS[name][0].arrow)
    compare(("committed",), pa.struct([("group", pa.string())]))
    compare(("send", "txn"), pa.struct([("sends", pa.list_(pa.struct(
        [SEND_ASKED.arrow.field(k) for k in ("topic", "partition", "value")])))]))
    compare(("txn",), pa.struct([(name, kind.arrow) for name, kind in TXN_OFFSETS.items()]))
    return bad


def _project(array: pa.Array, type_: pa.DataType) -> pa.Array:
    """`array` cut down to the fields `type_` names (structs, nested in lists)."""
    if pa.types.is_struct(type_):
        children = [_project(pc.struct_field(array, f.name), f.type) for f in type_]
        return pa.StructArray.from_arrays(children, names=[f.name for f in type_],
                                          mask=pc.invert(array.is_valid()))
    if pa.types.is_list(type_):
        items = _project(array.values, type_.value_type)
        return pa.ListArray.from_arrays(array.offsets, items, mask=pc.invert(array.is_valid()))
    return array


def _equal(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Row by row: are two arrays of one type equal, null equal to null?"""
    a_null, b_null = nulls(a), nulls(b)
    same = a_null == b_null
    both = ~a_null & ~b_null
    if pa.types.is_struct(a.type):
        for i in range(a.type.num_fields):
            same &= _equal(pc.struct_field(a, i), pc.struct_field(b, i)) | ~both
        return same
    if pa.types.is_list(a.type):
        length_a = np.asarray(pc.fill_null(pc.list_value_length(a), -1))
        length_b = np.asarray(pc.fill_null(pc.list_value_length(b), -1))
        same &= length_a == length_b
        rows = np.flatnonzero(same & both & (length_a > 0))
        if len(rows):
            at = pa.array(rows, type=pa.int64())
            items_a, items_b = a.take(at), b.take(at)
            unequal = np.zeros(len(rows), dtype=bool)
            parents = np.asarray(pc.list_parent_indices(items_a))
            unequal[parents[~_equal(pc.list_flatten(items_a), pc.list_flatten(items_b))]] = True
            same[rows[unequal]] = False
        return same
    return np.where(both, as_mask(pc.equal(a, b)), same)


def codes(column, names: tuple[str, ...]):
    """A column of names as their positions in `names` (-1: null or another
    name), for comparing whole columns as numbers rather than strings."""
    return np.asarray(pc.fill_null(pc.index_in(column, pa.array(names)), -1), dtype=np.int64)
