"""Statistics that are not anomalies: operations by type, and realtime lag.

Realtime lag (ANOMALIES.md): for each poll and partition it read, how far
behind the latest acknowledged offset it started — the highest offset of an
`ok` send completed before the poll was invoked, minus the first offset the
poll read there (0 when it was not behind). Reported as percentiles.
"""

from __future__ import annotations

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from checkers.history import History
from checkers.result import CheckOptions, CheckResult

PERCENTILES = (0.5, 0.9, 0.99)


def check(spark: SparkSession, tables: History, options: CheckOptions) -> CheckResult:
    ops = tables["ops"].groupBy("f", "type").count().collect()
    by_type: dict[str, dict[str, int]] = {}
    for row in ops:
        by_type.setdefault(row["f"], {})[row["type"]] = row["count"]
    return CheckResult(stats={"ops": by_type, "realtime_lag": _realtime_lag(tables)})


def _realtime_lag(tables: History) -> dict:
    acked = tables["sends"].where((F.col("type") == "ok") & F.col("offset").isNotNull()) \
        .select("topic", "partition", F.col("time").alias("at"), F.col("offset").alias("acked"),
                F.lit(None).cast("long").alias("first"), F.lit(0).alias("order"))
    polls = tables["reads"].where(F.col("phase") == "main") \
        .groupBy("op_index", "topic", "partition", "invoke_time").agg(F.min_by("offset", "pos")
                                                                      .alias("first")) \
        .select("topic", "partition", F.col("invoke_time").alias("at"),
                F.lit(None).cast("long").alias("acked"), "first", F.lit(1).alias("order"))
    # Acknowledgements at the same instant as a poll's invocation come first.
    so_far = Window.partitionBy("topic", "partition").orderBy("at", "order") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    lags = acked.unionByName(polls) \
        .withColumn("latest", F.max("acked").over(so_far)) \
        .where(F.col("first").isNotNull()) \
        .select(F.greatest(F.coalesce(F.col("latest") - F.col("first"), F.lit(0)), F.lit(0))
                .alias("lag"))
    row = lags.agg(F.count("*").alias("polls"),
                   F.percentile_approx("lag", list(PERCENTILES)).alias("p"),
                   F.max("lag").alias("max")).first()
    if not row["polls"]:
        return {"polls": 0}
    return {"polls": row["polls"], "unit": "offsets",
            **{f"p{int(q * 100)}": v for q, v in zip(PERCENTILES, row["p"])},
            "max": row["max"]}
