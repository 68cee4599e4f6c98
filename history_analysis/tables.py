"""The Parquet tables under `history/`: names, columns, types and sort order.

HISTORY.md defines the tables; this module is that definition in code, for
ingest (which writes them) and for checkers (which read and verify them). Time
stays int64 nanoseconds. `op_index` (and `index` in `ops`) is the index of the
completion, or of the invocation when none was recorded (then `type` is
`info` and `time` is null).
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    IntegerType, LongType, StringType, StructField, StructType,
)


@dataclass(frozen=True)
class Table:
    name: str
    schema: StructType
    sort: tuple[str, ...]  # the order rows are written in

    @property
    def columns(self) -> list[str]:
        return self.schema.fieldNames()


def _schema(*columns: tuple[str, object]) -> StructType:
    return StructType([StructField(name, type_, True) for name, type_ in columns])


_long, _int, _str = LongType(), IntegerType(), StringType()

OPS = Table("ops", _schema(
    ("index", _long), ("invoke_index", _long), ("invoke_time", _long), ("time", _long),
    ("process", _long), ("type", _str), ("f", _str), ("phase", _str), ("error", _str),
), sort=("index",))

SENDS = Table("sends", _schema(
    ("op_index", _long), ("process", _long), ("type", _str), ("pos", _int),
    ("topic", _str), ("partition", _int), ("value", _long), ("offset", _long),
    ("invoke_time", _long), ("time", _long),
), sort=("topic", "partition", "offset", "op_index", "pos"))

READS = Table("reads", _schema(
    ("op_index", _long), ("process", _long), ("type", _str), ("pos", _int),
    ("topic", _str), ("partition", _int), ("offset", _long), ("value", _long),
    ("raw", _str), ("invoke_time", _long), ("time", _long), ("phase", _str),
), sort=("topic", "partition", "process", "op_index", "pos"))

_OFFSET_COLUMNS = (
    ("op_index", _long), ("process", _long), ("type", _str), ("group", _str),
    ("topic", _str), ("partition", _int), ("offset", _long), ("invoke_time", _long),
    ("time", _long),
)
COMMITS = Table("commits", _schema(*_OFFSET_COLUMNS),
                sort=("group", "topic", "partition", "op_index"))
COMMITTED = Table("committed", _schema(*_OFFSET_COLUMNS),
                  sort=("group", "topic", "partition", "op_index"))

# kind: `assign` and `subscribe` (ok or info ops: they may have happened;
# subscribe gives one row per topic with partition null), or a rebalance
# callback a poll reported: `assigned`, `revoked`, `lost`.
ASSIGNMENTS = Table("assignments", _schema(
    ("op_index", _long), ("process", _long), ("kind", _str), ("group", _str),
    ("topic", _str), ("partition", _int), ("time", _long),
), sort=("topic", "partition", "process", "op_index"))

NEMESIS = Table("nemesis", _schema(
    ("invoke_index", _long), ("invoke_time", _long), ("time", _long), ("f", _str),
    ("type", _str), ("value_json", _str),
), sort=("invoke_index",))

# Added to HISTORY.md's list: the partition ends the final phase recorded
# (ok `end-offsets` completions), which `unseen` needs to be proven.
END_OFFSETS = Table("end_offsets", _schema(
    ("op_index", _long), ("process", _long), ("topic", _str), ("partition", _int),
    ("offset", _long), ("time", _long),
), sort=("topic", "partition", "op_index"))

TABLES = {t.name: t for t in (OPS, SENDS, READS, COMMITS, COMMITTED, ASSIGNMENTS,
                               NEMESIS, END_OFFSETS)}


class TableError(ValueError):
    """The Parquet tables of a run directory are missing or malformed."""


def read_tables(spark, tables_dir) -> dict:
    """Open every table under `tables_dir` (RUN_DIR/history), checking that
    each exists and has every column HISTORY.md gives it, with its type.

    Extra columns are dropped, so tables written by another tool with more
    columns still read; missing or mistyped ones are an error naming the
    table, the columns and how to fix it.
    """
    from pathlib import Path

    from pyspark.errors import AnalysisException

    tables_dir = Path(tables_dir)
    frames = {}
    for table in TABLES.values():
        path = tables_dir / table.name
        if not path.is_dir():
            raise TableError(f"{path}: table {table.name!r} is missing; run "
                             "`kchaos ingest` on the run directory to rebuild the tables")
        try:
            frame = spark.read.parquet(path.resolve().as_uri())
        except AnalysisException as e:
            raise TableError(f"{path}: cannot read table {table.name!r} as Parquet: "
                             f"{str(e).splitlines()[0]}") from None
        have = {f.name: f.dataType for f in frame.schema.fields}
        missing = [c for c in table.columns if c not in have]
        if missing:
            raise TableError(f"{path}: table {table.name!r} lacks columns "
                             f"{', '.join(missing)} (HISTORY.md); re-run `kchaos ingest`")
        wrong = [f"{f.name} is {have[f.name].simpleString()}, expected "
                 f"{f.dataType.simpleString()}"
                 for f in table.schema.fields if have[f.name] != f.dataType]
        if wrong:
            raise TableError(f"{path}: table {table.name!r} has mistyped columns: "
                             f"{'; '.join(wrong)}")
        frames[table.name] = frame.select(*table.columns)
    return frames
