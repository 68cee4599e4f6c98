"""The version order of each partition, and where each sent value landed.

ANOMALIES.md: a partition's version order maps offset → values, from
acknowledged sends (`ok` with an offset) and from every record any poll read,
whatever the poll's completion type (a broker must never return a record that
is not in its log). Gaps in offsets are legal (transaction markers,
compaction), so skips are judged on the *dense* order: the rank of an offset
among the offsets that hold values. Everything is sized by records, never by
the largest offset.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.history import History
from checkers.result import CheckOptions, CheckResult

PARTITION = ("topic", "partition")


def observations(history: History) -> DataFrame:
    """Every (topic, partition, offset, value) seen, with the op that saw it:
    `source` is `send` (an ok acknowledgement) or `read` (any poll).

    Not kept: it is as large as sends and reads together, and every use but
    the version order joins it with a handful of suspects, for which scanning
    the Parquet tables again is cheaper than holding it (at 100M events it
    would not fit in the executor's memory)."""
    acked = history["sends"].where((F.col("type") == "ok") & F.col("offset").isNotNull()) \
        .select(*PARTITION, "offset", "value", "op_index", "process",
                F.lit("send").alias("source"))
    read = history["reads"].where(F.col("value").isNotNull()) \
        .select(*PARTITION, "offset", "value", "op_index", "process",
                F.lit("read").alias("source"))
    return acked.unionByName(read)


def records(history: History) -> DataFrame:
    """The version order: distinct (topic, partition, offset, value)."""
    return history.derived("version_order", lambda h: observations(h).select(
        *PARTITION, "offset", "value").distinct())


def dense_offsets(history: History) -> DataFrame:
    """(topic, partition, offset, dense): `dense` is 0, 1, 2, … over the
    offsets of the partition that hold at least one value."""
    def build(h: History) -> DataFrame:
        # dense_rank, then distinct: the window's (topic, partition)
        # partitioning already clusters the distinct, so one shuffle, not two.
        by_offset = Window.partitionBy(*PARTITION).orderBy("offset")
        return records(h).select(*PARTITION, "offset",
                                 (F.dense_rank().over(by_offset) - 1).alias("dense")).distinct()
    return history.derived("dense_offsets", build)


def read_values(history: History) -> DataFrame:
    """Per (topic, partition, value) read by anyone: the lowest offset it was
    read at, and when an `ok` poll first read it (its completion time)."""
    def build(h: History) -> DataFrame:
        return h["reads"].where(F.col("value").isNotNull()).groupBy(*PARTITION, "value").agg(
            F.min("offset").alias("read_offset"),
            # Null when no ok poll read it.
            F.min(F.when(F.col("type") == "ok", F.col("time"))).alias("ok_read_time"),
        )
    return history.derived("read_values", build)


def sent(history: History) -> DataFrame:
    """Every record sent, with what became of it.

    Columns of the `sends` table plus `read` (anyone read it), `read_ok` (an
    ok poll read it), `ok_read_time`, `must_have_happened` (ok, or read:
    ANOMALIES.md) and `position`: the acknowledged offset, else the lowest
    offset it was read at in its partition, else null.
    """
    def build(h: History) -> DataFrame:
        joined = h["sends"].join(read_values(h), on=[*PARTITION, "value"], how="left")
        read = F.col("read_offset").isNotNull()
        return joined.select(
            "op_index", "process", "type", "pos", *PARTITION, "value", "offset",
            "invoke_time", "time",
            read.alias("read"),
            F.col("ok_read_time").isNotNull().alias("read_ok"),
            "ok_read_time",
            ((F.col("type") == "ok") | read).alias("must_have_happened"),
            F.coalesce(F.when(F.col("type") == "ok", F.col("offset")),
                       F.col("read_offset")).alias("position"),
        )
    return history.derived("sent", build)


def check(spark: SparkSession, tables: History, options: CheckOptions) -> CheckResult:
    """No anomalies of its own: statistics of the version order."""
    offsets = dense_offsets(tables)
    row = offsets.agg(F.countDistinct(*PARTITION).alias("partitions"),
                      F.count("*").alias("offsets"),
                      F.max("dense").alias("longest")).first()
    return CheckResult(stats={"version_order": {
        "partitions": row["partitions"], "offsets_with_values": row["offsets"],
        "longest_partition": (row["longest"] or -1) + 1}})


def with_dense(history: History, pairs: DataFrame, earlier: str, later: str) -> DataFrame:
    """Add `prev_dense` and `dense`, the dense ranks of the offsets in columns
    `earlier` and `later` of each (topic, partition) pair row — to judge a
    skip: dense - prev_dense > 1 means values lie strictly between."""
    dense = dense_offsets(history)
    return pairs \
        .join(dense.select(*PARTITION, F.col("offset").alias(earlier),
                           F.col("dense").alias("prev_dense")), on=[*PARTITION, earlier]) \
        .join(dense.select(*PARTITION, F.col("offset").alias(later), "dense"),
              on=[*PARTITION, later])


def pair_cases(pairs: DataFrame, earlier: str, later: str, internal: bool = False) -> DataFrame:
    """Cases of an order anomaly between two consecutive records of one
    process and partition: `offsets`, `values`, and `evidence` — both ops, or
    the one op once when it is `internal` (both records in one operation)."""
    evidence = F.array("op_index") if internal else F.array("prev_op_index", "op_index")
    return pairs.select(
        *PARTITION, "process",
        F.array(earlier, later).alias("offsets"),
        F.array("prev_value", "value").alias("values"),
        evidence.alias("evidence"),
    )
