"""The anomalies checker_scale.py injects: K cases of every type of
docs/anomalies.md, one small scenario per case, each on its own partition (jt0
partitions 64 and up: case c of type t is partition 64 + tK + c), with its
own processes (1000 + 8·case + role) and its own group (kchaos-x<case>), so
no case can produce another type. Their operations come right after the base
run's setup, and the final-phase ones at the very end.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from benchmarks import synthetic_history as sh
from checkers.result import ANOMALY_TYPES
from history_analysis.history.schema import PIPELINE_OUTPUT

# --- the injections: one small scenario per case, on partition X ----------------

P, Q, R1, R2, A, B, C, FINAL = range(8)   # roles: producers, readers, members, final reader
GARBAGE = 15        # value slot of a record nobody sent (even cases) / that does not decode (odd)
OUT = 32            # slot OUT + s: a pipeline's output of slot s (its value + PIPELINE_OUTPUT)
STALE = -1          # committed returns 1 (even cases) / none (odd) after a commit of 2
PROCESS_BASE, VALUE_BASE, GARBAGE_BASE = 1000, 1 << 44, 1 << 45


def send(role, *records, type="ok", error=None):
    """records: (value slot, acknowledged offset or None)."""
    return dict(role=role, f="send", sends=list(records), type=type, error=error)


def assign(role, seek, phase="main"):
    return dict(role=role, f="assign", seek=seek, phase=phase)


def poll(role, *reads, rebalance=None, phase="main"):
    """reads: (value slot, offset)."""
    return dict(role=role, f="poll", reads=list(reads), rebalance=rebalance, phase=phase)


def subscribe(role):
    return dict(role=role, f="subscribe")


def commit(role, offset):
    return dict(role=role, f="commit", offset=offset)


def committed(role, offset):
    return dict(role=role, f="committed", offset=offset)


def end_offsets(role, end, isolation=None):
    return dict(role=role, f="end-offsets", offset=end, phase="final", isolation=isolation)


def txn(role, *records, type="ok", offset=None):
    """One transaction: records (value slot, acknowledged offset or None);
    no `committing` time, so a read is early only before its invocation.
    `offset`: a pipeline's, committing the case's group's offset with it."""
    return dict(role=role, f="txn", sends=list(records), type=type, offset=offset)


# Per type, the operations of one case, run one at a time in this order on
# the case's partition: (value slot, offset) pairs name its values v0, v1, ….
# Every acknowledged value is read by an ok poll unless the type is about
# not reading it, and no reader's chain of reads breaks unless the type is
# about that: so each case is its type and nothing else.
INJECTIONS = {
    # v1 never read, v2 after it read (by a reader assigned without seeking).
    "lost-write": [send(P, (0, 0), (1, 1), (2, 2)), assign(R1, True), poll(R1, (0, 0)),
                   assign(R2, False), poll(R2, (2, 2))],
    # The log lost offset 1: the end recorded is 1 and the final read reached it.
    "unseen": [send(P, (0, 0), (1, 1)), end_offsets(FINAL, 1),
               assign(FINAL, True, phase="final"), poll(FINAL, (0, 0), phase="final")],
    # R1 read offset 1; later the end is answered as 1 (stale); the final reads
    # read both anyway.
    "stale-end": [send(P, (0, 0), (1, 1)), assign(R1, True), poll(R1, (0, 0), (1, 1)),
                  end_offsets(FINAL, 1), assign(FINAL, True, phase="final"),
                  poll(FINAL, (0, 0), (1, 1), phase="final")],
    # v0 at offsets 0 and 2, each read by a different reader.
    "duplicate": [send(P, (0, 0), (1, 1)), assign(R1, True), poll(R1, (0, 0), (1, 1)),
                  assign(R2, False), poll(R2, (0, 2))],
    # Offset 1 holds v1 (acknowledged, read) and v2 (an info send, read).
    "inconsistent-offsets": [send(P, (0, 0), (1, 1)), send(Q, (2, None), type="info",
                                                          error="REQUEST_TIMED_OUT"),
                             assign(R1, True), poll(R1, (0, 0), (1, 1)),
                             assign(R2, False), poll(R2, (2, 1))],
    # Even cases read a value nobody sent, odd ones a record that does not decode.
    "garbage-read": [send(P, (0, 0)), assign(R1, True), poll(R1, (0, 0), (GARBAGE, 1))],
    # v1's only send failed, yet it is read.
    "aborted-read": [send(P, (0, 0)), send(Q, (1, None), type="fail",
                                           error="NOT_ENOUGH_REPLICAS"),
                     assign(R1, True), poll(R1, (0, 0), (1, 1))],
    # P's second send (v1) lands before its first (v0).
    "nonmonotonic-send": [send(P, (0, 1)), send(P, (1, 0)), assign(R1, True),
                          poll(R1, (1, 0), (0, 1))],
    # The same inside one send (backwards is not a skip).
    "int-nonmonotonic-send": [send(P, (0, 1), (1, 0)), assign(R1, True),
                              poll(R1, (1, 0), (0, 1))],
    # Q's v1 lands between P's v0 and v2 of one send.
    "int-send-skip": [send(P, (0, 0), (2, 2)), send(Q, (1, 1)), assign(R1, True),
                      poll(R1, (0, 0), (1, 1), (2, 2))],
    # R1's second poll starts by re-reading v1.
    "nonmonotonic-poll": [send(P, (0, 0), (1, 1), (2, 2)), assign(R1, True),
                          poll(R1, (0, 0), (1, 1)), poll(R1, (1, 1), (2, 2))],
    # R1 jumps from v0 to v2; R2 reads v1, so it is not lost.
    "poll-skip": [send(P, (0, 0), (1, 1), (2, 2)), assign(R1, True), poll(R1, (0, 0)),
                  poll(R1, (2, 2)), assign(R2, True), poll(R2, (0, 0), (1, 1), (2, 2))],
    # One poll returns v1 then v0.
    "int-nonmonotonic-poll": [send(P, (0, 0), (1, 1)), assign(R1, True),
                              poll(R1, (1, 1), (0, 0))],
    # One poll returns v0 then v2 (R2 reads v1: not lost).
    "int-poll-skip": [send(P, (0, 0), (1, 1), (2, 2)), assign(R1, True),
                      poll(R1, (0, 0), (2, 2)), assign(R2, True),
                      poll(R2, (0, 0), (1, 1), (2, 2))],
    # After a commit of 2, committed returns 1 (even cases) or none (odd).
    "stale-committed-offset": [send(P, (0, 0), (1, 1)), subscribe(C),
                               poll(C, (0, 0), (1, 1), rebalance="assigned"),
                               commit(C, 2), committed(C, STALE)],
    # B is given the partition A owned; A, not told, commits 1: ok; so
    # does B (the broker took B's assignment).
    "zombie-commit": [send(P, (0, 0)), subscribe(A), poll(A, (0, 0), rebalance="assigned"),
                      subscribe(B), poll(B, (0, 0), rebalance="assigned"), commit(A, 1),
                      commit(B, 1)],
    # The member commits 2 having read only v0 (R1 reads v1: not lost).
    "group-lost": [send(P, (0, 0), (1, 1)), assign(R1, True), poll(R1, (0, 0), (1, 1)),
                   subscribe(C), poll(C, (0, 0), rebalance="assigned"), commit(C, 2)],
    # A commits 1 and is revoked; B's first read is at 2 (R1 reads v1: not lost).
    "resume-skip": [send(P, (0, 0), (1, 1), (2, 2)), assign(R1, True),
                    poll(R1, (0, 0), (1, 1), (2, 2)), subscribe(A),
                    poll(A, (0, 0), rebalance="assigned"), commit(A, 1),
                    poll(A, rebalance="revoked"), subscribe(B),
                    poll(B, (2, 2), rebalance="assigned")],
    # A commits 2 and is revoked; B's first read is at 1.
    "resume-rewind": [send(P, (0, 0), (1, 1)), subscribe(A),
                      poll(A, (0, 0), (1, 1), rebalance="assigned"), commit(A, 2),
                      poll(A, rebalance="revoked"), subscribe(B),
                      poll(B, (1, 1), rebalance="assigned")],
    # R1 reads v0 before the transaction that writes it is invoked.
    "precommitted-read": [assign(R1, True), poll(R1, (0, 0)), txn(P, (0, 0))],
    # A committed transaction of v0 and v1: v0 is read, v1 read past (R2
    # reads Q's v2 at offset 2) and never read. v1 is a lost-write too.
    "torn-transaction": [txn(P, (0, 0), (1, 1)), send(Q, (2, 2)), assign(R1, True),
                         poll(R1, (0, 0)), assign(R2, False), poll(R2, (2, 2))],
    # After the faults the high watermark is 2 (an open transaction's
    # record at offset 1) and the last stable offset stays 1.
    "stuck-lso": [txn(P, (0, 0)), assign(R1, True), poll(R1, (0, 0)),
                  end_offsets(FINAL, 2, "read_uncommitted"),
                  end_offsets(FINAL, 1, "read_committed"),
                  assign(FINAL, True, phase="final"), poll(FINAL, (0, 0), phase="final")],
    # A pipeline member reads v0 and writes it out twice, each time
    # committing offset 1 (its output is also a duplicate).
    "eos-duplicate": [send(P, (0, 0)), subscribe(A), poll(A, (0, 0), rebalance="assigned"),
                      txn(A, (OUT, 1), offset=1), txn(A, (OUT, 2), offset=1),
                      assign(R1, True), poll(R1, (0, 0), (OUT, 1), (OUT, 2))],
    # A member reads v0 and v1, writes out v0 only and commits offset 2.
    "eos-missing": [send(P, (0, 0), (1, 1)), subscribe(A),
                    poll(A, (0, 0), (1, 1), rebalance="assigned"), txn(A, (OUT, 2), offset=2),
                    assign(R1, True), poll(R1, (0, 0), (1, 1), (OUT, 2))],
}
assert tuple(INJECTIONS) == ANOMALY_TYPES, "inject every type of checkers/result.py"
# The types a case of another type shows as well, on the same partition.
ALSO = {"torn-transaction": ("lost-write",), "eos-duplicate": ("duplicate",)}

STEP = ("t int, section int, pos int, n int, prefix int, role int, f string, type string, "
        "phase string, error string, sends array<struct<slot:int,offset:long>>, "
        "reads array<struct<slot:int,offset:long>>, seek boolean, rebalance string, "
        "offset long, isolation string")


def injection_steps() -> tuple[list[tuple], int, int]:
    """Template rows (one per step of one case), and the steps per case in
    the main and final sections over all types."""
    rows, prefix = [], [0, 0]
    for t, steps in enumerate(INJECTIONS.values()):
        by_section = [[s for s in steps if s.get("phase", "main") == phase]
                      for phase in ("main", "final")]
        for section, part in enumerate(by_section):
            for pos, s in enumerate(part):
                rows.append((t, section, pos, len(part), prefix[section], s["role"], s["f"],
                             s.get("type", "ok"), s.get("phase", "main"), s.get("error"),
                             [tuple(x) for x in s.get("sends", [])],
                             [tuple(x) for x in s.get("reads", [])], s.get("seek"),
                             s.get("rebalance"), s.get("offset"), s.get("isolation")))
            prefix[section] += len(part)
    return rows, prefix[0], prefix[1]


def injected_ops(spark, cases: int, layout: sh.Layout) -> DataFrame:
    """Rows (section, ops) with one operation each: K cases of every type."""
    rows, _, _ = injection_steps()
    k = F.col("k")
    case = F.col("t") * cases + k
    x = layout.partitions + case
    group = F.concat(F.lit("kchaos-x"), case.cast("string"))
    odd = F.pmod(k, F.lit(2)) == 1

    def value(slot: Column) -> Column:
        own = slot % OUT
        plain = F.when(own != GARBAGE, layout.value(VALUE_BASE + case * 16 + own)) \
            .when(~odd, layout.value(GARBAGE_BASE + case))
        return F.when(slot >= OUT, plain + F.lit(PIPELINE_OUTPUT)).otherwise(plain)

    here = F.array(sh.topic_partition(x))
    offset = F.when(F.col("offset") == STALE, F.when(~odd, F.lit(1))).otherwise(F.col("offset"))

    def sends(acked: bool) -> Column:
        return F.transform("sends", lambda s: F.struct(
            F.lit(sh.TOPIC).alias("topic"), x.cast("int").alias("partition"),
            value(s["slot"]).alias("value"),
            (s["offset"] if acked else F.lit(None).cast("long")).alias("offset")))
    reads = F.transform("reads", lambda r: F.struct(
        F.lit(sh.TOPIC).alias("topic"), x.cast("int").alias("partition"), r["offset"],
        value(r["slot"]).alias("value"),
        F.when((r["slot"] == GARBAGE) & odd, F.lit("/w==")).alias("raw"),
        F.lit(None).cast("int").alias("epoch")))
    rebalances = F.when(F.col("rebalance").isNotNull(), F.array(F.struct(
        F.col("rebalance").alias("kind"), group.alias("group"), here.alias("partitions")))) \
        .otherwise(sh.empty("rebalances"))
    offsets = F.array(F.struct(F.lit(sh.TOPIC).alias("topic"), x.cast("int").alias("partition"),
                               offset.alias("offset"), F.lit(None).cast("int").alias("epoch")))
    pipelined = F.col("offset").isNotNull()
    pipeline = {"group": F.when(pipelined, group), "offsets": F.when(pipelined, offsets)}
    f = F.col("f")
    asked = F.when(f == "send", sh.value_struct(sends=sends(False))) \
        .when(f == "poll", sh.empty()) \
        .when(f == "assign", sh.value_struct(partitions=here, seek_to_beginning=F.col("seek"))) \
        .when(f == "subscribe", sh.value_struct(group=group, topics=F.array(F.lit(sh.TOPIC)))) \
        .when(f == "commit", sh.value_struct(group=group, offsets=offsets)) \
        .when(f == "committed", sh.value_struct(group=group, partitions=here)) \
        .when(f == "end-offsets", sh.value_struct(partitions=here,
                                                  isolation=F.col("isolation"))) \
        .when(f == "txn", sh.value_struct(sends=sends(False), polls=F.lit(False),
                                          **pipeline))
    done = F.when(f == "send", sh.value_struct(sends=sends(True))) \
        .when(f == "poll", sh.poll_done(reads, rebalances)) \
        .when(f == "committed", sh.value_struct(group=group, offsets=offsets)) \
        .when(f == "end-offsets", sh.value_struct(offsets=offsets)) \
        .when(f == "txn", sh.value_struct(sends=sends(True), reads=sh.empty("reads"),
                                          **pipeline)) \
        .otherwise(asked)
    base = F.when(F.col("section") == 0, F.lit(sh.SETUP_EVENTS)).otherwise(F.lit(layout.body_end))
    invoke = (base + 2 * (F.col("prefix") * cases + k * F.col("n") + F.col("pos"))).cast("long")
    operation = sh.op(invoke, invoke + 1, (PROCESS_BASE + case * 8 + F.col("role")).cast("long"),
                      f, asked, done, F.col("type"), F.col("phase"), F.col("error"))
    return spark.createDataFrame(rows, STEP) \
        .crossJoin(spark.range(cases).withColumnRenamed("id", "k")) \
        .select("section", F.array(operation).alias("ops"))
