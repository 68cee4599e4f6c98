"""The synthetic history written out: the operations synthetic_history.py
builds become OUT/history.jsonl, or the Parquet tables of OUT/history that
ingest would derive from it."""

from __future__ import annotations

import shutil
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from benchmarks.synthetic_history import Layout
from history_analysis.history import schema
from history_analysis.history.pairing import PAIRED
from history_analysis.buckets import TableWriter, bucket_count
from history_analysis.tables import derive


# --- history.jsonl lines -----------------------------------------------------------

def event_lines(layout: Layout, o: Column) -> Column:
    """The invocation and completion lines of op `o`: array<struct<index, line>>.
    Spark's own JSON writer makes them (null fields left out, as the
    schema allows); a nemesis value is its JSON text as it is."""
    def line(index: Column, type_: Column, completion: bool) -> Column:
        envelope = F.to_json(F.struct(
            index.alias("index"), layout.time(index).alias("time"),
            o["process"].alias("process"), type_.alias("type"), o["f"].alias("f"),
            (o["error"] if completion else F.lit(None).cast("string")).alias("error"),
            F.when(o["phase"] == "final", F.lit("final")).alias("phase")))
        value = F.when(o["process"] == schema.NEMESIS_PROCESS, o["value_json"]) \
            .otherwise(F.to_json(o["done"] if completion else o["asked"]))
        return F.struct(index.alias("index"), F.concat(
            F.regexp_replace(envelope, "}$", ""), F.lit(',"value":'), value, F.lit("}"))
            .alias("line"))
    return F.array(line(o["invoke_index"], F.lit("invoke"), False),
                   line(o["index"], o["type"], True))


# --- writing ---------------------------------------------------------------------

def _uri(path: Path) -> str:
    return path.resolve().as_uri()


@contextmanager
def interpreted(spark: SparkSession):
    """Whole-stage codegen off: the generating projections are larger than a
    compiled Java method may be (64 KB), and their higher-order functions
    are interpreted anyway; off, Spark does not try, fail and log it."""
    key = "spark.sql.codegen.wholeStage"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)


def write_tables(ops: DataFrame, layout: Layout, out: Path) -> None:
    """The Parquet tables of OUT/history, derived by ingest's own rules
    (history_analysis.tables.derive) from the paired operations and laid
    out as ingest lays them out (history_analysis/buckets.py, in the
    buckets of a history of `layout.events`): Spark writes the operations
    to a scratch directory, then they are streamed through derive a batch
    at a time, so memory stays bounded."""
    scratch = out / ".generate"
    shutil.rmtree(scratch, ignore_errors=True)
    paired = ops.select(
        F.col("index").alias("op_index"), "invoke_index",
        layout.time(F.col("invoke_index")).alias("invoke_time"),
        layout.time(F.col("index")).alias("time"), "process", "type",
        F.coalesce("phase", F.lit("main")).alias("phase"), "f", "error", "asked", "done",
        "value_json")
    with interpreted(ops.sparkSession):
        paired.write.parquet(_uri(scratch / "ops"))
    target = out / "history"
    shutil.rmtree(target, ignore_errors=True)
    with TableWriter(target, bucket_count(layout.events)) as writer:
        for batch in ds.dataset(scratch / "ops", format="parquet").to_batches(
                batch_size=1 << 18):
            writer.write(derive(pa.Table.from_batches([batch]).cast(PAIRED)))
    shutil.rmtree(scratch)


def write_jsonl(sections: list[DataFrame], layout: Layout, out: Path) -> Path:
    """OUT/history.jsonl from frames of `ops` rows, each already in history
    order (rows in order, ops in order within a row); lines are sorted within
    each row only, then the part files are concatenated in order, each
    deleted once appended (at 100M events the file is about 25 GB)."""
    scratch = out / ".generate"
    shutil.rmtree(scratch, ignore_errors=True)
    for i, rows in enumerate(sections):
        lines = rows.select(F.array_sort(F.flatten(F.transform(
            "ops", lambda o: event_lines(layout, o)))).alias("events")) \
            .select(F.explode("events").alias("e")).select("e.line")
        with interpreted(rows.sparkSession):
            lines.write.text(_uri(scratch / f"section{i}"))
    target = out / "history.jsonl"
    with open(target, "wb") as sink:
        for i in range(len(sections)):
            for part in sorted((scratch / f"section{i}").glob("part-*")):
                with open(part, "rb") as source:
                    shutil.copyfileobj(source, sink, 1 << 20)
                part.unlink()
    shutil.rmtree(scratch)
    return target
