"""Sends that nobody consumed: `lost-write` and `unseen` (ANOMALIES.md).

One idea: a send that must have happened but that no `ok` poll read is lost
for sure once an `ok` poll read past its position (`lost-write`: the consumer
went over it). An acknowledged send that no `ok` poll read and nobody read
past is `unseen`: proven lost only where the final phase recorded the
partition's end and its reads reached that end, otherwise the verdict for it
is unknown. Everything is built from `version_order.sent`, sized by records.

When the final reads "reached the end" e of a partition (the rule behind a
proven `unseen`): let r be the highest offset any `ok` final-phase poll read
in the partition (-1 if none). The end is reached when

    r >= e - 1, or
    no offset of the version order lies strictly between r and e, and every
    unseen send of the partition has a known position.

The second branch makes the rule robust to gaps: transaction markers and
compaction leave offsets below e that hold no record (offsets 0, 1, 3 with
values, end 5: reading up to 3 reaches the end). It is sound for unseen sends
of known position p: p cannot lie in (r, e) (acknowledged offsets are in the
version order), and p <= r or p >= e means the log no longer holds the value
there. An unseen send whose position is unknown (an `ok` send without an
offset that nobody read) could hide in such a gap, so it needs the strict
branch. An `info` send nobody read could also hide there; ANOMALIES.md makes
it "never evidence of anything", so it does not block the rule.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.history import History
from checkers.result import CheckOptions, CheckResult, report
from checkers.version_order import PARTITION, dense_offsets, sent

_SERIES_BUCKETS = 100  # at most this many points in the unseen-count series

_UNKNOWN_REASON = (
    "acknowledged sends that no ok poll read and that nobody read past; they are "
    "proven lost only where the final phase recorded the partition's end "
    "(end-offsets) and its reads reached it, and here the end was not recorded "
    "(end_offset null) or the final reads stopped short of it (final_read_to)")


def _unread(history: History) -> DataFrame:
    """Sends that must have happened (ANOMALIES.md) and that no `ok` poll
    read, with `later_read`: the lowest history index of an `ok` poll that
    read a value at an offset after the send's position in its partition
    (null if none, or if the position is unknown)."""
    def build(h: History) -> DataFrame:
        missed = sent(h).where(F.col("must_have_happened") & ~F.col("read_ok")) \
            .select("op_index", "type", *PARTITION, "value", "position")
        placed = missed.where(F.col("position").isNotNull())
        # One row per offset an ok poll read a value at (ANOMALIES.md: "read a
        # value"; undecodable records are garbage-read's), with the first such
        # poll. Partial aggregation keeps the shuffle to distinct offsets.
        read_at = h["reads"].where((F.col("type") == "ok") & F.col("value").isNotNull()) \
            .groupBy(*PARTITION, "offset").agg(F.min("op_index").alias("first_read"))
        # Ordered by descending offset, the rows strictly before a send's
        # position are exactly the offsets after it: a running min from the
        # partition's start (Spark's unbounded-following frames are O(n^2)).
        rows = placed.select(*PARTITION, F.col("position").alias("offset"),
                             F.struct("op_index", "type", "value", "position")
                             .alias("send"), F.lit(None).cast("long").alias("first_read")) \
            .unionByName(read_at.select(*PARTITION, "offset",
                                        F.lit(None).alias("send"), "first_read"))
        after = Window.partitionBy(*PARTITION).orderBy(-F.col("offset")) \
            .rangeBetween(Window.unboundedPreceding, -1)
        judged = rows.withColumn("later_read", F.min("first_read").over(after)) \
            .where(F.col("send").isNotNull()) \
            .select("send.op_index", "send.type", *PARTITION, "send.value",
                    "send.position", "later_read")
        unplaced = missed.where(F.col("position").isNull()) \
            .withColumn("later_read", F.lit(None).cast("long"))
        return judged.unionByName(unplaced)
    return history.derived("lost.unread", build)


def _lost_writes(history: History) -> DataFrame:
    return _unread(history).where(F.col("later_read").isNotNull()).select(
        *PARTITION, "value", F.col("position").alias("offset"),
        F.col("type").alias("send_type"),
        F.array("op_index", "later_read").alias("evidence"))


def _partition_ends(history: History, unseen: DataFrame) -> DataFrame:
    """Per partition with unseen sends: their count, the recorded end
    (the last end-offsets op's), how far the final reads went, and whether
    that proves the unseen sends lost (the rule in the module docstring)."""
    ends = history["end_offsets"].groupBy(*PARTITION).agg(
        F.max(F.struct("op_index", "offset")).alias("end")) \
        .select(*PARTITION, F.col("end.offset").alias("end_offset"),
                F.col("end.op_index").alias("end_index"))
    # Any record an ok final poll returned, decodable or not, shows how far
    # its consumer got.
    final_reads = history["reads"].where(
        (F.col("type") == "ok") & (F.col("phase") == "final")) \
        .groupBy(*PARTITION).agg(F.max("offset").alias("final_read_to"))
    known_below_end = dense_offsets(history).join(F.broadcast(ends), list(PARTITION)) \
        .where(F.col("offset") < F.col("end_offset")) \
        .groupBy(*PARTITION).agg(F.max("offset").alias("last_known_below_end"))
    counts = unseen.groupBy(*PARTITION).agg(
        F.count("*").alias("count"),
        F.count(F.when(F.col("position").isNull(), 1)).alias("unplaced"))
    summary = counts.join(ends, list(PARTITION), "left") \
        .join(final_reads, list(PARTITION), "left") \
        .join(known_below_end, list(PARTITION), "left")
    read_to = F.coalesce("final_read_to", F.lit(-1))
    strict = read_to >= F.col("end_offset") - 1
    gaps_only = (F.coalesce("last_known_below_end", F.lit(-1)) <= read_to) \
        & (F.col("unplaced") == 0)
    recorded = F.col("end_offset").isNotNull()
    return summary.withColumn("proven", recorded & (strict | gaps_only))


def _unseen_series(history: History) -> list[list[int]]:
    """[time_ns, acknowledged sends not yet read by an ok poll], one point per
    time bucket: +1 when a send is acknowledged, -1 when an ok poll first
    reads it (never before its acknowledgement)."""
    acked = sent(history).where(F.col("type") == "ok")
    deltas = acked.select(
        F.explode(F.array(
            F.struct(F.col("time").alias("t"), F.lit(1).alias("d")),
            F.struct(F.when(F.col("ok_read_time").isNotNull(),
                            F.greatest("time", "ok_read_time")).alias("t"),
                     F.lit(-1).alias("d")),
        )).alias("e")).where(F.col("e.t").isNotNull()).select("e.*").persist()
    try:
        bounds = deltas.agg(F.min("t").alias("lo"), F.max("t").alias("hi")).first()
        if bounds["lo"] is None:
            return []
        lo, hi = bounds["lo"], bounds["hi"]
        width = (hi - lo) // _SERIES_BUCKETS + 1
        bucket = F.expr(f"(t - {lo}L) div {width}L").alias("b")
        buckets = dict(deltas.groupBy(bucket).agg(F.sum("d")).collect())
    finally:
        deltas.unpersist()
    series, count = [], 0
    for b in range(max(buckets) + 1):
        count += buckets.get(b, 0)
        series.append([min(lo + (b + 1) * width - 1, hi), count])
    return series


def check(spark: SparkSession, tables: History, options: CheckOptions) -> CheckResult:
    result = CheckResult()
    unseen = _unread(tables).where((F.col("type") == "ok") & F.col("later_read").isNull())
    summary = _partition_ends(tables, unseen).persist()
    try:
        proven = unseen.join(F.broadcast(summary.where("proven")), list(PARTITION)).select(
            *PARTITION, "value", F.col("position").alias("offset"), "end_offset",
            F.array("op_index", "end_index").alias("evidence"))
        report(result, options, {"lost-write": _lost_writes(tables), "unseen": proven})

        undecided = summary.where(~F.col("proven"))
        total = undecided.agg(F.sum("count")).first()[0]
        if total:
            partitions = undecided.orderBy(*PARTITION).limit(options.max_examples) \
                .select(*PARTITION, "count", "end_offset", "final_read_to").collect()
            examples = unseen.join(F.broadcast(undecided.select(*PARTITION)), list(PARTITION)) \
                .select(*PARTITION, "value", F.col("position").alias("offset"),
                        F.array("op_index").alias("evidence")) \
                .limit(options.max_examples).collect()
            result.unknown["unseen"] = {
                "count": total, "reason": _UNKNOWN_REASON,
                "partitions": [row.asDict() for row in partitions],
                "examples": [row.asDict(recursive=True) for row in examples]}
    finally:
        summary.unpersist()

    result.stats["unseen"] = {"series": _unseen_series(tables)}
    return result
