"""The Parquet tables under `RUN_DIR/history/` (docs/history.md): what each
holds, its columns and types, and how its rows derive from the operations.

Every table has one row per operation or per record of an operation, and
starts with the operation's envelope (`OP_COLUMNS`): `op_index` (its
completion's history index, or the invocation's when none was recorded:
then `type` is `info` and `time` null), `invoke_index`, `invoke_time`,
`time`, `process`, `type` and `phase`. The rest are the fields of the
record, typed by its shape in `history_analysis.history.schema`. Rows are in
history order of the completions. Time stays int64 nanoseconds.

`derive` turns paired operations (an Arrow table of
`history_analysis.history.pairing.PAIRED`: each
invocation with its completion's values) into rows of every table; ingest
and the tests use it, so there is one definition of what lands where.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.history.schema import (
    END_AT, EVENT_TYPES, FS, NEMESIS_PROCESS, OFFSET_AT, OFFSET_FOUND, READ, REBALANCE_KINDS,
    SEND_DONE, TOPIC_PARTITION, Shape, codes,
)
from history_analysis.history.pairing import OP_COLUMNS

_ENVELOPE = frozenset(name for name, _ in OP_COLUMNS)


@dataclass(frozen=True)
class Table:
    name: str
    extra: tuple[tuple[str, pa.DataType], ...] = ()   # columns after the envelope
    item: Shape | None = None                         # the record each row holds
    pos: bool = False                                 # the record's place in its list

    @property
    def schema(self) -> pa.Schema:
        fields = [*OP_COLUMNS, *self.extra]
        if self.pos:
            fields.append(("pos", pa.int32()))
        if self.item is not None:
            fields += [(f.name, f.type) for f in self.item.arrow]
        return pa.schema(fields)

    @property
    def columns(self) -> list[str]:
        return self.schema.names


_text = pa.string()
OPS = Table("ops", extra=(("f", _text), ("error", _text), ("committing", pa.int64())))
SENDS = Table("sends", item=SEND_DONE, pos=True)
READS = Table("reads", item=READ, pos=True)
COMMITS = Table("commits", extra=(("group", _text),), item=OFFSET_AT)
COMMITTED = Table("committed", extra=(("group", _text),), item=OFFSET_FOUND)
# kind: `assign` and `subscribe` (ok or info: they may have happened;
# subscribe has one row per topic, partition null), or a rebalance callback
# a poll reported: `assigned`, `revoked`, `lost` (or the client's own `reset`).
ASSIGNMENT_KINDS = ("assign", "subscribe", *REBALANCE_KINDS)
ASSIGNMENTS = Table("assignments", extra=(("kind", _text), ("group", _text)),
                    item=TOPIC_PARTITION)
# The partition ends recorded (ok end-offsets, of either phase): `unseen`
# is proven against the final phase's, `stale-end` judges both.
END_OFFSETS = Table("end_offsets", extra=(("isolation", _text),), item=END_AT)
NEMESIS = Table("nemesis", extra=(("f", _text), ("value_json", _text)))

TABLES = {t.name: t for t in (OPS, SENDS, READS, COMMITS, COMMITTED, ASSIGNMENTS,
                               END_OFFSETS, NEMESIS)}
# The tables whose rows belong to a (topic, partition) (an assignments row
# of a subscription names only a topic): ingest buckets them by it
# (history_analysis/buckets.py), and the check reads each bucket whole.
PER_PARTITION = (SENDS, READS, COMMITS, COMMITTED, END_OFFSETS, ASSIGNMENTS)


# -- deriving -------------------------------------------------------------------

def derive(paired: pa.Table) -> dict[str, pa.Table]:
    """Every table's rows from paired operations (schema PAIRED).

    A record list is exploded straight from the value column of every
    operation — a field of VALUE is filled only by the fs whose shapes have
    it — and cut to the fs the table is for only where fs share a field:
    the nested values are never copied whole."""
    ops = paired.combine_chunks()
    f = codes(ops["f"], FS)
    type_ = codes(ops["type"], EVENT_TYPES)
    happened = (type_ == EVENT_TYPES.index("ok")) | (type_ == EVENT_TYPES.index("info"))
    envelope = ops.select([name for name, _ in OP_COLUMNS])

    def asked(name: str) -> pa.Array:
        return pc.struct_field(ops["asked"], name)

    def done(name: str) -> pa.Array:
        return pc.struct_field(ops["done"], name)

    def of(*names: str) -> np.ndarray:
        return np.isin(f, [FS.index(name) for name in names])

    rebalances = _records(envelope, done("rebalances"))
    rebalance = rebalances["item"]
    assignments = [
        _records(envelope, asked("partitions"), of("assign") & happened,
                 kind="assign", group=None),
        _records(rebalances, pc.struct_field(rebalance, "partitions"),
                 kind=pc.struct_field(rebalance, "kind"),
                 group=pc.struct_field(rebalance, "group")),
        _records(envelope, asked("topics"), of("subscribe") & happened, item_as="topic",
                 kind="subscribe", group=asked("group")),
    ]
    tables = {
        OPS: ops.append_column("committing", done("committing")),
        SENDS: _records(envelope, pc.coalesce(done("sends"), asked("sends"))),
        READS: _records(envelope, done("reads")),
        # A transaction's offsets are the group's commit, made with it (KIP-447).
        COMMITS: _records(envelope, pc.coalesce(done("offsets"), asked("offsets")),
                          of("commit", "txn"), group=pc.coalesce(done("group"), asked("group"))),
        COMMITTED: _records(envelope, done("offsets"), of("committed"), group=done("group")),
        ASSIGNMENTS: _in_history_order(pa.concat_tables(
            [_rows(ASSIGNMENTS, t) for t in assignments])),
        END_OFFSETS: _records(envelope, done("offsets"),
                              of("end-offsets") & (type_ == EVENT_TYPES.index("ok")),
                              isolation=asked("isolation")),
        NEMESIS: ops.filter(pa.array(np.asarray(ops["process"]) == NEMESIS_PROCESS)),
    }
    return {table.name: _rows(table, frame) for table, frame in tables.items()}


def _records(owners: pa.Table, lists: pa.Array, keep: np.ndarray | None = None,
             item_as: str = "item", **columns) -> pa.Table:
    """One row per element of `lists` (a list per row of `owners`, whose
    envelope columns it takes), only of the owners `keep` marks (all if
    None): `pos` (the element's place in its list), the element as
    `item_as`, and `columns` (per owner: an array, or a constant)."""
    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    if len(lists):
        parents = np.asarray(pc.list_parent_indices(lists))
        items = pc.list_flatten(lists)
    else:
        parents, items = np.zeros(0, dtype=np.int64), pa.nulls(0, lists.type.value_type)
    pos = np.arange(len(parents), dtype=np.int32) \
        - np.searchsorted(parents, parents).astype(np.int32)
    if keep is not None:
        kept = keep[parents]
        parents, pos, items = parents[kept], pos[kept], items.filter(pa.array(kept))
    at = pa.array(parents, type=pa.int64())
    rows = owners.select([c for c in owners.column_names if c in _ENVELOPE]).take(at)
    for name, column in columns.items():
        if isinstance(column, (pa.Array, pa.ChunkedArray)):
            column = column.take(at)
        else:
            column = pa.repeat(pa.scalar(column, pa.string()), len(parents))
        rows = rows.append_column(name, column)
    rows = rows.append_column("pos", pa.array(pos, type=pa.int32()))
    return rows.append_column(item_as, items)


def _in_history_order(rows: pa.Table) -> pa.Table:
    return rows.take(pc.sort_indices(rows, [("op_index", "ascending")]))


def _rows(table: Table, frame: pa.Table) -> pa.Table:
    """`frame`'s columns in `table`'s order and types; an `item` struct
    column is spread into the record's fields."""
    schema = table.schema
    columns = []
    for field in schema:
        if field.name in frame.column_names:
            column = frame[field.name]
        elif "item" in frame.column_names and field.name in frame["item"].type.names:
            column = pc.struct_field(frame["item"], field.name)
        elif field.name == "partition" and "topic" in frame.column_names:
            column = pa.nulls(len(frame), field.type)   # a subscription names topics
        else:
            raise KeyError(f"table {table.name}: no column {field.name}")
        columns.append(column.cast(field.type))
    return pa.Table.from_arrays(columns, schema=schema)


class TableError(ValueError):
    """The Parquet tables of a run directory are missing or malformed."""


def read_tables(spark, tables_dir) -> dict:
    """Open every table under `tables_dir` (RUN_DIR/history) in Spark,
    after checking with Arrow that each exists and has every column, with
    its type (Spark then reads with the known schema: no inference pass).

    Extra columns are ignored, so tables written by another tool with more
    columns still read; missing or mistyped ones are an error naming the
    table, the columns and how to fix it.
    """
    import pyarrow.dataset as ds
    from pyspark.sql.pandas.types import from_arrow_schema

    tables_dir = Path(tables_dir)
    frames = {}
    for table in TABLES.values():
        path = tables_dir / table.name
        if not path.is_dir():
            raise TableError(f"{path}: table {table.name!r} is missing; run "
                             "`kchaos ingest` on the run directory to rebuild the tables")
        try:
            have = ds.dataset(path, format="parquet").schema
        except (pa.ArrowInvalid, OSError) as e:
            raise TableError(f"{path}: cannot read table {table.name!r} as Parquet: "
                             f"{str(e).splitlines()[0]}") from None
        missing = [f.name for f in table.schema if f.name not in have.names]
        if missing:
            raise TableError(f"{path}: table {table.name!r} lacks columns "
                             f"{', '.join(missing)} (docs/history.md); re-run `kchaos ingest`")
        wrong = [f"{f.name} is {have.field(f.name).type}, expected {f.type}"
                 for f in table.schema if have.field(f.name).type != f.type]
        if wrong:
            raise TableError(f"{path}: table {table.name!r} has mistyped columns: "
                             f"{'; '.join(wrong)}")
        # Every file under the table, buckets included (buckets.py), and no
        # partition columns guessed from the folders' names.
        frames[table.name] = spark.read.schema(from_arrow_schema(table.schema)) \
            .option("recursiveFileLookup", "true").parquet(path.resolve().as_uri())
    return frames
