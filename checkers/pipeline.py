"""The exactly-once pipeline (consume-transform-produce, KIP-447): `eos-duplicate`
and `eos-missing` (docs/anomalies.md), as Kafka's own transactions system
test asserts them of its copier: every input the group's committed offsets
cover is in the committed output exactly once.

A pipeline transaction is a `txn` operation with the group's `offsets`
(docs/history.md; the `commits` table holds them). It writes each value v it
read as v + PIPELINE_OUTPUT, so an output names its input. An output is
committed where the history proves it: an `ok` transaction sent it (at the
offset it was acknowledged at), or an `ok` poll read it (read_committed: a
read of an aborted one is `aborted-read` already).

`eos-duplicate`: an input value whose output is committed at two or more
places: two transactions processed it, and both committed. The output
partition then holds the output twice, which is also a `duplicate`. Kafka's
fencing of a zombie member (the group generation sent with the offsets) and
a coordinator that loads every pending offset commit with its transaction
are what prevent it (Redpanda #10669: the wrong coordinator resolved them).

`eos-missing`: an input record (a value an `ok` poll read, not of an
aborted transaction) below the highest offset an `ok` pipeline transaction
committed for its partition, whose output is committed nowhere: the group
moved past it and it was never processed. A transaction that commits an
offset without its outputs, or a consumer position that skips records,
shows this way.

Judged across partitions in Spark (an input and its output are in
different partitions), only when the history holds transactions.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from checkers.collected import Collected, family_result
from checkers.findings import Findings
from checkers.grouping import lists
from checkers.history import History
from checkers.result import CheckResult
from checkers.summary import Summary
from history_analysis.history.schema import PIPELINE_OUTPUT

FAMILY = "pipeline"
TYPES = ("eos-duplicate", "eos-missing")
LISTED = 16     # places and evidence listed per case


def cases_into(out: Findings, history: History) -> None:
    """Every pipeline case of the history, into `out`."""
    txns = history["ops"].where(F.col("f") == "txn").select("op_index")
    offsets = history["commits"].join(txns, "op_index")
    ends = offsets.where(F.col("type") == "ok").groupBy("group", "topic", "partition").agg(
        F.max("offset").alias("end"), F.max_by("op_index", "offset").alias("end_by"))
    out.stat(FAMILY, "transactions", offsets.select("op_index").distinct().count())
    committed = _committed_outputs(history)
    _duplicates(out, history, committed)
    _missing(out, history, committed, ends)


def _committed_outputs(history: History):
    """(input, topic, partition, offset, by): each place an output is proven
    committed at, by the op that proves it."""
    def outputs(table):
        return table.where((F.col("type") == "ok") & (F.col("value") >= PIPELINE_OUTPUT)
                           & F.col("offset").isNotNull()) \
            .select((F.col("value") - PIPELINE_OUTPUT).alias("input"), "topic", "partition",
                    "offset", F.col("op_index").alias("by"))
    return outputs(history["sends"]).unionByName(outputs(history["reads"]))


def _inputs(history: History):
    """(topic, partition, offset, value, read_by): input records as read."""
    aborted = history["sends"].where(F.col("type") == "fail").select("value")
    return history["reads"].where((F.col("type") == "ok") & F.col("value").isNotNull()
                                  & (F.col("value") < PIPELINE_OUTPUT)) \
        .join(aborted, "value", "left_anti") \
        .groupBy("topic", "partition", "offset", "value") \
        .agg(F.min("op_index").alias("read_by"))


def _duplicates(out: Findings, history: History, committed) -> None:
    places = committed.groupBy("input", "topic", "partition", "offset") \
        .agg(F.min("by").alias("by"))
    twice = places.groupBy("input").agg(
        F.count("*").alias("place_count"),
        F.sort_array(F.collect_list(F.struct("topic", "partition", "offset", "by")))
        .alias("places")).where(F.col("place_count") > 1)
    found = twice.join(_inputs(history).withColumnRenamed("value", "input"), "input", "left") \
        .groupBy("input", "place_count", "places").agg(
            F.min(F.struct("read_by", "topic", "partition", "offset")).alias("read")) \
        .orderBy("input").toArrow()
    if not found.num_rows:
        return
    rows = found.to_pylist()
    read = [r["read"] or {} for r in rows]
    out.cases("eos-duplicate",
              topic=pa.array([r.get("topic") for r in read], pa.string()),
              partition=pa.array([r.get("partition") for r in read], pa.int32()),
              value=np.asarray(found["input"], np.int64),
              places=pa.array([[{k: p[k] for k in ("topic", "partition", "offset")}
                                for p in r["places"][:LISTED]] for r in rows]),
              place_count=np.asarray(found["place_count"], np.int64),
              evidence=pa.array([sorted({p["by"] for p in r["places"]}
                                        | ({read[i]["read_by"]} if read[i] else set()))[:LISTED]
                                 for i, r in enumerate(rows)], pa.list_(pa.int64())))


def _missing(out: Findings, history: History, committed, ends) -> None:
    done = committed.select(F.col("input").alias("value")).distinct()
    missing = _inputs(history).join(ends, ["topic", "partition"]) \
        .where(F.col("offset") < F.col("end")) \
        .join(done, "value", "left_anti") \
        .orderBy("topic", "partition", "offset").toArrow()
    if not missing.num_rows:
        return
    out.cases("eos-missing", group=missing["group"], topic=missing["topic"],
              partition=missing["partition"], offset=missing["offset"],
              value=missing["value"], committed_offset=missing["end"],
              evidence=lists(np.full(missing.num_rows, 2), np.column_stack(
                  [np.asarray(missing["read_by"]), np.asarray(missing["end_by"])]).ravel()))


def check(found: Collected, summary: Summary) -> CheckResult:
    return family_result(found, FAMILY, TYPES, totals=("transactions",))
