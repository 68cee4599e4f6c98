"""What the check of one partition emits, as rows of one Arrow schema
(`OUTPUT`), so that Spark can carry every family's results of every
partition in one frame.

A row is one of:
- a case of an anomaly type (`type` is the type; its fields are
  `CASE_FIELDS[type]`, the rest null) — also the undecided `unseen` sends
  (`UNDECIDED`), the partitions they are in (`UNDECIDED_PARTITION`) and
  those whose final reads fell short of the recorded end
  (`FINAL_READS_SHORT`), which make a verdict unknown;
- a statistic (`type` "stat"): `family`, `stat`, `key`, `amount`, summed
  over partitions (`MERGE_MAX`: the largest); family CASES counts each case
  type, of which only the first `max_examples` per partition are rows;
- a candidate value (`type` CANDIDATE): a value this partition holds at
  more than one offset, or read without a send of it here that may have
  happened; only such a value can be a `duplicate`, `garbage-read` or
  `aborted-read` across partitions (checkers/duplicates.py);
- a family's error (`type` "error"): `family`, `error`.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from checkers.grouping import NONE
from checkers.result import MAX_EXAMPLES

UNDECIDED = "unseen-undecided"
UNDECIDED_PARTITION = "unseen-undecided-partition"
FINAL_READS_SHORT = "final-reads-short"
STALE_UNDECIDED = "stale-committed-offset-undecided"     # checkers/group_offsets.py
CANDIDATE = "candidate"

_PLACE = pa.struct([("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64())])
_long, _text, _longs = pa.int64(), pa.string(), pa.list_(pa.int64())

OUTPUT = pa.schema([
    ("type", _text), ("topic", _text), ("partition", pa.int32()), ("group", _text),
    ("process", _long), ("offset", _long), ("value", _long), ("raw", _text),
    ("send_type", _text), ("end_offset", _long), ("committed_offset", _long),
    ("returned_offset", _long), ("first_read_offset", _long), ("count", _long),
    ("final_read_to", _long), ("read_epoch", _long), ("end_epoch", _long),
    ("offsets", _longs), ("values", _longs), ("lost_values", _longs),
    ("places", pa.list_(_PLACE)), ("place_count", _long), ("value_count", _long),
    ("evidence", _longs),
    # statistics and errors
    ("family", _text), ("stat", _text), ("key", _long), ("amount", _long), ("error", _text),
])

_PAIR = ("topic", "partition", "process", "offsets", "values", "evidence")
_RESUME = ("group", "topic", "partition", "process", "committed_offset", "first_read_offset",
           "evidence")
_STALE = ("group", "topic", "partition", "committed_offset", "returned_offset", "evidence")
# The fields of each type's cases, in the order results.json shows them.
CASE_FIELDS = {
    "lost-write": ("topic", "partition", "value", "offset", "send_type", "evidence"),
    "unseen": ("topic", "partition", "value", "offset", "end_offset", "evidence"),
    "stale-end": ("topic", "partition", "offset", "end_offset", "read_epoch", "end_epoch",
                  "evidence"),
    "duplicate": ("topic", "partition", "value", "places", "place_count", "evidence"),
    "inconsistent-offsets": ("topic", "partition", "offset", "values", "value_count",
                             "evidence"),
    "garbage-read": ("topic", "partition", "offset", "value", "raw", "evidence"),
    "aborted-read": ("topic", "partition", "offset", "value", "evidence"),
    "nonmonotonic-send": _PAIR, "int-nonmonotonic-send": _PAIR, "int-send-skip": _PAIR,
    "nonmonotonic-poll": _PAIR, "poll-skip": _PAIR, "int-nonmonotonic-poll": _PAIR,
    "int-poll-skip": _PAIR,
    "stale-committed-offset": _STALE,
    "zombie-commit": ("group", "topic", "partition", "process", "offset", "evidence"),
    "group-lost": ("group", "topic", "partition", "value", "offset", "committed_offset",
                   "evidence"),
    "resume-skip": _RESUME, "resume-rewind": _RESUME,
    "eos-duplicate": ("topic", "partition", "value", "places", "place_count", "evidence"),
    "eos-missing": ("group", "topic", "partition", "offset", "value", "committed_offset",
                    "evidence"),
    "precommitted-read": ("topic", "partition", "offset", "value", "evidence"),
    "torn-transaction": ("process", "values", "lost_values", "places", "evidence"),
    "stuck-lso": ("topic", "partition", "offset", "end_offset", "evidence"),
    UNDECIDED: ("topic", "partition", "value", "offset", "evidence"),
    UNDECIDED_PARTITION: ("topic", "partition", "count", "end_offset", "final_read_to"),
    FINAL_READS_SHORT: ("topic", "partition", "end_offset", "final_read_to"),
    STALE_UNDECIDED: _STALE,
}

# The statistics that count each case type (all of them, kept rows or not).
CASES = "cases"

# Statistics merged by maximum rather than sum.
MERGE_MAX = frozenset({"longest_partition"})


def nullable(values: np.ndarray) -> pa.Array:
    """Ints where NONE means null."""
    values = np.asarray(values, dtype=np.int64)
    return pa.array(values, type=_long, mask=values == NONE)


def pairs(first: np.ndarray, second: np.ndarray) -> pa.Array:
    """[first, second] per row."""
    flat = np.column_stack([first, second]).ravel() if len(first) else np.zeros(0, np.int64)
    return pa.ListArray.from_arrays(pa.array(np.arange(0, 2 * len(first) + 1, 2, dtype=np.int32)),
                                    pa.array(flat, type=_long))


def singles(values: np.ndarray) -> pa.Array:
    """[value] per row."""
    return pa.ListArray.from_arrays(pa.array(np.arange(len(values) + 1, dtype=np.int32)),
                                    pa.array(np.asarray(values, dtype=np.int64), type=_long))


class Findings:
    """The rows one partition's check emits."""

    def __init__(self, topic: str | None = None, partition: int | None = None,
                 max_examples: int = MAX_EXAMPLES):
        self.topic, self.partition = topic, partition
        self.max_examples = max_examples
        self.counts: dict[str, int] = {}
        self._tables: list[pa.Table] = []

    def cases(self, type_: str, **columns) -> None:
        """Cases of `type_`; `topic` and `partition` default to this
        partition's. All are counted; the first `max_examples` of each type
        are kept as rows (the rest would only be dropped later)."""
        n = len(next(iter(columns.values())))
        if n == 0:
            return
        wanted = CASE_FIELDS[type_]
        if set(columns) | {"topic", "partition"} != set(wanted) | {"topic", "partition"}:
            raise ValueError(f"{type_}: fields {sorted(columns)}, expected {sorted(wanted)}")
        kept = max(0, min(n, self.max_examples - self.counts.get(type_, 0)))
        self.counts[type_] = self.counts.get(type_, 0) + n
        if not kept:
            return
        columns = {name: (column[:kept] if isinstance(column, (pa.Array, pa.ChunkedArray))
                          else np.asarray(column)[:kept]) for name, column in columns.items()}
        columns.setdefault("topic", pa.array([self.topic] * kept, type=_text))
        columns.setdefault("partition", pa.array([self.partition] * kept, type=pa.int32()))
        self._add(kept, type=pa.array([type_] * kept, type=_text), **columns)

    def stat(self, family: str, stat: str, amount: int, key: int = 0) -> None:
        self._add(1, type=pa.array(["stat"]), family=pa.array([family]),
                  stat=pa.array([stat]), key=pa.array([key], _long),
                  amount=pa.array([int(amount)], _long))

    def stats(self, family: str, stat: str, keys: np.ndarray, amounts: np.ndarray) -> None:
        n = len(keys)
        if n:
            self._add(n, type=pa.array(["stat"] * n), family=pa.array([family] * n),
                      stat=pa.array([stat] * n), key=pa.array(keys, _long),
                      amount=pa.array(amounts, _long))

    def candidates(self, values: np.ndarray) -> None:
        n = len(values)
        if n:
            self._add(n, type=pa.array([CANDIDATE] * n), topic=pa.array([self.topic] * n, _text),
                      partition=pa.array([self.partition] * n, pa.int32()),
                      value=pa.array(values, _long))

    def error(self, family: str, error: str) -> None:
        self._add(1, type=pa.array(["error"]), family=pa.array([family]),
                  error=pa.array([error]))

    def _add(self, n: int, **columns) -> None:
        arrays = []
        for name, column in columns.items():
            kind = OUTPUT.field(name).type      # KeyError: no such output column
            arrays.append(column.cast(kind) if isinstance(column, (pa.Array, pa.ChunkedArray))
                          else pa.array(column, type=kind))
        self._tables.append(pa.Table.from_arrays(arrays, names=list(columns)))

    def table(self) -> pa.Table:
        """Every row, with the count of each case type as a statistic
        (family CASES); the columns a row does not have are null."""
        for type_, count in sorted(self.counts.items()):
            self.stat(CASES, type_, count)
        self.counts = {}
        rows = pa.concat_tables([OUTPUT.empty_table(), *self._tables],
                                promote_options="default")
        return rows.select(OUTPUT.names)
