"""Send order: does each producer's log order follow the order it sent in?

Owns `nonmonotonic-send`, `int-nonmonotonic-send` and `int-send-skip`
(ANOMALIES.md). Per producer process and partition, take the sends that may
have happened and whose position is known (`ok` and `info` sends with a
`position`, `checkers.version_order.sent`) in the order the process sent them,
(op_index, pos), and compare each send with the one before it. The one idea:
a single lag over that order. A later send landing before an earlier one is a
reordering; inside one operation, consecutive sends that are not neighbours in
the dense order mean another producer's records landed between them.

Choices where ANOMALIES.md is silent:
- Equal positions (two values at one offset) are `inconsistent-offsets`, a
  divergence matter, not a reordering: only position(v2) < position(v1) is
  reported.
- `fail` sends are never evidence (ANOMALIES.md), even when someone read them
  (that is `aborted-read`): they are left out, so the sends around one are
  compared with each other. An `info` send nobody read has no position, even
  if its completion carries an offset, and is left out too.
- Evidence: [op of v1, op of v2] across operations; the one op index, once,
  for the `int-` types (one operation proves them).
"""

from __future__ import annotations

from functools import partial

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.history import History
from checkers.result import CheckOptions, CheckResult, report
from checkers.version_order import PARTITION, pair_cases, sent, with_dense

# The records compared are at `prev_position` then `position`.
_cases = partial(pair_cases, earlier="prev_position", later="position")


def check(spark: SparkSession, tables: History, options: CheckOptions) -> CheckResult:
    result = CheckResult()
    pairs = _suspect_pairs(tables).persist()
    try:
        across = F.col("op_index") != F.col("prev_op_index")
        backwards = F.col("position") < F.col("prev_position")
        apart = with_dense(tables, pairs.where(~across & ~backwards), "prev_position",
                           "position") \
            .where(F.col("dense") - F.col("prev_dense") > 1)
        report(result, options, {
            "nonmonotonic-send": _cases(pairs.where(across & backwards)),
            "int-nonmonotonic-send": _cases(pairs.where(~across & backwards), internal=True),
            "int-send-skip": _cases(apart, internal=True),
        })
    finally:
        pairs.unpersist()
    return result


def _suspect_pairs(history: History) -> DataFrame:
    """Consecutive sends of one process to one partition (among those with
    known positions) that went backwards, or that jumped over raw offsets
    inside one op. A raw gap of ≤ 1 cannot hide a value between the two, so
    only the rest need the dense order; in a healthy run this set is small."""
    known = sent(history).where(F.col("type").isin("ok", "info")
                                & F.col("position").isNotNull())
    in_send_order = Window.partitionBy("process", *PARTITION).orderBy("op_index", "pos")
    previous = F.lag(F.struct("op_index", "value", "position")).over(in_send_order)
    pairs = known.select("process", *PARTITION, "op_index", "value", "position",
                         previous.alias("prev")) \
        .select("*", F.col("prev.op_index").alias("prev_op_index"),
                F.col("prev.value").alias("prev_value"),
                F.col("prev.position").alias("prev_position")).drop("prev")
    # Subtraction, not `prev + 1`: offsets are non-negative longs, so this
    # cannot overflow even near 2**63.
    jump = (F.col("op_index") == F.col("prev_op_index")) \
        & (F.col("position") - F.col("prev_position") > 1)
    return pairs.where((F.col("position") < F.col("prev_position")) | jump)
