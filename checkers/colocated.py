"""The checker suite's Spark side: every partition's rows read together,
every per-partition family over them, and one collection of the results.

    tables ─► context (checkers/summary.py: members, subscriptions, time span)
    bucket of partitions (history_analysis/buckets.py) ─► its rows, read
           in one task ─► split by (topic, partition) ─► findings
                (Partition + every family's numpy `findings`, per partition)
    findings ─► the driver: cases, statistics, errors, candidate values
    candidate values ⋈ sends and reads ─► cross-partition cases
    findings + cross-partition cases ─► counts, ranked examples, statistics,
                errors (checkers/collected.py)

Ingest wrote each partition's rows into one bucket's files, so Spark only
hands out the buckets, a task each: no shuffle brings rows together and no
sort orders them (each task sorts its own rows by partition, in numpy).
The tasks read the files themselves, so on a cluster the run directory must
be on storage every executor reads (docs/checking.md).

A family's error is caught per partition and reported as that family's, so
one family's failure never takes the others down.
"""

from __future__ import annotations

from typing import Protocol

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema

from checkers import (
    duplicates, group_offsets, lost, poll_order, send_order, stats, transactions, version_order,
)
from checkers.collected import Collected, Family
from checkers.findings import CANDIDATE, OUTPUT, Findings
from checkers.history import History
from checkers.partition import ASSIGNMENTS, COLOCATED, SOURCES, Context, Partition


class PerPartition(Family, Protocol):
    """A family that looks at each partition's rows: its `findings` run on
    every partition, in the co-located pass."""

    def findings(self, part: Partition, out: Findings) -> None: ...


PER_PARTITION: tuple[PerPartition, ...] = (
    version_order, duplicates, lost, send_order, poll_order, group_offsets, stats)

OUTPUT_SPARK = from_arrow_schema(OUTPUT)


def per_bucket(context: Context):
    """The check of a bucket of partitions: it splits the bucket's rows by
    (topic, partition), stably (each partition's rows stay in history
    order), and checks each."""
    def check(rows: pa.Table) -> pa.Table:
        topics = pc.dictionary_encode(rows["topic"]).combine_chunks()
        key = np.asarray(topics.indices, dtype=np.int64) * (1 << 32) \
            + np.asarray(rows["partition"], dtype=np.int64)
        # One take, then slices: a take per partition from the table's
        # chunks costs more than the checks of small partitions. None when
        # the rows are in order already (a bucket of one partition).
        if (key[1:] < key[:-1]).any():
            by = np.argsort(key, kind="stable")
            rows, key = rows.take(pa.array(by)), key[by]
        rows = rows.combine_chunks()
        starts = np.concatenate([[0], np.flatnonzero(np.diff(key)) + 1, [len(key)]])
        parts = [check_partition(rows.slice(start, end - start), context)
                 for start, end in zip(starts[:-1].tolist(), starts[1:].tolist())] \
            if len(key) else []
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

def bucket_rows(tables_dir: Path, bucket: str) -> pa.Table:
    """Every row of one bucket (its folder in each per-partition table), in
    COLOCATED's columns, tagged with its source table (a column a table
    lacks is null). Subscriptions name topics, not partitions: they come
    through the context."""
    parts = []
    for code, table in enumerate(SOURCES):
        path = tables_dir / table.name / bucket
        if not path.is_dir():
            continue
        names = [f.name for f in COLOCATED if f.name in table.schema.names]
        rows = ds.dataset(path, format="parquet").to_table(columns=names)
        if code == ASSIGNMENTS:
            rows = rows.filter(pc.is_valid(rows["partition"]))
        parts.append(pa.Table.from_arrays(
            [pa.array(np.full(rows.num_rows, code, dtype=np.int8)),
             *(rows[f.name].cast(f.type) if f.name in names else pa.nulls(rows.num_rows, f.type)
               for f in COLOCATED if f.name != "source")], schema=COLOCATED))
    return pa.concat_tables(parts) if parts else COLOCATED.empty_table()


def findings(history: History, max_examples: int) -> DataFrame:
    """Every family's findings of every partition: a task per bucket, which
    reads the bucket's rows and checks its partitions."""
    check = per_bucket(context(history, max_examples))
    root, buckets = str(history.tables_dir), history.buckets

    def run(batches):
        for batch in batches:
            for bucket in batch.column(0).to_pylist():
                yield from check(bucket_rows(Path(root), buckets[bucket])).to_batches()
    return history.spark.range(len(buckets), numPartitions=max(1, len(buckets))) \
        .mapInArrow(run, OUTPUT_SPARK)


def cross_partition_cases(history: History, candidates: pa.Array, max_examples: int) -> pa.Table:
    """`duplicate`, `garbage-read` and `aborted-read` cases of the
    candidate values, judged on every send and read of them in every
    partition (a join of the few candidates with the tables)."""
    wanted = history.spark.createDataFrame(pa.table({"value": candidates}))
    sends = history["sends"].select(
        "topic", "partition", "offset", "value", "op_index", F.lit(False).alias("is_read"),
        ((F.col("type") == "ok") & F.col("offset").isNotNull()).alias("placed"),
        (F.col("type") != "fail").alias("sent"), (F.col("type") == "fail").alias("failed"))
    reads = history["reads"].where(F.col("value").isNotNull()).select(
        "topic", "partition", "offset", "value", "op_index", F.lit(True).alias("is_read"),
        F.lit(True).alias("placed"), F.lit(False).alias("sent"), F.lit(False).alias("failed"))
    buckets = max(1, history.spark.sparkContext.defaultParallelism)
    rows = sends.unionByName(reads).join(F.broadcast(wanted), "value") \
        .withColumn("bucket", F.pmod(F.xxhash64("value"), F.lit(buckets)).cast("int")) \
        .select(*duplicates.CANDIDATE_ROWS.names)
    return rows.groupBy("bucket").applyInArrow(
        duplicates.across_partitions(max_examples), OUTPUT_SPARK).toArrow()


# -- collecting -----------------------------------------------------------------------

def collect(history: History, max_examples: int) -> Collected:
    """Counts and examples of every case type, statistics and errors: one
    job brings every partition's findings to the driver (a few rows each,
    cases being capped per partition), and a second, only if a partition
    named candidate values, judges those across partitions; a third, only
    if the history holds transactions, judges them (checkers/transactions.py).
    Built once per history, for every family."""
    def build() -> Collected:
        rows = findings(history, max_examples).toArrow()
        is_candidate = pc.equal(rows["type"], CANDIDATE)
        candidates = pc.unique(rows.filter(is_candidate)["value"])
        rows = rows.filter(pc.invert(is_candidate)).cast(OUTPUT)
        if len(candidates):
            rows = pa.concat_tables([rows, cross_partition_cases(
                history, candidates, max_examples).cast(OUTPUT)])
        if transactions.has_transactions(history.summary()):
            rows = pa.concat_tables([rows, transactions.cases(history, max_examples)
                                     .cast(OUTPUT)])
        return Collected.of(rows, max_examples)
    return history.memo(("collected", max_examples), build)
