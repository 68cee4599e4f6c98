"""Ingest: `history.jsonl` → the Parquet tables of `history/` (HISTORY.md).

First the streaming reader validates the file (bounded memory, exact errors).
Then Spark reads it as text with an explicit schema (no inference), pairs each
invocation with its completion — the next event of the same process, since a
process has one operation outstanding at a time — and derives every table from
the paired operations, each sorted as `tables.py` says. Everything is a Spark
plan over files, so a history larger than memory ingests fine.

The tables are built in a scratch directory and swapped in at the end, so a
re-run replaces them whole (idempotent) and a crash leaves the old ones.
`history/_ingest.json` records what was ingested from which source.
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType, BooleanType, IntegerType, LongType, StringType, StructField, StructType,
)

from history_analysis.history import HistoryReport, validate_history
from history_analysis.history.contract import NEMESIS_PROCESS
from history_analysis.tables import (
    ASSIGNMENTS, COMMITS, COMMITTED, END_OFFSETS, NEMESIS, OPS, READS, SENDS, TABLES,
)

HISTORY_FILE = "history.jsonl"
TABLES_DIR = "history"
MANIFEST = "_ingest.json"


class IngestError(ValueError):
    """The run directory cannot be ingested; the message says why and where."""


def _struct(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, type_, True) for name, type_ in fields])


_long, _int, _str = LongType(), IntegerType(), StringType()
_TOPIC_PARTITION = _struct(("topic", _str), ("partition", _int))

ENVELOPE = _struct(("index", _long), ("time", _long), ("process", _long), ("type", _str),
                   ("f", _str), ("error", _str), ("phase", _str))

# Every shape a client operation's value takes (HISTORY.md), as one struct.
VALUE = _struct(
    ("sends", ArrayType(_struct(("topic", _str), ("partition", _int), ("value", _long),
                                ("offset", _long)))),
    ("reads", ArrayType(_struct(("topic", _str), ("partition", _int), ("offset", _long),
                                ("value", _long), ("raw", _str)))),
    ("rebalances", ArrayType(_struct(("kind", _str), ("group", _str),
                                     ("partitions", ArrayType(_TOPIC_PARTITION))))),
    ("partitions", ArrayType(_TOPIC_PARTITION)),
    ("seek_to_beginning", BooleanType()),
    ("polls", BooleanType()),
    ("group", _str),
    ("topics", ArrayType(_str)),
    ("offsets", ArrayType(_struct(("topic", _str), ("partition", _int), ("offset", _long)))),
)


@dataclass
class IngestResult:
    run_dir: str
    source_size: int
    source_mtime_ns: int
    events: int
    unmatched: int
    truncated_line: int | None
    rows: dict[str, int] = field(default_factory=dict)

    def summary(self) -> str:
        rows = ", ".join(f"{name} {n}" for name, n in self.rows.items())
        text = f"{self.run_dir}: ingested {self.events} events → {rows}"
        if self.unmatched:
            text += f"; {self.unmatched} unmatched invocations as info"
        if self.truncated_line:
            text += f"; truncated last line {self.truncated_line} ignored"
        return text


def ingest(spark: SparkSession, run_dir: str | os.PathLike) -> IngestResult:
    """Validate `RUN_DIR/history.jsonl` and (re)write `RUN_DIR/history/`."""
    run_dir = Path(run_dir)
    source = run_dir / HISTORY_FILE
    if not run_dir.is_dir():
        raise IngestError(f"{run_dir}: no such run directory")
    if not source.is_file():
        raise IngestError(f"{run_dir}: no {HISTORY_FILE} in this run directory; "
                          "a run directory holds the history a run wrote (see HISTORY.md)")
    stat = source.stat()
    report = validate_history(source)

    scratch = run_dir / f".{TABLES_DIR}.ingest-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        paired_path = scratch / "_paired"
        _paired_operations(_events(spark, source, report)).write.parquet(_uri(paired_path))
        paired = spark.read.parquet(_uri(paired_path))
        result = IngestResult(os.fspath(run_dir), stat.st_size, stat.st_mtime_ns,
                              report.events, len(report.unmatched),
                              report.truncated.line if report.truncated else None)
        for name, frame in derive_tables(paired).items():
            table = TABLES[name]
            path = _uri(scratch / table.name)
            frame.select(*table.columns).orderBy(*table.sort).write.parquet(path)
            result.rows[table.name] = spark.read.parquet(path).count()
        shutil.rmtree(paired_path)
        (scratch / MANIFEST).write_text(json.dumps(asdict(result), indent=2) + "\n")
        _swap_in(scratch, run_dir / TABLES_DIR)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def read_manifest(run_dir: str | os.PathLike) -> dict | None:
    """What the last ingest of this run directory recorded, or None."""
    path = Path(run_dir) / TABLES_DIR / MANIFEST
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _uri(path: Path) -> str:
    # Explicit file: so a cluster whose default filesystem is HDFS still
    # reads the local run directory (which must then be on shared storage).
    return path.resolve().as_uri()


def _events(spark: SparkSession, source: Path, report: HistoryReport) -> DataFrame:
    lines = spark.read.text(_uri(source))
    events = lines.select(F.from_json("value", ENVELOPE).alias("e"),
                          F.get_json_object("value", "$.value").alias("value_json"))
    # The reader has proven lines 0 .. events-1 valid; only a truncated last
    # line can follow, and it is dropped here.
    events = events.where(F.col("e.index").isNotNull() & (F.col("e.index") < report.events))
    is_client = F.col("e.process") != NEMESIS_PROCESS
    return events.select(
        "e.*", F.coalesce("e.phase", F.lit("main")).alias("op_phase"), "value_json",
        F.when(is_client, F.from_json("value_json", VALUE)).alias("value"),
    ).drop("phase").withColumnRenamed("op_phase", "phase")


def _paired_operations(events: DataFrame) -> DataFrame:
    """One row per operation: the invocation with the completion that follows it."""
    by_process = Window.partitionBy("process").orderBy("index")
    following = F.lead(F.struct("index", "time", "type", "error", "value", "value_json")) \
        .over(by_process)
    with_next = events.withColumn("next", following).where(F.col("type") == "invoke")
    done = F.col("next").isNotNull()  # the reader proved `next` is our completion
    return with_next.select(
        F.when(done, F.col("next.index")).otherwise(F.col("index")).alias("index"),
        F.col("index").alias("invoke_index"),
        F.col("time").alias("invoke_time"),
        F.col("next.time").alias("time"),
        "process",
        F.when(done, F.col("next.type")).otherwise(F.lit("info")).alias("type"),
        "f", "phase",
        F.col("next.error").alias("error"),
        F.col("value").alias("asked"),
        F.col("next.value").alias("done"),
        F.coalesce("next.value_json", "value_json").alias("value_json"),
    )


def derive_tables(ops: DataFrame) -> dict[str, DataFrame]:
    """Every table of HISTORY.md from the paired operations (one row per
    operation: `asked` and `done` values of VALUE's type, `value_json`)."""
    sends = ops.where(F.col("f").isin("send", "txn")) \
        .select("*", F.posexplode(F.coalesce("done.sends", "asked.sends")).alias("pos", "r"))
    reads = ops.where(F.col("f").isin("poll", "txn")) \
        .select("*", F.posexplode("done.reads").alias("pos", "r"))
    commits = ops.where(F.col("f") == "commit") \
        .select("*", F.coalesce("done.group", "asked.group").alias("group"),
                F.explode(F.coalesce("done.offsets", "asked.offsets")).alias("r"))
    committed = ops.where(F.col("f") == "committed") \
        .select("*", F.col("done.group").alias("group"), F.explode("done.offsets").alias("r"))
    end_offsets = ops.where((F.col("f") == "end-offsets") & (F.col("type") == "ok")) \
        .select("*", F.explode("done.offsets").alias("r"))

    may_have_happened = F.col("type").isin("ok", "info")
    assigned = ops.where((F.col("f") == "assign") & may_have_happened).select(
        "index", "process", F.lit("assign").alias("kind"), F.lit(None).cast("string")
        .alias("group"), F.explode("asked.partitions").alias("p"), "time")
    subscribed = ops.where((F.col("f") == "subscribe") & may_have_happened).select(
        "index", "process", F.lit("subscribe").alias("kind"), F.col("asked.group")
        .alias("group"), F.explode("asked.topics").alias("topic"), "time")
    rebalanced = ops.where(F.col("f") == "poll") \
        .select("index", "process", "time", F.explode("done.rebalances").alias("rb")) \
        .select("index", "process", F.col("rb.kind").alias("kind"),
                F.col("rb.group").alias("group"), F.explode("rb.partitions").alias("p"), "time")
    partition_rows = assigned.unionByName(rebalanced).select(
        F.col("index").alias("op_index"), "process", "kind", "group",
        F.col("p.topic").alias("topic"), F.col("p.partition").alias("partition"), "time")
    topic_rows = subscribed.select(
        F.col("index").alias("op_index"), "process", "kind", "group", "topic",
        F.lit(None).cast("int").alias("partition"), "time")

    op_columns = [F.col("index").alias("op_index"), "process", "type"]
    record = lambda *names: [F.col(f"r.{n}").alias(n) for n in names]  # noqa: E731
    return {
        OPS.name: ops,
        SENDS.name: sends.select(*op_columns, "pos", *record("topic", "partition", "value", "offset"),
                            "invoke_time", "time"),
        READS.name: reads.select(*op_columns, "pos",
                            *record("topic", "partition", "offset", "value", "raw"),
                            "invoke_time", "time", "phase"),
        COMMITS.name: commits.select(*op_columns, "group", *record("topic", "partition", "offset"),
                                "invoke_time", "time"),
        COMMITTED.name: committed.select(*op_columns, "group",
                                    *record("topic", "partition", "offset"),
                                    "invoke_time", "time"),
        ASSIGNMENTS.name: partition_rows.unionByName(topic_rows),
        NEMESIS.name: ops.where(F.col("process") == NEMESIS_PROCESS).select(
            "invoke_index", "invoke_time", "time", "f", "type", "value_json"),
        END_OFFSETS.name: end_offsets.select(F.col("index").alias("op_index"), "process",
                                        *record("topic", "partition", "offset"), "time"),
    }


def _swap_in(scratch: Path, target: Path) -> None:
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    scratch.rename(target)
    shutil.rmtree(old, ignore_errors=True)
