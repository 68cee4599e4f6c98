"""Consumer groups: what the broker remembers of a group's commits, and what
the group's members read because of it.

Owns four anomaly types of ANOMALIES.md: `stale-committed-offset`,
`group-lost`, `resume-skip` and `resume-rewind` (allowed by default).

The one idea: history index order is real-time order (the writer appends in
real time), so "op A completed before op B was invoked" is A.op_index <
B.invoke_index, and "what had group G committed for partition P when B
started" is a running aggregate over one timeline per (group, topic,
partition) that interleaves commit completions with the invocations of the
ops that ask. Each question is one window over such a union: no range joins,
state sized by commits and records, never by offsets.

Choices where ANOMALIES.md is silent:
- Commits overwrite (a later, legitimate commit may be lower), so a
  `committed` op is held to W, the LATEST `ok` commit completed before it
  was invoked (c = W's offset), zombie commits (below) aside. It may still
  return the offset of any commit that could have landed after W: not
  `fail`, not completed before W was invoked (an `info` commit may take
  effect at any later time), and invoked before the `committed` op
  completed. A returned offset above c is not in the catalogue and is
  ignored.
- A zombie commit is an `ok` commit of (G, P) by a process whose last
  rebalance callback for P before the commit was `assigned`, invoked after
  another process of G reported `assigned` for P: the group had given P to
  someone else and the committer had not been told. Under the eager
  protocol the new owner's generation is one the committer was not in, so
  a broker must refuse the commit (Kafka's GroupCoordinator:
  ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID); an `ok` one neither sets W
  nor explains a fetch, and a fetch that returns it is stale.
- A process belongs to G if it subscribed with G (ok/info), reported a
  rebalance callback of G, or sent any commit for G; its reads of P at any
  time count as deliveries to G.
- Assignments: `assigned` callbacks, plus `subscribe` ops of processes that
  never report `assigned` for that topic (each partition the process reads
  afterwards is then "assigned" at the subscribe). The first read is the
  first record of P (in the order returned) of the process's next ok/info
  poll that returned P, unless another assign/revoke/lost of P for that
  process comes first (then that assignment was never read from). Inside
  one poll: revocations, then assignments, then the records returned.
- c is the highest `ok` commit offset completed before the assignment op
  was invoked (ANOMALIES.md: the highest, not the latest: so a skip is
  reported only past every acknowledged commit).
- A commit "in flight" at an assignment: any commit that is not `fail` and
  overlaps the span from the assignment op's invocation to the first read's
  completion (the position is fetched somewhere in that span: a commit
  racing with the rebalance can legitimately move it). Such assignments are
  skipped; so are those with no `ok` commit before them (auto.offset.reset
  decides).
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from checkers.history import History
from checkers.result import CheckOptions, CheckResult, report
from checkers.version_order import PARTITION, dense_offsets, observations, records

KEY = ("group", *PARTITION)

# When an op can no longer take effect: an `info` op may land at any later time.
NEVER = 2 ** 63 - 1

DELIVERED = ("ok", "info")  # ANOMALIES.md `group-lost`: ok or info polls deliver


def check(spark: SparkSession, tables: History, options: CheckOptions) -> CheckResult:
    result = CheckResult()
    report(result, options, {
        "stale-committed-offset": _stale_committed_offsets(tables),
        "group-lost": _group_lost(tables),
        "resume-skip": _resume_skips(tables),
        "resume-rewind": _resume_rewinds(tables),
    })
    return result


def _invocations(history: History, *fs: str) -> DataFrame:
    """(op_index, invoke_index) of the ops named `fs`."""
    return history["ops"].where(F.col("f").isin(*fs)) \
        .select(F.col("index").alias("op_index"), "invoke_index")


def _commits(history: History) -> DataFrame:
    """Commit rows that may have happened (not `fail`), with `invoke_index`
    and `settled`: the index after which the commit can no longer land."""
    def build(h: History) -> DataFrame:
        return h["commits"].where(F.col("type") != "fail") \
            .join(_invocations(h, "commit"), "op_index") \
            .select(*KEY, "op_index", "invoke_index", "process", "type", "offset",
                    F.when(F.col("type") == "ok", F.col("op_index")).otherwise(F.lit(NEVER))
                    .alias("settled"))
    return history.derived("group_offsets.commits", build)


def _zombie_commits(history: History) -> DataFrame:
    """(op_index) of the zombie commits (module docstring): one timeline
    per (group, partition) of rebalance callbacks at their poll's
    completion and ok commits at their invocation."""
    callbacks = history["assignments"] \
        .where(F.col("kind").isin("assigned", "revoked", "lost") & F.col("group").isNotNull()) \
        .select(*KEY, "process", F.col("op_index").alias("at"), "kind",
                # Inside one poll: revocations, then assignments.
                F.when(F.col("kind") == "assigned", 1).otherwise(0).alias("rank"))
    commits = _commits(history).where(F.col("type") == "ok") \
        .select(*KEY, "process", F.col("invoke_index").alias("at"), "op_index",
                F.lit(2).alias("rank"))
    timeline = callbacks.unionByName(commits, allowMissingColumns=True)

    def so_far(*keys: str) -> Window:
        return Window.partitionBy(*keys).orderBy("at", "rank") \
            .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    own = F.last("kind", ignorenulls=True).over(so_far(*KEY, "process"))
    owner = F.last(F.when(F.col("kind") == "assigned", F.col("process")), ignorenulls=True) \
        .over(so_far(*KEY))
    return timeline.select("op_index", "process", own.alias("own"), owner.alias("owner")) \
        .where(F.col("op_index").isNotNull() & (F.col("own") == "assigned")
               & (F.col("owner") != F.col("process"))) \
        .select("op_index")


def _running(order_by: str) -> Window:
    return Window.partitionBy(*KEY).orderBy(order_by) \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)


def _stale_committed_offsets(history: History) -> DataFrame:
    """ANOMALIES.md `stale-committed-offset`: an `ok` committed op returned
    less than (or no) offset c of the latest `ok` commit W completed before
    it was invoked, and no commit that could have landed after W explains
    the value it returned. Zombie commits count for neither."""
    commits = _commits(history).join(_zombie_commits(history), "op_index", "left_anti")
    fetches = history["committed"].where(F.col("type") == "ok") \
        .join(_invocations(history, "committed"), "op_index")
    # One timeline per key: commits at their completion, fetches at their
    # invocation (distinct events, so distinct indexes: no ties).
    timeline = commits.where(F.col("type") == "ok").select(
        *KEY, F.col("op_index").alias("at"),
        F.struct("op_index", "invoke_index", "offset").alias("commit"),
    ).unionByName(fetches.select(
        *KEY, F.col("invoke_index").alias("at"),
        F.struct("op_index", "offset").alias("fetch"),
    ), allowMissingColumns=True)
    latest = F.last("commit", ignorenulls=True).over(_running("at"))
    suspects = timeline.select(*KEY, "fetch", latest.alias("w")) \
        .where(F.col("fetch").isNotNull() & F.col("w").isNotNull()
               & (F.col("fetch.offset").isNull() | (F.col("fetch.offset") < F.col("w.offset"))))

    s, e = suspects.alias("s"), commits.alias("e")
    explained_by = [F.col(f"s.{k}") == F.col(f"e.{k}") for k in KEY] + [
        F.col("e.offset") == F.col("s.fetch.offset"),
        F.col("e.settled") > F.col("s.w.invoke_index"),
        F.col("e.invoke_index") < F.col("s.fetch.op_index"),
    ]
    return s.join(e, explained_by, "left_anti").select(
        *KEY,
        F.col("w.offset").alias("committed_offset"),
        F.col("fetch.offset").alias("returned_offset"),
        F.array(F.col("w.op_index"), F.col("fetch.op_index")).alias("evidence"),
    )


def _members(history: History) -> DataFrame:
    """(group, process): who belonged to a group (module docstring)."""
    by_assignment = history["assignments"].where(F.col("group").isNotNull()) \
        .select("group", "process")
    by_commit = history["commits"].select("group", "process")
    return by_assignment.unionByName(by_commit).distinct()


def _group_lost(history: History) -> DataFrame:
    """ANOMALIES.md `group-lost`: a value of the version order below C, the
    highest `ok` commit of (G, P), that no member of G was delivered."""
    top = F.max(F.struct("offset", (-F.col("op_index")).alias("earliest")))
    highest = history["commits"].where(F.col("type") == "ok").groupBy(*KEY) \
        .agg(top.alias("top")) \
        .select(*KEY, F.col("top.offset").alias("committed_offset"),
                (-F.col("top.earliest")).alias("commit_index"))
    owed = records(history).join(highest, list(PARTITION)) \
        .where(F.col("offset") < F.col("committed_offset"))
    delivered = history["reads"] \
        .where(F.col("type").isin(*DELIVERED) & F.col("value").isNotNull()) \
        .select("process", *PARTITION, "value") \
        .join(_members(history), "process")
    # Kept: the evidence below reads it three times, and it is small unless
    # the broker lost much.
    lost = history.derived("group_offsets.lost", lambda _: owed.join(
        delivered, [*KEY, "value"], "left_anti"))

    # Evidence: a send of the value (any type), else an op that saw it there.
    places = lost.select(*PARTITION, "offset", "value").distinct()
    sent_by = history["sends"].join(places.drop("offset"), [*PARTITION, "value"]) \
        .groupBy(*PARTITION, "value").agg(F.min("op_index").alias("send_index"))
    seen_by = observations(history).join(places, [*PARTITION, "offset", "value"]) \
        .groupBy(*PARTITION, "offset", "value").agg(F.min("op_index").alias("seen_index"))
    return lost.join(sent_by, [*PARTITION, "value"], "left") \
        .join(seen_by, [*PARTITION, "offset", "value"], "left") \
        .select(*KEY, "value", "offset", "committed_offset",
                F.array(F.coalesce("send_index", "seen_index"), F.col("commit_index"))
                .alias("evidence"))


def _first_reads(history: History) -> DataFrame:
    """Per delivering poll and partition: the offset of its first record."""
    return history["reads"].where(F.col("type").isin(*DELIVERED)) \
        .groupBy("process", *PARTITION, "op_index") \
        .agg(F.min_by("offset", "pos").alias("offset"))


def _assignment_events(history: History, first_reads: DataFrame) -> DataFrame:
    """Rows that change what a process consumes of a partition: `kind`,
    `group`, `op_index` and `rank` (order inside one poll: revocations, then
    assignments, then the records it returned)."""
    rows = history["assignments"]
    by_partition = rows.where(F.col("partition").isNotNull()).select(
        "process", *PARTITION, "op_index", "kind", "group",
        F.when(F.col("kind").isin("revoked", "lost"), 0).otherwise(1).alias("rank"))
    reported = rows.where(F.col("kind") == "assigned").select("process", "topic").distinct()
    subscribed = rows.where(F.col("kind") == "subscribe") \
        .join(reported, ["process", "topic"], "left_anti") \
        .select("process", "topic", "group", F.col("op_index").alias("subscribed_at"))
    read_until = first_reads.groupBy("process", *PARTITION) \
        .agg(F.max("op_index").alias("last_read"))
    by_subscribe = subscribed.join(read_until, ["process", "topic"]) \
        .where(F.col("last_read") > F.col("subscribed_at")) \
        .select("process", *PARTITION, F.col("subscribed_at").alias("op_index"),
                F.lit("subscribe").alias("kind"), "group", F.lit(1).alias("rank"))
    return by_partition.unionByName(by_subscribe)


def _resumes(history: History) -> DataFrame:
    """Per group assignment of a partition that the member then read, with
    a commit before it and none in flight: `committed_offset` c,
    `first_read_offset` f and the three op indexes of the evidence."""
    def build(h: History) -> DataFrame:
        first_reads = _first_reads(h)
        events = _assignment_events(h, first_reads)
        per_member = Window.partitionBy("process", *PARTITION).orderBy("op_index", "rank")
        following = F.lead(F.struct("kind", "op_index", "offset")).over(per_member)
        timeline = events.unionByName(
            first_reads.withColumn("kind", F.lit("read")).withColumn("rank", F.lit(2)),
            allowMissingColumns=True)
        read_after = timeline.select("*", following.alias("next")) \
            .where(F.col("kind").isin("assigned", "subscribe")
                   & (F.col("next.kind") == "read") & F.col("group").isNotNull()) \
            .join(_invocations(h, "poll", "subscribe"), "op_index") \
            .select(*KEY, "process", F.col("op_index").alias("assignment_index"),
                    F.col("invoke_index").alias("assigned_at"),
                    F.col("next.op_index").alias("read_index"),
                    F.col("next.offset").alias("first_read_offset"))

        commits = _commits(h)
        by_key = commits.select(
            *KEY, F.col("op_index").alias("by_completion"),
            F.col("invoke_index").alias("by_invocation"), "settled",
            F.when(F.col("type") == "ok", F.struct("offset", "op_index")).alias("commit"),
        ).unionByName(read_after.select(
            *KEY, F.col("assigned_at").alias("by_completion"),
            F.col("read_index").alias("by_invocation"),
            F.struct(*read_after.columns).alias("resume")), allowMissingColumns=True)
        # c: the highest ok commit completed before the assignment was
        # invoked (ties: the latest). In flight: a commit invoked before the
        # first read completed that had not settled when the assignment began.
        highest = F.max("commit").over(_running("by_completion"))
        last_settled = F.max("settled").over(_running("by_invocation"))
        return by_key.select("resume.*", highest.alias("c"), last_settled.alias("settled")) \
            .where(F.col("assignment_index").isNotNull() & F.col("c").isNotNull()
                   & (F.col("settled").isNull() | (F.col("settled") < F.col("assigned_at")))) \
            .select(*KEY, "process", F.col("c.offset").alias("committed_offset"),
                    "first_read_offset",
                    F.array("c.op_index", "assignment_index", "read_index").alias("evidence"))
    return history.derived("group_offsets.resumes", build)


def _resume_cases(frame: DataFrame) -> DataFrame:
    return frame.select(*KEY, "process", "committed_offset", "first_read_offset", "evidence")


def _resume_rewinds(history: History) -> DataFrame:
    """ANOMALIES.md `resume-rewind`: the first read starts before c."""
    resumes = _resumes(history)
    return _resume_cases(resumes.where(F.col("first_read_offset") < F.col("committed_offset")))


def _resume_skips(history: History) -> DataFrame:
    """ANOMALIES.md `resume-skip`: the first read f starts after c and the
    version order holds values at offsets in [c, f) (a gap of markers or
    compacted offsets alone is no skip)."""
    ahead = _resumes(history).where(F.col("first_read_offset") > F.col("committed_offset"))
    if ahead.isEmpty():  # the usual case: spare the version order a shuffle
        return _resume_cases(ahead)
    return _resume_cases(_with_next_value_offset(history, ahead, "committed_offset")
                         .where(F.col("next_value_offset") < F.col("first_read_offset")))


def _with_next_value_offset(history: History, probes: DataFrame, at: str) -> DataFrame:
    """`probes` plus `next_value_offset`: the lowest offset ≥ probes[at] of
    the probe's partition that holds a value (null if none).

    One pass over the partition's value offsets in descending order, probes
    after the offset they ask about: a running minimum, sized by records.
    """
    values = dense_offsets(history).select(*PARTITION, "offset", F.lit(False).alias("is_probe"))
    asks = probes.select(*PARTITION, F.col(at).alias("offset"), F.lit(True).alias("is_probe"),
                         F.struct(*probes.columns).alias("probe"))
    downwards = Window.partitionBy(*PARTITION).orderBy(F.col("offset").desc(), "is_probe") \
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    nearest = F.min(F.when(~F.col("is_probe"), F.col("offset"))).over(downwards)
    return values.unionByName(asks, allowMissingColumns=True) \
        .select("is_probe", "probe", nearest.alias("next_value_offset")) \
        .where("is_probe").select("probe.*", "next_value_offset")
