"""Poll order: does each consumer read a partition forwards, without gaps?

Owns `nonmonotonic-poll`, `poll-skip`, `int-nonmonotonic-poll` and
`int-poll-skip` (ANOMALIES.md). Per consumer process and partition, the
records it read (polls of any completion type: a broker must never return
what is not in its log) in the order it got them, (op_index, pos). The one
idea: one window over that order, with the partition's resets merged in,
gives each read the read before it and the latest reset; consecutive reads
with no reset between them must move exactly one step forwards in the dense
order. Two reads of one poll are the `int-` types; the last read of one poll
and the first of the next poll that read the partition are the others.

Resets: a row of the assignments table for the same process, with op_index
in (earlier poll, later poll], that concerns the partition (its own row, or
a subscribe row for its topic, which has no partition). The interval includes
the later poll itself: rebalance callbacks a poll reports fire before it
returns records. A reset breaks the chain; no check across it.

Choices where ANOMALIES.md is silent:
- Records that did not decode (value null) are `garbage-read`'s concern and
  hold no place in the version order: they are left out here.
- Going backwards includes re-reading the same offset (b ≤ a).
- Evidence: [earlier poll, later poll]; the one op index, once, for the
  `int-` types (one operation proves them).
"""

from __future__ import annotations

from functools import partial

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.history import History
from checkers.result import CheckOptions, CheckResult, report
from checkers.version_order import PARTITION, dense_offsets, pair_cases, with_dense

# The records compared are at `prev_offset` then `offset`.
_cases = partial(pair_cases, earlier="prev_offset", later="offset")

CHAIN = (*PARTITION, "process")


def check(spark: SparkSession, tables: History, options: CheckOptions) -> CheckResult:
    result = CheckResult()
    pairs = _suspect_pairs(tables).persist()
    try:
        across = F.col("op_index") != F.col("prev_op_index")
        backwards = F.col("offset") <= F.col("prev_offset")
        skipped = with_dense(tables, pairs.where(~backwards), "prev_offset", "offset") \
            .where(F.col("dense") - F.col("prev_dense") > 1)
        report(result, options, {
            "nonmonotonic-poll": _cases(pairs.where(across & backwards)),
            "int-nonmonotonic-poll": _cases(pairs.where(~across & backwards), internal=True),
            "poll-skip": _cases(skipped.where(across)),
            "int-poll-skip": _cases(skipped.where(~across), internal=True),
        })
    finally:
        pairs.unpersist()
    return result


def _resets(history: History) -> DataFrame:
    """(topic, partition, process, op_index) of every assignment event that
    moves a consumer's position in the partition. Subscribe rows name a topic
    only: they apply to each of its partitions in the version order (a
    partition with no values has no reads to check)."""
    events = history["assignments"]
    own = events.where(F.col("partition").isNotNull()).select(*CHAIN, "op_index")
    partitions = dense_offsets(history).select(*PARTITION).distinct()
    whole_topic = events.where(F.col("partition").isNull()) \
        .select("topic", "process", "op_index") \
        .join(partitions, on="topic").select(*CHAIN, "op_index")
    return own.unionByName(whole_topic)


def _suspect_pairs(history: History) -> DataFrame:
    """Consecutive reads of one partition by one process with no reset in
    between, keeping those that went backwards or jumped over raw offsets. A
    raw gap of ≤ 1 cannot hide a value, so only the rest need the dense order;
    in a healthy run this set is small."""
    reads = history["reads"].where(F.col("value").isNotNull() & F.col("offset").isNotNull()) \
        .select(*CHAIN, "op_index", "pos", "offset", "value", F.lit(True).alias("is_read"))
    # pos -1 sorts a reset before the reads of the poll that reported it.
    resets = _resets(history).select(
        *CHAIN, "op_index", F.lit(-1).alias("pos"), F.lit(None).cast("long").alias("offset"),
        F.lit(None).cast("long").alias("value"), F.lit(False).alias("is_read"))
    in_read_order = Window.partitionBy(*CHAIN).orderBy("op_index", "pos")
    before = in_read_order.rowsBetween(Window.unboundedPreceding, -1)
    so_far = in_read_order.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    previous = F.last(F.when(F.col("is_read"), F.struct("op_index", "offset", "value")),
                      ignorenulls=True).over(before)
    last_reset = F.last(F.when(~F.col("is_read"), F.col("op_index")), ignorenulls=True) \
        .over(so_far)
    stream = reads.unionByName(resets) \
        .select("*", previous.alias("prev"), last_reset.alias("last_reset")) \
        .where(F.col("is_read") & F.col("prev").isNotNull())
    # A reset at the earlier poll's own index fired before that poll's reads,
    # so only one after it lies between the two.
    chained = F.col("last_reset").isNull() | (F.col("last_reset") <= F.col("prev.op_index"))
    pairs = stream.where(chained).select(
        *CHAIN, "op_index", "offset", "value",
        F.col("prev.op_index").alias("prev_op_index"),
        F.col("prev.offset").alias("prev_offset"),
        F.col("prev.value").alias("prev_value"))
    # Subtraction, not `prev + 1`: no overflow for offsets near 2**63.
    jump = F.col("offset") - F.col("prev_offset") > 1
    return pairs.where((F.col("offset") <= F.col("prev_offset")) | jump)
