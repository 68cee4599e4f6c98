"""One (topic, partition) of a history, co-located: its sends, reads,
commits, committed offsets, recorded ends and assignment events as numpy
columns, and what every per-partition check derives from them once (the
version order, where each sent value landed, who read what).

Spark brings each partition's rows together (checkers/colocated.py); this
module and the families' `findings` functions are plain numpy over one
partition, so a partition is checked in one pass whatever its size.

Nulls: in columns that are never negative (offsets, history indexes,
times) null is `NONE` (-1); values span all of int64, so a read's value
comes with a `has_value` mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from checkers.grouping import NONE, lookup, order, reduce, starts
from checkers.result import MAX_EXAMPLES
from history_analysis import tables
from history_analysis.history.schema import EVENT_TYPES
from history_analysis.tables import ASSIGNMENT_KINDS

# `type` and `kind` become codes: their positions in the names the tables
# hold (a row's `type` is its operation's completion, never `invoke`).
TYPES, KINDS = EVENT_TYPES, ASSIGNMENT_KINDS
OK, INFO, FAIL = (TYPES.index(type_) for type_ in ("ok", "info", "fail"))
SUBSCRIBE, ASSIGNED, REVOKED, LOST, RESET = (
    KINDS.index(kind) for kind in ("subscribe", "assigned", "revoked", "lost", "reset"))

# The tables a partition's rows come from; a row's `source` is its table's
# position here.
SOURCES = tables.PER_PARTITION
SENDS, READS, COMMITS, COMMITTED, END_OFFSETS, ASSIGNMENTS = range(len(SOURCES))

# A co-located row: its source, and the columns of every source (null where
# its own table has none).
COLOCATED = pa.schema([("source", pa.int8()),
                       *pa.unify_schemas([table.schema for table in SOURCES])])


@dataclass(frozen=True)
class Context:
    """What the whole history tells each partition: the members of each
    group, the subscriptions (topic-wide rows), which processes reported an
    `assigned` callback for a topic, and the bucket width of time series."""
    members: frozenset[tuple[str, int]] = frozenset()        # (group, process)
    subscriptions: tuple[tuple, ...] = ()   # (topic, op_index, invoke_index, process, group)
    assigned_topics: frozenset[tuple[int, str]] = frozenset()  # (process, topic)
    series_start: int = 0
    series_width: int = 1
    max_examples: int = MAX_EXAMPLES
    fault_spans: tuple[tuple[str, int, int], ...] = ()    # Summary.fault_spans


def _ints(column, null: int = NONE) -> np.ndarray:
    return np.asarray(pc.fill_null(column, null), dtype=np.int64)


def _codes(column, names: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(pc.index_in(column, names), NONE), dtype=np.int64)


_TYPES, _KINDS = pa.array(TYPES), pa.array(KINDS)


class _Column:
    """A column of `Columns` as numpy, converted from the Arrow rows (and
    the group names that `group` codes index) when first asked for, once
    for every subset of one partition's rows."""

    def __init__(self, convert: Callable[[pa.Table, pa.Array], np.ndarray]):
        self.convert = convert

    def __get__(self, columns: Columns, owner: type) -> np.ndarray:
        return columns.numpy(self)


class Columns:
    """Rows of one source table, a numpy column each (`raw` stays Arrow);
    `where` selects rows without converting anything."""

    op = _Column(lambda rows, groups: _ints(rows["op_index"]))
    invoke = _Column(lambda rows, groups: _ints(rows["invoke_index"]))
    invoke_time = _Column(lambda rows, groups: _ints(rows["invoke_time"]))
    time = _Column(lambda rows, groups: _ints(rows["time"]))
    process = _Column(lambda rows, groups: _ints(rows["process"]))
    type = _Column(lambda rows, groups: _codes(rows["type"], _TYPES))
    final = _Column(lambda rows, groups: np.asarray(pc.fill_null(
        pc.equal(rows["phase"], "final"), False)))
    pos = _Column(lambda rows, groups: _ints(rows["pos"]))
    group = _Column(lambda rows, groups: _codes(rows["group"], groups))  # into Partition.groups
    kind = _Column(lambda rows, groups: _codes(rows["kind"], _KINDS))
    offset = _Column(lambda rows, groups: _ints(rows["offset"]))
    value = _Column(lambda rows, groups: np.asarray(pc.fill_null(rows["value"], 0),
                                                   dtype=np.int64))
    has_value = _Column(lambda rows, groups: np.asarray(rows["value"].is_valid()))
    epoch = _Column(lambda rows, groups: _ints(rows["epoch"]))

    def __init__(self, rows: pa.Table, groups: pa.Array, index: np.ndarray | None = None,
                 converted: dict[_Column, np.ndarray] | None = None):
        self._rows, self._groups, self._index = rows, groups, index
        self._converted = {} if converted is None else converted   # shared with subsets
        self._selected: dict[_Column, np.ndarray] = {}              # this subset's

    def __len__(self) -> int:
        return self._rows.num_rows if self._index is None else len(self._index)

    def numpy(self, column: _Column) -> np.ndarray:
        """The column, read-only: converted once per partition, and
        gathered once per subset (the checks ask for each many times)."""
        if column not in self._converted:
            values = column.convert(self._rows, self._groups)
            values.flags.writeable = False
            self._converted[column] = values
        if self._index is None:
            return self._converted[column]
        if column not in self._selected:
            values = self._converted[column][self._index]
            values.flags.writeable = False
            self._selected[column] = values
        return self._selected[column]

    @property
    def raw(self) -> pa.Array:
        raw = self._rows["raw"]
        return (raw if self._index is None else raw.take(pa.array(self._index))).combine_chunks()

    def where(self, mask: np.ndarray) -> Columns:
        rows = np.flatnonzero(mask)
        return Columns(self._rows, self._groups,
                       rows if self._index is None else self._index[rows], self._converted)


class Partition:
    def __init__(self, rows: pa.Table, context: Context):
        self.topic = rows["topic"][0].as_py()
        self.partition = rows["partition"][0].as_py()
        self.context = context
        names = set(pc.unique(rows["group"].drop_null()).to_pylist())
        names |= {g for g, _ in context.members}
        names |= {s[4] for s in context.subscriptions if s[4] is not None}
        self.groups = np.array(sorted(names), dtype=object)
        groups = pa.array(self.groups.tolist(), type=pa.string())
        # One stable pass by source: each source's rows, in arrival order,
        # index columns converted once for all of them.
        source = np.asarray(rows["source"])
        by = np.argsort(source, kind="stable")
        bounds = np.searchsorted(source[by], np.arange(len(SOURCES) + 1))
        converted: dict[_Column, np.ndarray] = {}
        self.sends, self.reads, self.commits, self.committed, self.ends, self.assignments = (
            Columns(rows, groups, by[lo:hi], converted) for lo, hi in zip(bounds, bounds[1:]))

    def group_codes(self, names) -> np.ndarray:
        return _codes(pa.array(list(names), type=pa.string()),
                      pa.array(self.groups.tolist(), type=pa.string()))

    # -- the version order -------------------------------------------------------

    @cached_property
    def observations(self) -> "Observations":
        """Every (offset, value) seen, with the op that saw it: acknowledged
        sends (ok with an offset) and every read of a value, whatever the
        read's completion (a broker must never return what is not in its log)."""
        s, r = self.sends, self.reads
        acked = s.where((s.type == OK) & (s.offset != NONE))
        read = r.where(r.has_value)
        return Observations(offset=np.concatenate([acked.offset, read.offset]),
                            value=np.concatenate([acked.value, read.value]),
                            op=np.concatenate([acked.op, read.op]))

    @cached_property
    def records(self) -> tuple[np.ndarray, np.ndarray]:
        """The version order: distinct (offset, value), sorted."""
        o = self.observations
        by = order(o.offset, o.value)
        offsets, values = o.offset[by], o.value[by]
        first = starts(offsets, values)
        return offsets[first], values[first]

    @cached_property
    def value_offsets(self) -> np.ndarray:
        """The offsets that hold at least one value, sorted: an offset's
        index here is its dense rank (gaps from markers or compaction are
        legal, so skips are judged on this order)."""
        offsets = self.records[0]
        return offsets[starts(offsets)]

    def dense(self, offsets: np.ndarray) -> np.ndarray:
        return lookup(self.value_offsets, offsets)

    @cached_property
    def read_values(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per value read here: (values sorted, the lowest offset it was
        read at, when an ok poll first read it — NONE if no ok poll did)."""
        r = self.reads.where(self.reads.has_value)
        by = order(r.value)
        values, first = r.value[by], starts(r.value[by])
        read_offset = reduce(np.minimum, r.offset[by], first)
        ok_time = np.where(r.type[by] == OK, r.time[by], np.iinfo(np.int64).max)
        ok_read_time = reduce(np.minimum, ok_time, first)
        ok_read_time = np.where(ok_read_time == np.iinfo(np.int64).max, NONE, ok_read_time)
        return values[first], read_offset, ok_read_time

    @cached_property
    def sent(self) -> "Sent":
        """Every record sent here, with what became of it."""
        s = self.sends
        values, read_offset, ok_read_time = self.read_values
        at = lookup(values, s.value)
        read = at != NONE
        read_off = np.where(read, read_offset[np.maximum(at, 0)], NONE) if len(values) else \
            np.full(len(s), NONE)
        ok_time = np.where(read, ok_read_time[np.maximum(at, 0)], NONE) if len(values) else \
            np.full(len(s), NONE)
        position = np.where((s.type == OK) & (s.offset != NONE), s.offset, read_off)
        return Sent(read=read, read_ok=ok_time != NONE, ok_read_time=ok_time,
                    must_have_happened=(s.type == OK) | read, position=position)


@dataclass
class Observations:
    offset: np.ndarray
    value: np.ndarray
    op: np.ndarray

    def __len__(self) -> int:
        return len(self.op)


@dataclass
class Sent:
    """Per row of Partition.sends: whether anyone read its value here, an
    ok poll did (and when first), whether it must have happened (ok, or
    read: docs/anomalies.md) and its position: the acknowledged offset,
    else the lowest offset it was read at, else NONE."""
    read: np.ndarray
    read_ok: np.ndarray
    ok_read_time: np.ndarray
    must_have_happened: np.ndarray
    position: np.ndarray
