"""Records that are not what was sent, or not where one record should be.

Owns four anomaly types of docs/anomalies.md: `duplicate` (one value at
more than one place), `inconsistent-offsets` (one place holding more than
one value), `garbage-read` (a read of a value nobody sent, or of a record
that does not decode) and `aborted-read` (a read of a value whose only
sends failed).

The one idea: the version order (distinct topic, partition, offset, value)
must be a bijection between values and places. Grouping a partition's by
place finds the inconsistent offsets (`findings`, per partition). A value
placed twice, read but never sent, or read though every send of it failed
is suspect in at least one partition by that partition's rows alone
(`_candidates`), so only those few candidates are judged across
partitions, on every send and read of them (`value_cases`), which also
name the operations that prove each case.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from checkers.collected import Collected, family_result
from checkers.findings import Findings, nullable
from checkers.grouping import NONE, among, distinct, group_ids, lists, order, rank, starts
from checkers.partition import FAIL, OK, Partition
from checkers.result import CheckResult
from checkers.summary import Summary

FAMILY = "duplicates"
TYPES = ("duplicate", "inconsistent-offsets", "garbage-read", "aborted-read")

# A case lists at most this many evidence indexes, places or values: enough
# to open the operations, bounded even when a broken broker repeats a record
# a million times (the full number is in `place_count` / `value_count`).
LISTED = 16


def capped_evidence(case: np.ndarray, member: np.ndarray, op: np.ndarray):
    """Per case (0, 1, …, sorted): the op indexes that prove it, sorted, at
    most LISTED: the first op of each member (place or value) first, so
    every member keeps a witness when capping, then the lowest others.
    Returns (lengths, flat ops)."""
    by = order(case, member, op)
    case, member, op = case[by], member[by], op[by]
    firsts = starts(case, member)
    # Distinct (case, op), an op first of some member ranking before the rest.
    by = order(case, op, ~firsts)
    case, op, firsts = case[by], op[by], firsts[by]
    distinct = starts(case, op)
    case, op, firsts = case[distinct], op[distinct], firsts[distinct]
    by = order(case, ~firsts, op)
    case, op = case[by], op[by]
    kept = rank(starts(case)) < LISTED
    case, op = case[kept], op[kept]
    by = order(case, op)
    case, op = case[by], op[by]
    cases = np.unique(case)
    return np.bincount(np.searchsorted(cases, case), minlength=len(cases)), op


def _listed(case: np.ndarray, items: np.ndarray):
    """Per case: (count, the first LISTED items) of sorted rows."""
    first = starts(case)
    counts = np.bincount(group_ids(first)) if len(case) else np.zeros(0, np.int64)
    kept = rank(first) < LISTED
    return counts, np.minimum(counts, LISTED), items[kept]


def findings(part: Partition, out: Findings) -> None:
    _inconsistent_offsets(part, out)
    _undecodable(part, out)
    _candidates(part, out)
    r = part.reads
    s = part.sends
    # What the run tested at all (checkers/coverage.py): values acknowledged
    # here, and how many of them a read returned.
    acknowledged = distinct(s.value[s.type == OK])
    out.stat(FAMILY, "acknowledged", len(acknowledged))
    out.stat(FAMILY, "acknowledged_read", int(among(acknowledged, r.value[r.has_value]).sum()))
    out.stat(FAMILY, "reads_checked", len(r))
    out.stat(FAMILY, "undecodable_reads", int((~r.has_value).sum()))
    out.stat(FAMILY, "records", len(part.records[0]))


def _inconsistent_offsets(part: Partition, out: Findings) -> None:
    """One offset holding more than one value, by the reads and ok
    acknowledgements that disagree. Sends without an acknowledged offset
    place nothing."""
    offsets, values = part.records
    first = starts(offsets)
    per_offset = np.bincount(group_ids(first)) if len(offsets) else first
    divergent = offsets[first][per_offset > 1]
    if not len(divergent):
        return
    o = part.observations
    seen = np.isin(o.offset, divergent)
    case = np.searchsorted(divergent, o.offset[seen])
    lengths, evidence = capped_evidence(case, o.value[seen], o.op[seen])
    listed = np.isin(offsets, divergent)
    counts, shown, shown_values = _listed(offsets[listed], values[listed])
    out.cases("inconsistent-offsets", offset=divergent, values=lists(shown, shown_values),
              value_count=counts, evidence=lists(lengths, evidence))


def _undecodable(part: Partition, out: Findings) -> None:
    """Records that did not decode (value null; their bytes kept in raw):
    `garbage-read`, one case per (offset, raw)."""
    r = part.reads.where(~part.reads.has_value)
    if not len(r):
        return
    raws, raw_code = np.unique(r.raw.to_numpy(zero_copy_only=False).astype(str),
                               return_inverse=True)
    by = order(r.offset, raw_code, r.op)
    offset, code, op = r.offset[by], raw_code[by], r.op[by]
    distinct = starts(offset, code, op)
    offset, code, op = offset[distinct], code[distinct], op[distinct]
    first = starts(offset, code)
    _, shown, evidence = _listed(group_ids(first), op)
    out.cases("garbage-read", offset=offset[first], value=nullable(np.full(first.sum(), NONE)),
              raw=pa.array(raws[code[first]].tolist(), pa.string()),
              evidence=lists(shown, evidence))


def suspect(place_count: np.ndarray, sent: np.ndarray, read: np.ndarray) -> np.ndarray:
    """Per value: placed more than once, or read though no send of it may
    have happened (ok or info)."""
    return (place_count > 1) | (read & ~sent)


def _candidates(part: Partition, out: Findings) -> None:
    """The values that are suspect by this partition's rows alone. Every
    value suspect across partitions is one of them somewhere, since a
    value is sent to one partition only (docs/history.md: values are
    unique in the run): placed in two partitions, it is read without a
    send in one of them (an acknowledgement is a send). The rest of the
    values never leave the task."""
    s, r = part.sends, part.reads
    placed = np.sort(part.records[1])
    first = starts(placed)
    values, place_count = placed[first], np.bincount(group_ids(first))
    sent = among(values, s.value[s.type != FAIL])
    read = among(values, r.value[r.has_value])
    out.candidates(values[suspect(place_count, sent, read)])


# -- across partitions ----------------------------------------------------------------

def across_partitions(max_examples: int):
    """The function Spark runs per bucket of suspect values (its type hints
    tell Spark it takes and returns a whole Arrow table)."""
    def cases(rows: pa.Table) -> pa.Table:
        return value_cases(rows, max_examples)
    return cases


def value_cases(rows: pa.Table, max_examples: int) -> pa.Table:
    """The cases of candidate values (several per call), from every row of
    them in every partition: rows of `CANDIDATE_ROWS`, one per send
    (`placed` if acknowledged at an offset) and per read."""
    out = Findings(max_examples=max_examples)
    topic_names, topic = np.unique(rows["topic"].to_numpy(zero_copy_only=False).astype(str),
                                   return_inverse=True)
    partition, offset, value, op = (np.asarray(rows[c].fill_null(NONE), np.int64) for c in (
        "partition", "offset", "value", "op_index"))
    is_read, placed, sent, failed = (np.asarray(rows[c]) for c in (
        "is_read", "placed", "sent", "failed"))

    # Each value's verdict over all partitions, then on every row of it.
    candidates, of = np.unique(value, return_inverse=True)
    p = np.flatnonzero(placed)
    p = p[order(value[p], topic[p], partition[p], offset[p])]
    place_count = np.bincount(of[p][starts(value[p], topic[p], partition[p], offset[p])],
                              minlength=len(candidates))
    ever_sent, ever_read = (np.bincount(of, weights=flag, minlength=len(candidates)) > 0
                            for flag in (sent, is_read))
    first_failed = np.full(len(candidates), np.iinfo(np.int64).max)
    np.minimum.at(first_failed, of[failed], op[failed])
    first_failed[first_failed == np.iinfo(np.int64).max] = NONE
    is_suspect = suspect(place_count, ever_sent, ever_read)
    never_sent = is_suspect & ever_read & ~ever_sent
    duplicated = (is_suspect & (place_count > 1))[of] & placed
    garbage = (never_sent & (first_failed == NONE))[of] & placed
    aborted = (never_sent & (first_failed != NONE))[of] & placed
    failed_send = first_failed[of]

    if duplicated.any():
        d = np.flatnonzero(duplicated)
        by = order(value[d], topic[d], partition[d], offset[d])
        d = d[by]
        values, case = np.unique(value[d], return_inverse=True)
        place = np.unique(np.column_stack([topic[d], partition[d], offset[d]]), axis=0,
                          return_inverse=True)[1].ravel()
        lengths, evidence = capped_evidence(case, place, op[d])
        first_place = starts(value[d], topic[d], partition[d], offset[d])
        p = d[first_place]
        counts, shown, listed = _listed(value[p], np.arange(len(p)))
        heads = np.flatnonzero(starts(value[p]))
        out.cases("duplicate", topic=pa.array(topic_names[topic[p][heads]].tolist()),
                  partition=partition[p][heads], value=values, place_count=counts,
                  places=lists(shown, pa.StructArray.from_arrays(
                      [pa.array(topic_names[topic[p][listed]].tolist(), pa.string()),
                       pa.array(partition[p][listed], pa.int32()),
                       pa.array(offset[p][listed], pa.int64())],
                      names=["topic", "partition", "offset"])),
                  evidence=lists(lengths, evidence))

    for type_, mask in (("garbage-read", garbage & is_read), ("aborted-read", aborted & is_read)):
        if not mask.any():
            continue
        m = np.flatnonzero(mask)
        by = order(topic[m], partition[m], offset[m], value[m], op[m])
        m = m[by]
        distinct = starts(topic[m], partition[m], offset[m], value[m], op[m])
        m = m[distinct]
        first = starts(topic[m], partition[m], offset[m], value[m])
        case = group_ids(first)
        head = m[first]
        if type_ == "aborted-read":
            keep = rank(first) < LISTED - 1
            lengths = np.bincount(case[keep]) + 1
            ops = np.concatenate([failed_send[head], op[m][keep]])
            owner = np.concatenate([np.arange(len(head)), case[keep]])
            by = order(owner, ops)
            evidence = lists(lengths, ops[by])
            extra = {}
        else:
            _, shown, ops = _listed(case, op[m])
            evidence = lists(shown, ops)
            extra = {"raw": pa.nulls(len(head), pa.string())}
        out.cases(type_, topic=pa.array(topic_names[topic[head]].tolist(), pa.string()),
                  partition=partition[head], offset=offset[head], value=value[head],
                  evidence=evidence, **extra)
    return out.table()


CANDIDATE_ROWS = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("offset", pa.int64()),
    ("value", pa.int64()), ("op_index", pa.int64()), ("is_read", pa.bool_()),
    ("placed", pa.bool_()), ("sent", pa.bool_()), ("failed", pa.bool_()),
    ("bucket", pa.int32()),
])


def check(found: Collected, summary: Summary) -> CheckResult:
    return family_result(found, FAMILY, TYPES,
                         totals=("reads_checked", "undecodable_reads", "records"))
