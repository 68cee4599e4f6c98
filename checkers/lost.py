"""Sends that nobody consumed: `lost-write` and `unseen`; and the end they
are judged against going back, `stale-end` (docs/anomalies.md).

One idea: a send that must have happened but that no `ok` poll read is lost
for sure once an `ok` poll read past its position (`lost-write`: the consumer
went over it). An acknowledged send that no `ok` poll read and nobody read
past is `unseen`: proven lost only where the final phase recorded the
partition's end and its reads reached that end, otherwise the verdict for it
is unknown. Both are judged per partition, sized by records.

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
branch. An `info` send nobody read could also hide there; docs/anomalies.md
makes it "never evidence of anything", so it does not block the rule.

`stale-end`: an `ok` end-offsets answered e for a partition although an `ok`
poll that had completed before it was asked had read offset o >= e. A
record a consumer was served lay below the high watermark then; a correct
broker never answers ListOffsets(latest) with less afterwards — a new leader
answers OFFSET_NOT_AVAILABLE until its high watermark has caught up with its
epoch start (KIP-207, fixing KAFKA-2334) — so the answer was stale, or the
read was of records the log no longer commits (a read above the high
watermark). The final reads go past their recorded ends (workloads/final.py),
so a stale end no longer hides records as `unseen`; this is its own sign.

`unseen` takes only the final phase's ends, and so does `stale-end` as
stated. An end asked during the faults proves nothing by itself: a leader
cut off from the controller, that has not learned it was replaced, still
answers ListOffsets with its own high watermark, below what its successor
has since served (seen in a generic run on the correct broker: n3, cut off,
answered 263 for a partition of which n1, elected in the next epoch, had
served offset 284) — Kafka does the same. And sends acknowledged after such
an answer lie past it.

Such an end is judged by epochs instead (`--end-offsets-every`): an ok
end-offsets answered e in leader epoch E (the answering leader's current
epoch, which ListOffsets v4+ carries: Kafka's
Partition.fetchOffsetForTimestamp) is stale if an ok poll completed before
it was asked had read offset o >= e of a record appended in an epoch below
E (its batch's partitionLeaderEpoch). With clean elections the leader of E
held every record committed in an earlier epoch, below the start of E; a
correct one answers latest only once its high watermark has passed that
start (KIP-207). A replaced leader answers in its own older epoch, and what
its successors served was appended in later ones, so it is excused. Ends
and reads without an epoch (kafka-python's ends) are not judged this way.
"""

from __future__ import annotations

import numpy as np

from checkers.collected import Collected, family_result
from checkers.findings import (
    FINAL_READS_SHORT, UNDECIDED, UNDECIDED_PARTITION, Findings, nullable, pairs, singles,
)
from checkers.grouping import NONE, order, reduce, starts
from checkers.partition import OK, TYPES as COMPLETIONS, Partition
from checkers.result import CheckResult
from checkers.summary import SERIES_BUCKETS, Summary

FAMILY = "lost"
TYPES = ("lost-write", "unseen", "stale-end")

UNKNOWN_REASON = (
    "acknowledged sends that no ok poll read and that nobody read past; they are "
    "proven lost only where the final phase recorded the partition's end "
    "(end-offsets) and its reads reached it, and here the end was not recorded "
    "(end_offset null) or the final reads stopped short of it (final_read_to)")


def _first_read_after(part: Partition, positions: np.ndarray) -> np.ndarray:
    """Per position: the lowest history index of an `ok` poll that read a
    value at an offset after it (NONE if none, or if the position is)."""
    r = part.reads
    ok = (r.type == OK) & r.has_value
    offsets, ops = r.offset[ok], r.op[ok]
    by = order(offsets, ops)
    offsets, ops = offsets[by], ops[by]
    first = starts(offsets)
    read_at, first_read = offsets[first], reduce(np.minimum, ops, first)
    if len(read_at) == 0:
        return np.full(len(positions), NONE)
    from_here = np.minimum.accumulate(first_read[::-1])[::-1]   # min over offsets ≥ each
    after = np.searchsorted(read_at, positions, side="right")
    found = (positions != NONE) & (after < len(read_at))
    return np.where(found, from_here[np.minimum(after, len(read_at) - 1)], NONE)


def findings(part: Partition, out: Findings) -> None:
    s, sent = part.sends, part.sent
    missed = sent.must_have_happened & ~sent.read_ok
    later = np.where(missed, _first_read_after(part, sent.position), NONE)
    lost = later != NONE
    out.cases("lost-write", value=s.value[lost], offset=sent.position[lost],
              send_type=np.array(COMPLETIONS, dtype=object)[s.type[lost]],
              evidence=pairs(s.op[lost], later[lost]))

    _stale_ends(part, out)
    ends = _final_reads(part, out)
    unseen = missed & (s.type == OK) & (later == NONE)
    if unseen.any():
        _judge_unseen(part, out, unseen, ends)
    _series(part, out)


def _stale_ends(part: Partition, out: Findings) -> None:
    """Both `stale-end` rules (module docstring): each ok final-phase end
    against every read before it; each ok main-phase end answered in a
    known epoch e against the reads before it of records appended in an
    epoch before e."""
    e, r = part.ends, part.reads
    e = e.where(e.type == OK)
    read = (r.type == OK) & (r.offset != NONE)
    if not read.any() or not len(e):
        return
    _stale_below(out, e.where(e.final), r.where(read))
    in_epoch = ~e.final & (e.epoch != NONE)
    for epoch in np.unique(e.epoch[in_epoch]):
        _stale_below(out, e.where(in_epoch & (e.epoch == epoch)),
                     r.where(read & (r.epoch != NONE) & (r.epoch < epoch)))


def _stale_below(out: Findings, ends, reads) -> None:
    """Each of `ends` below an offset one of `reads` had read in a poll
    completed before that end was invoked; the evidence is (that poll, the
    end-offsets)."""
    if not len(ends) or not len(reads):
        return
    by = np.argsort(reads.op, kind="stable")
    ops, offsets, epochs = reads.op[by], reads.offset[by], reads.epoch[by]
    highest = np.maximum.accumulate(offsets)           # the highest read up to each poll
    before = np.searchsorted(ops, ends.invoke, side="left")    # polls done before
    seen = np.where(before > 0, highest[np.maximum(before - 1, 0)], NONE)
    stale = seen >= ends.offset
    if not stale.any():
        return
    # The poll that first read the highest offset: the evidence.
    first_at = np.searchsorted(highest, seen[stale], side="left")
    out.cases("stale-end", offset=seen[stale], end_offset=ends.offset[stale],
              read_epoch=nullable(epochs[first_at]), end_epoch=nullable(ends.epoch[stale]),
              evidence=pairs(ops[first_at], ends.op[stale]))


def _final_reads(part: Partition, out: Findings) -> tuple[int, int, int, int]:
    """(end, the op that recorded it, how far ok final reads read, the
    highest value offset below the end); NONE where there is none. A
    recorded end the final reads did not reach is reported (FINAL_READS_SHORT)."""
    e = part.ends.where(part.ends.final)       # the final phase's (module docstring)
    end_offset = end_index = NONE
    if len(e):
        last = order(e.op, e.offset)[-1]            # the last end-offsets op's
        end_offset, end_index = int(e.offset[last]), int(e.op[last])
    r = part.reads
    final = (r.type == OK) & r.final
    read_to = int(r.offset[final].max()) if final.any() else NONE
    below = part.value_offsets[part.value_offsets < end_offset]
    known_below_end = int(below.max()) if len(below) else NONE
    if end_offset != NONE and read_to < end_offset - 1 and known_below_end > read_to:
        out.cases(FINAL_READS_SHORT, end_offset=[end_offset], final_read_to=nullable([read_to]))
    return end_offset, end_index, read_to, known_below_end


def _judge_unseen(part: Partition, out: Findings, unseen: np.ndarray,
                  ends: tuple[int, int, int, int]) -> None:
    s, position = part.sends, part.sent.position
    end_offset, end_index, read_to, known_below_end = ends
    count = int(unseen.sum())
    unplaced = int((position[unseen] == NONE).sum())
    reached = read_to >= end_offset - 1 or (known_below_end <= read_to and unplaced == 0)
    if end_offset != NONE and reached:
        out.cases("unseen", value=s.value[unseen], offset=nullable(position[unseen]),
                  end_offset=np.full(count, end_offset),
                  evidence=pairs(s.op[unseen], np.full(count, end_index)))
        return
    out.cases(UNDECIDED_PARTITION, count=[count], end_offset=nullable([end_offset]),
              final_read_to=nullable([read_to]))
    out.cases(UNDECIDED, value=s.value[unseen], offset=nullable(position[unseen]),
              evidence=singles(s.op[unseen]))


def _series(part: Partition, out: Findings) -> None:
    """Deltas of the count of acknowledged sends not yet read by an ok poll,
    per time bucket of the run (`Context.series_start`, `series_width`): +1
    when a send is acknowledged, -1 when an ok poll first reads it (never
    before its acknowledgement)."""
    s, sent = part.sends, part.sent
    acked = s.type == OK
    read = acked & (sent.ok_read_time != NONE)
    times = np.concatenate([s.time[acked], np.maximum(s.time[read], sent.ok_read_time[read])])
    deltas = np.concatenate([np.ones(acked.sum(), np.int64), -np.ones(read.sum(), np.int64)])
    if len(times):
        start, width = part.context.series_start, part.context.series_width
        buckets, at = np.unique((times - start) // width, return_inverse=True)
        out.stats(FAMILY, "series", buckets, np.bincount(at, weights=deltas).astype(np.int64))


def check(found: Collected, summary: Summary) -> CheckResult:
    result = family_result(found, FAMILY, TYPES)
    undecided = found.counts.get(UNDECIDED, 0)
    if undecided:
        partitions = sorted(found.plain(UNDECIDED_PARTITION),
                            key=lambda c: (c["topic"], c["partition"]))
        result.unknown["unseen"] = {
            "count": undecided, "reason": UNKNOWN_REASON, "partitions": partitions,
            "examples": found.plain(UNDECIDED)}
    deltas = found.stats.get(FAMILY, {}).get("series", {})
    series = []
    span = summary.series()
    if deltas and span:
        start, end, width = span
        count = 0
        for bucket in range(min(max(deltas) + 1, SERIES_BUCKETS)):
            count += deltas.get(bucket, 0)
            series.append([min(start + (bucket + 1) * width - 1, end), count])
    result.stats["unseen"] = {"series": series}
    return result
