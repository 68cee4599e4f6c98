"""What a transaction promises beyond each of its records: `precommitted-read`,
`torn-transaction` and `stuck-lso` (docs/anomalies.md). A transaction is one `txn`
operation (docs/history.md): its sends, and if the client asked to commit,
the history time at which it asked (`committing`).

`precommitted-read`: an `ok` poll returned a value of a transaction and
completed before that transaction asked to commit — or, where the history
does not say when it asked, before the transaction was invoked. Under
read_committed nothing of a transaction is visible before its EndTxn(commit)
reaches the coordinator (KIP-98), and the client sends that only once asked,
so a correct broker never serves such a read; an open transaction's records
handed out by an inclusive last stable offset (Redpanda's aborted reads,
`lso-inclusive`) are read this way. Only `ok` and `info` transactions are
judged: the reads of a failed one are `aborted-read` already.

`torn-transaction`: an `ok` (committed) transaction of which some value was
read by an `ok` poll while another is lost as `lost-write` has it (no `ok`
poll read it, though one read its partition past its acknowledged offset;
checkers/lost.py): the commit reached some of its partitions and not the
others. A case names both halves: the values read, the values lost with
their places, and as evidence the transaction, a read of a seen value and,
per lost value, the poll that read furthest past it.

`stuck-lso`: a partition's last stable offset stayed below its high
watermark to the end of the final phase's wait (workloads/final.py): the
last end-offsets asked under read_committed in the final phase answered
less than one asked under read_uncommitted before it. The producers had
stopped before that phase and the wait outlasts the transaction timeout and
an abort sweep, so every transaction left open must have been aborted by
then; a transaction that never ends (a late produce the coordinator does not
know of, KIP-890's motivation) holds the offset, and read_committed
consumers never see anything after it. Evidence: the two end-offsets.

The first two are judged across partitions, in Spark over the tables (the sends of
transactions joined with the reads of their values), only when the history
holds transactions.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from checkers import pipeline
from checkers.collected import Collected, family_result
from checkers.findings import Findings
from checkers.grouping import lists, order, starts
from checkers.history import History
from checkers.result import CheckResult
from checkers.summary import Summary

FAMILY = "transactions"
TYPES = ("precommitted-read", "torn-transaction", "stuck-lso")
LISTED = 16     # values and evidence listed per torn transaction (the counts are whole)


def has_transactions(summary: Summary) -> bool:
    return any(f == "txn" for f, _ in summary.operations)


def cases(history: History, max_examples: int) -> pa.Table:
    """Every transactional case of the history, as findings rows."""
    out = Findings(max_examples=max_examples)
    txns = history["ops"].where(F.col("f") == "txn").select(
        F.col("op_index").alias("txn"), F.col("type").alias("txn_type"),
        F.col("process").alias("txn_process"),
        F.coalesce(F.col("committing"), F.col("invoke_time")).alias("bound"))
    sends = history["sends"].select("topic", "partition", "offset", "value",
                                    F.col("op_index").alias("txn"))
    txn_sends = sends.join(txns, "txn")
    reads = history["reads"].where((F.col("type") == "ok") & F.col("value").isNotNull())
    _precommitted(out, txn_sends, reads)
    _torn(out, txn_sends.where(F.col("txn_type") == "ok"), reads)
    _stuck(out, history["end_offsets"])
    out.stat(FAMILY, "transactions", txns.count())
    pipeline.cases_into(out, history)
    return out.table()


def _precommitted(out: Findings, txn_sends, reads) -> None:
    # The read must be of the transaction's own record: at the offset its
    # send was acknowledged at, where known. A value written twice (a
    # pipeline that processed an input again: eos-duplicate) is otherwise
    # read from the first transaction "before" the second asked to commit.
    sent = txn_sends.where(F.col("txn_type") != "fail").select(
        "value", "txn", "bound", F.col("topic").alias("sent_topic"),
        F.col("partition").alias("sent_partition"), F.col("offset").alias("sent_offset"))
    early = reads.select("topic", "partition", "offset", "value", F.col("op_index").alias("read"),
                         F.col("time").alias("read_time")) \
        .join(sent, "value") \
        .where((F.col("read_time") < F.col("bound")) & (F.col("topic") == F.col("sent_topic"))
               & (F.col("partition") == F.col("sent_partition"))
               & (F.col("sent_offset").isNull() | (F.col("sent_offset") == F.col("offset")))) \
        .toArrow()
    if not early.num_rows:
        return
    col = {name: np.asarray(early[name].fill_null(-1), np.int64)
           for name in ("partition", "offset", "value", "read", "txn")}
    by = order(col["txn"], col["read"], col["value"])
    out.cases("precommitted-read",
              topic=early["topic"].take(pa.array(by)), partition=col["partition"][by],
              offset=col["offset"][by], value=col["value"][by],
              evidence=lists(np.full(len(by), 2), np.column_stack(
                  [col["txn"][by], col["read"][by]]).ravel()))


def _torn(out: Findings, committed, reads) -> None:
    """Committed sends, each seen (read) or lost (read past, never read);
    the transactions with both."""
    first_read = reads.groupBy("value").agg(F.min("op_index").alias("seen_by"))
    furthest = reads.groupBy("topic", "partition").agg(
        F.max_by("op_index", "offset").alias("past_by"), F.max("offset").alias("read_to"))
    rows = committed.join(first_read, "value", "left").join(furthest, ["topic", "partition"],
                                                            "left") \
        .withColumn("seen", F.col("seen_by").isNotNull()) \
        .withColumn("lost", ~F.col("seen") & F.col("offset").isNotNull()
                    & (F.col("offset") < F.col("read_to")))
    torn = rows.groupBy("txn").agg(F.max(F.col("seen").cast("int")).alias("any_seen"),
                                   F.max(F.col("lost").cast("int")).alias("any_lost")) \
        .where((F.col("any_seen") == 1) & (F.col("any_lost") == 1)).select("txn")
    halves = rows.join(torn, "txn").where(F.col("seen") | F.col("lost")).toArrow()
    if not halves.num_rows:
        return
    txn, value, seen = (np.asarray(halves[c], np.int64) for c in ("txn", "value", "seen"))
    by = order(txn, 1 - seen, value)
    halves = halves.take(pa.array(by))
    txn, value, seen = txn[by], value[by], seen[by].astype(bool)
    heads = np.flatnonzero(starts(txn))
    ends = np.append(heads[1:], len(txn))
    seen_values, lost_values, places, evidence = [], [], [], []
    row = halves.to_pylist()
    for head, end in zip(heads, ends):
        group = row[head:end]
        seen_rows = [r for r in group if r["seen"]]
        lost_rows = [r for r in group if not r["seen"]]
        seen_values.append([r["value"] for r in seen_rows][:LISTED])
        lost_values.append([r["value"] for r in lost_rows][:LISTED])
        places.append([{"topic": r["topic"], "partition": r["partition"], "offset": r["offset"]}
                       for r in lost_rows][:LISTED])
        evidence.append(sorted({group[0]["txn"], seen_rows[0]["seen_by"],
                                *(r["past_by"] for r in lost_rows)})[:LISTED])
    long_lists = pa.list_(pa.int64())
    out.cases("torn-transaction", topic=pa.nulls(len(heads), pa.string()),
              partition=pa.nulls(len(heads), pa.int32()),
              process=np.asarray(halves["txn_process"], np.int64)[heads],
              values=pa.array(seen_values, long_lists),
              lost_values=pa.array(lost_values, long_lists),
              places=pa.array(places), evidence=pa.array(evidence, long_lists))


def _stuck(out: Findings, ends) -> None:
    """The last final-phase read_committed end of each partition against
    the highest read_uncommitted end asked before it."""
    ends = ends.where((F.col("phase") == "final") & F.col("isolation").isNotNull()) \
        .select("topic", "partition", "offset", "op_index", "isolation")
    committed = ends.where(F.col("isolation") == "read_committed") \
        .groupBy("topic", "partition").agg(F.max(F.struct("op_index", "offset")).alias("last")) \
        .select("topic", "partition", F.col("last.op_index").alias("lso_op"),
                F.col("last.offset").alias("lso"))
    high = ends.where(F.col("isolation") == "read_uncommitted").withColumnRenamed(
        "op_index", "hw_op").join(committed, ["topic", "partition"]) \
        .where(F.col("hw_op") < F.col("lso_op")) \
        .groupBy("topic", "partition", "lso", "lso_op").agg(
            F.max(F.struct("offset", "hw_op")).alias("top")) \
        .select("topic", "partition", "lso", "lso_op", F.col("top.offset").alias("hw"),
                F.col("top.hw_op").alias("hw_op"))     # the last asking of the highest
    stuck = high.where(F.col("lso") < F.col("hw")).orderBy("topic", "partition").toArrow()
    if not stuck.num_rows:
        return
    out.cases("stuck-lso", topic=stuck["topic"], partition=stuck["partition"],
              offset=stuck["lso"], end_offset=stuck["hw"],
              evidence=lists(np.full(stuck.num_rows, 2), np.column_stack(
                  [np.asarray(stuck["hw_op"]), np.asarray(stuck["lso_op"])]).ravel()))


def check(found: Collected, summary: Summary) -> CheckResult:
    return family_result(found, FAMILY, TYPES, totals=("transactions",))
