"""The checker suite's Spark side: one co-location of every partition's rows,
every per-partition family over it, and one collection of the results.

    tables ─► context (checkers/summary.py: members, subscriptions, time span)
           └► rows of each (topic, partition) brought together ─► findings
                (Partition + every family's numpy `findings`, per partition)
    findings ─► values grouped across partitions ─► cross-partition cases
    findings + cross-partition cases ─► counts, ranked examples, statistics,
                errors: collected in one job (checkers/collected.py)

A family's error is caught per partition and reported as that family's, so
one family's failure never takes the others down.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from checkers import (
    duplicates, group_offsets, lost, poll_order, send_order, stats, version_order,
)
from checkers.collected import Collected, Family
from checkers.findings import OUTPUT, Findings
from checkers.history import History
from checkers.partition import ASSIGNMENTS, COLOCATED, SOURCES, Context, Partition


class PerPartition(Family, Protocol):
    """A family that looks at each partition's rows: its `findings` run on
    every partition, in the co-located pass."""

    def findings(self, part: Partition, out: Findings) -> None: ...


PER_PARTITION: tuple[PerPartition, ...] = (
    version_order, duplicates, lost, send_order, poll_order, group_offsets, stats)

OUTPUT_SPARK = from_arrow_schema(OUTPUT)
BUCKETS_PER_SHUFFLE_PARTITION = 4


def per_bucket(context: Context):
    """The function Spark runs per bucket of partitions: it splits the
    bucket's rows by (topic, partition) and checks each. (Its type hints
    tell Spark it takes and returns a whole Arrow table.)"""
    def check(rows: pa.Table) -> pa.Table:
        topics = pc.dictionary_encode(rows["topic"]).combine_chunks()
        key = np.asarray(topics.indices, dtype=np.int64) * (1 << 32) \
            + np.asarray(rows["partition"], dtype=np.int64)
        by = np.argsort(key, kind="stable")
        # One take, then slices: a take per partition from the many chunks
        # Spark hands over cost more than the checks of small partitions.
        rows = rows.take(pa.array(by)).combine_chunks()
        starts = np.concatenate([[0], np.flatnonzero(np.diff(key[by])) + 1, [len(by)]])
        parts = [check_partition(rows.slice(start, end - start), context)
                 for start, end in zip(starts[:-1].tolist(), starts[1:].tolist())] \
            if len(by) else []
        return pa.concat_tables(parts) if parts else OUTPUT.empty_table()
    return check


def check_partition(rows: pa.Table, context: Context) -> pa.Table:
    """Every family's findings for one partition's co-located rows."""
    part = Partition(rows, context)
    out = Findings(part.topic, part.partition, context.max_examples)
    for family in PER_PARTITION:
        try:
            family.findings(part, out)
        except Exception as e:  # noqa: BLE001 — reported as that family's error
            detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
            out.error(family.FAMILY, f"{type(e).__name__}: {detail}")
    return out.table()


# -- what every partition needs to know of the whole history --------------------------

def context(history: History, max_examples: int) -> Context:
    facts = history.summary()
    start, _, width = facts.series() or (0, 0, 1)
    return Context(members=facts.members, subscriptions=facts.subscriptions,
                   assigned_topics=facts.assigned_topics, series_start=start,
                   series_width=width, max_examples=max_examples,
                   fault_spans=facts.fault_spans)


# -- the co-located pass ----------------------------------------------------------------

def colocated_rows(history: History) -> DataFrame:
    """Every row that belongs to one (topic, partition), in COLOCATED's
    columns, tagged with its source table: one scan of the six tables' files
    with the union of their columns (a column a table lacks reads as null),
    the source told by each file's directory."""
    spark_schema = from_arrow_schema(pa.schema([f for f in COLOCATED if f.name != "source"]))
    paths = [(history.tables_dir / table.name).as_uri() for table in SOURCES]
    directory = F.element_at(F.split(F.col("_metadata.file_path"), "/"), -2)
    source = F.lit(None).cast("byte")
    for code, table in reversed(list(enumerate(SOURCES))):
        source = F.when(directory == table.name, F.lit(code).cast("byte")).otherwise(source)
    rows = history.spark.read.schema(spark_schema).parquet(*paths) \
        .select(source.alias("source"), *(f.name for f in COLOCATED if f.name != "source"))
    # Subscriptions name topics, not partitions: they come through the context.
    return rows.where((F.col("source") != ASSIGNMENTS)
                      | F.col("partition").isNotNull())


def findings(history: History, max_examples: int) -> DataFrame:
    """Every family's findings of every partition. The partitions are
    spread over a few buckets per shuffle partition, each bucket one call of
    Python (a call per partition would cost more than small ones do). A few,
    not one: the shuffle hashes the bucket numbers in turn, and with one
    each, two of them can land on one task and leave a core idle. (With
    one task there is nothing to balance: one bucket, one call.)"""
    tasks = int(history.shuffle_partitions)
    count = BUCKETS_PER_SHUFFLE_PARTITION * tasks if tasks > 1 else 1
    buckets = F.pmod(F.xxhash64("topic", "partition"), F.lit(count))
    return colocated_rows(history).withColumn("bucket", buckets).groupBy("bucket") \
        .applyInArrow(per_bucket(context(history, max_examples)), OUTPUT_SPARK)


def _gathered(rows: DataFrame) -> DataFrame:
    """One pass over the findings: the value summaries grouped by value
    across partitions, keeping the values placed twice, read but never
    sent, or read though every send of them failed (as rows of type
    "suspect", with place_count, sent, failed_send and read over all
    partitions); and, in the group of no value, every other row (`rows`: a
    few per partition, cases being capped there)."""
    value = F.when(F.col("type") == "value", F.col("value"))
    others = F.collect_list(F.when(F.col("type") != "value", F.struct(*OUTPUT.names)))
    grouped = rows.groupBy(value.alias("value")).agg(
        F.sum("place_count").alias("place_count"), F.max("sent").alias("sent"),
        F.min("failed_send").alias("failed_send"), F.max("read").alias("read"),
        others.alias("rows"))
    suspect = (F.col("place_count") > 1) | (F.col("read") & ~F.col("sent"))
    return grouped.where(F.col("value").isNull() | suspect)


def cross_partition_cases(history: History, suspects: pa.Table, max_examples: int) -> pa.Table:
    """`duplicate`, `garbage-read` and `aborted-read` cases of the suspect
    values, from their observations in every partition."""
    never_sent = pc.and_(suspects["read"], pc.invert(suspects["sent"]))
    flags = pa.table({
        "value": suspects["value"],
        "duplicated": pc.greater(suspects["place_count"], 1),
        "garbage": pc.and_(never_sent, pc.is_null(suspects["failed_send"])),
        "aborted": pc.and_(never_sent, pc.is_valid(suspects["failed_send"])),
        "failed_send": suspects["failed_send"]})
    acked = history["sends"].where((F.col("type") == "ok") & F.col("offset").isNotNull()) \
        .select("topic", "partition", "offset", "value", "op_index",
                F.lit(False).alias("is_read"))
    read = history["reads"].where(F.col("value").isNotNull()).select(
        "topic", "partition", "offset", "value", "op_index", F.lit(True).alias("is_read"))
    buckets = max(1, history.spark.sparkContext.defaultParallelism)
    observed = acked.unionByName(read).join(history.spark.createDataFrame(flags), "value") \
        .withColumn("bucket", F.pmod(F.xxhash64("value"), F.lit(buckets)).cast("int")) \
        .select(*duplicates.SUSPECT_OBSERVATIONS.names)
    return observed.groupBy("bucket").applyInArrow(
        duplicates.across_partitions(max_examples), OUTPUT_SPARK).toArrow()


# -- collecting -----------------------------------------------------------------------

def collect(history: History, max_examples: int) -> Collected:
    """Counts and examples of every case type, statistics and errors: one
    job brings every partition's findings but the value summaries, and the
    suspect values, to the driver; a second runs only if there are
    suspects. Built once per history, for every family."""
    def build() -> Collected:
        gathered = _gathered(findings(history, max_examples)).toArrow()
        whole = pc.is_null(gathered["value"])
        listed = gathered.filter(whole)["rows"].combine_chunks()
        rows = pa.Table.from_struct_array(pc.list_flatten(listed)) if len(listed) \
            else OUTPUT.empty_table()
        suspects = gathered.filter(pc.invert(whole))
        if suspects.num_rows:
            rows = pa.concat_tables([rows.cast(OUTPUT), cross_partition_cases(
                history, suspects, max_examples).cast(OUTPUT)])
        return Collected.of(rows, max_examples)
    return history.memo(("collected", max_examples), build)
