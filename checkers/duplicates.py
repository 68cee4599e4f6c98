"""Records that are not what was sent, or not where one record should be.

Owns four anomaly types of ANOMALIES.md: `duplicate` (one value at more than
one place), `inconsistent-offsets` (one place holding more than one value),
`garbage-read` (a read of a value nobody sent, or of a record that does not
decode) and `aborted-read` (a read of a value whose only sends failed).

The one idea: the version order (distinct topic, partition, offset, value)
is a relation that must be a bijection between values and places. Grouping
it by value finds the duplicates, grouping it by place the inconsistent
offsets; only the few offending keys are then joined back to the
observations, to name the operations that prove each case.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from checkers.history import History
from checkers.result import CheckOptions, CheckResult, report
from checkers.version_order import PARTITION, observations, read_values, records

PLACE = (*PARTITION, "offset")

# A case lists at most this many evidence indexes, places or values: enough
# to open the operations, bounded even when a broken broker repeats a record
# a million times (the full number is in `place_count` / `value_count`).
LISTED = 16


def _evidence(groups: Column) -> Column:
    """Sorted op indexes proving a case, at most LISTED of them.

    `groups` is an array of structs with `ops` (sorted op indexes), one per
    place (or value) of the case: the first op of each group comes first, so
    every place of a duplicate keeps at least one witness when capping.
    """
    firsts = F.array_sort(F.transform(groups, lambda g: g["ops"][0]))
    every = F.array_sort(F.flatten(F.transform(groups, lambda g: g["ops"])))
    return F.array_sort(F.slice(F.array_distinct(F.concat(firsts, every)), 1, LISTED))


def _witnesses(observed: DataFrame, key: list[str], member: list[str]) -> DataFrame:
    """Per `key`: `groups`, one struct per distinct `member` (sorted), with
    the sorted op indexes of the observations that saw it."""
    per_member = observed.groupBy(*key, *member).agg(
        F.array_sort(F.collect_set("op_index")).alias("ops"))
    return per_member.groupBy(*key).agg(
        F.array_sort(F.collect_list(F.struct(*member, "ops"))).alias("groups"))


def duplicates(history: History) -> DataFrame:
    """ANOMALIES.md `duplicate`: a value at more than one (topic, partition,
    offset). The same value read again at the same offset is one place, so
    re-reads and concurrent consumers are not duplicates; an unacknowledged
    send nobody read is not in the version order at all."""
    duplicated = records(history).groupBy("value").agg(F.count("*").alias("place_count")) \
        .where(F.col("place_count") > 1)
    observed = observations(history).join(duplicated.select("value"), "value")
    cases = _witnesses(observed, ["value"], list(PLACE)).join(duplicated, "value")
    places = F.transform("groups", lambda g: F.struct(*(g[c].alias(c) for c in PLACE)))
    return cases.select(
        F.col("groups")[0]["topic"].alias("topic"),
        F.col("groups")[0]["partition"].alias("partition"),
        "value",
        F.slice(places, 1, LISTED).alias("places"),
        "place_count",
        _evidence(F.col("groups")).alias("evidence"),
    )


def inconsistent_offsets(history: History) -> DataFrame:
    """ANOMALIES.md `inconsistent-offsets`: one (topic, partition, offset)
    holding more than one value, by the reads and `ok` acknowledgements that
    disagree. Sends without an acknowledged offset place nothing."""
    divergent = records(history).groupBy(*PLACE).agg(F.count("*").alias("value_count")) \
        .where(F.col("value_count") > 1)
    observed = observations(history).join(divergent.select(*PLACE), list(PLACE))
    cases = _witnesses(observed, list(PLACE), ["value"]).join(divergent, list(PLACE))
    return cases.select(
        *PLACE,
        F.slice(F.transform("groups", lambda g: g["value"]), 1, LISTED).alias("values"),
        "value_count",
        _evidence(F.col("groups")).alias("evidence"),
    )


def _values_by_sender(history: History) -> DataFrame:
    """Per value read: whether any send of it may have happened (`ok` or
    `info`: anywhere, any partition) and its first failed send, if any.
    Values no send carries have null `may_have_happened`."""
    def build(h: History) -> DataFrame:
        by_value = h["sends"].groupBy("value").agg(
            F.max(F.col("type") != "fail").alias("may_have_happened"),
            F.min(F.when(F.col("type") == "fail", F.col("op_index"))).alias("failed_send"))
        return read_values(h).join(by_value, "value", "left")
    return history.derived("duplicates.values_by_sender", build)


def _read_cases(history: History, suspects: DataFrame) -> DataFrame:
    """Per record read (topic, partition, offset, value) of a suspect
    (topic, partition, value): the sorted op indexes of the reads of it."""
    reads = history["reads"].where(F.col("value").isNotNull())
    return reads.join(suspects, [*PARTITION, "value"]).groupBy(*PLACE, "value", *(
        c for c in suspects.columns if c not in (*PARTITION, "value"))).agg(
        F.array_sort(F.collect_set("op_index")).alias("reads"))


def garbage_reads(history: History) -> DataFrame:
    """ANOMALIES.md `garbage-read`: a read of a value that no send of any
    type carries (an `info` send, even never completed, or a send to another
    partition, explains it), or of a record that did not decode (value null;
    its `raw` is kept)."""
    unsent = _values_by_sender(history).where(F.col("may_have_happened").isNull()) \
        .select(*PARTITION, "value")
    decoded = _read_cases(history, unsent).select(
        *PLACE, "value", F.lit(None).cast("string").alias("raw"),
        F.slice("reads", 1, LISTED).alias("evidence"))
    undecodable = history["reads"].where(F.col("value").isNull()) \
        .groupBy(*PLACE, "value", "raw").agg(
            F.slice(F.array_sort(F.collect_set("op_index")), 1, LISTED).alias("evidence"))
    return decoded.unionByName(undecodable)


def aborted_reads(history: History) -> DataFrame:
    """ANOMALIES.md `aborted-read`: a read of a value whose sends all
    completed `fail`. A value also sent by an `ok` or `info` send is
    explained by that send, so it is not an aborted read."""
    aborted = _values_by_sender(history).where(~F.col("may_have_happened")) \
        .select(*PARTITION, "value", "failed_send")
    return _read_cases(history, aborted).select(
        *PLACE, "value",
        F.array_sort(F.concat(F.array("failed_send"), F.slice("reads", 1, LISTED - 1)))
        .alias("evidence"),
    )


def check(spark: SparkSession, tables: History, options: CheckOptions) -> CheckResult:
    result = CheckResult()
    report(result, options, {
        "duplicate": duplicates(tables),
        "inconsistent-offsets": inconsistent_offsets(tables),
        "garbage-read": garbage_reads(tables),
        "aborted-read": aborted_reads(tables),
    })
    reads = tables["reads"].agg(
        F.count("*").alias("reads"),
        F.count(F.when(F.col("value").isNull(), 1)).alias("undecodable")).first()
    result.stats["duplicates"] = {
        "reads_checked": reads["reads"],
        "undecodable_reads": reads["undecodable"],
        "records": records(tables).count(),
    }
    return result
