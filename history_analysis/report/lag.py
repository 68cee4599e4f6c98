"""Realtime lag per consumer, as Jepsen's Kafka test draws it: at each `ok`
poll of the main phase (empty ones too), for each partition the consumer
holds, how long the oldest acknowledged record past the consumer's position
had been acknowledged; a poll counts its worst partition, 0 when it was
caught up everywhere.

What a consumer holds comes from the `assignments` table: an `assign`
replaces the process's partitions, an `assigned` callback adds, `revoked`
and `lost` remove (a `subscribe` names topics, not partitions: its
partitions arrive as callbacks). Its position in a partition is the highest
offset it read there since it was given the partition; until its first
read there the position is unknown (a group member starts at the committed
offset, which the history does not say), so the partition does not count.
Intervals are in operation indices: a callback a poll reported takes effect
for that poll's records. A consumer is a worker of the workload: a worker
goes on as a new process after an indeterminate end, so processes are
folded into their worker.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.report.run_data import RunData
from history_analysis.report.series import acknowledged

_OPEN = np.iinfo(np.int64).max


def _np(column) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False)


def holdings(assignments: pa.Table) -> list[tuple[int, str, int, int, int]]:
    """(process, topic, partition, from op_index, to op_index (exclusive))."""
    rows = assignments.filter(pc.is_valid(assignments["partition"])).sort_by("op_index")
    held: dict[int, dict[tuple[str, int], int]] = defaultdict(dict)
    out = []

    def release(process: int, key: tuple[str, int], at: int) -> None:
        start = held[process].pop(key, None)
        if start is not None and start < at:
            out.append((process, *key, start, at))

    assigned_by: dict[tuple[int, int], list] = defaultdict(list)
    for r in rows.to_pylist():
        assigned_by[(r["process"], r["op_index"])].append(r)
    for (process, op_index), group in assigned_by.items():
        if any(r["kind"] == "assign" for r in group):      # a new assign replaces all
            for key in list(held[process]):
                release(process, key, op_index)
        for r in group:
            key = (r["topic"], r["partition"])
            if r["kind"] in ("assign", "assigned"):
                held[process].setdefault(key, op_index)
            elif r["kind"] in ("revoked", "lost"):         # a client's reset keeps it
                release(process, key, op_index)
    for process, keys in held.items():
        for key, start in keys.items():
            out.append((process, *key, start, _OPEN))
    return out


def lag(data: RunData, workers: int | None) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """consumer label → (poll times s, lag s)."""
    ops = data.ops
    polls = ops.filter(pc.and_(pc.and_(pc.equal(ops["f"], "poll"), pc.equal(ops["type"], "ok")),
                               pc.equal(ops["phase"], "main")))
    polls = polls.sort_by([("process", "ascending"), ("op_index", "ascending")])
    reads = data.reads.filter(pc.and_(pc.equal(data.reads["type"], "ok"),
                                      pc.equal(data.reads["phase"], "main")))
    oldest = _oldest_after(acknowledged(data))
    poll_process, poll_index = _np(polls["process"]), _np(polls["op_index"])
    poll_time = _np(polls["time"]).astype(float)
    by_process = _slices(poll_process)
    read_slices, read_at, read_offset = _reads_by_holder(reads)
    found_polls, found_lags = [], []
    for process, topic, partition, start, end in holdings(data.assignments):
        if (topic, partition) not in oldest or process not in by_process:
            continue
        offsets, ack_after = oldest[(topic, partition)]
        lo, hi = by_process[process]
        lo, hi = lo + np.searchsorted(poll_index[lo:hi], [start, end])
        r_lo, r_hi = read_slices.get((process, topic, partition), (0, 0))
        r_lo, r_hi = r_lo + np.searchsorted(read_at[r_lo:r_hi], [start, end])
        at, position = read_at[r_lo:r_hi], np.maximum.accumulate(read_offset[r_lo:r_hi]) \
            if r_hi > r_lo else read_offset[:0]
        last = np.searchsorted(at, poll_index[lo:hi], side="right") - 1
        mine = np.arange(lo, hi)[last >= 0]
        last = last[last >= 0]
        nxt = np.searchsorted(offsets, position[last], side="right")
        since = np.where(nxt < len(offsets), ack_after[np.minimum(nxt, len(offsets) - 1)],
                         np.inf)
        found_polls.append(mine)
        found_lags.append(np.maximum(poll_time[mine] - since, 0.0))
    worst = np.full(len(poll_index), -1.0)
    if found_polls:
        np.maximum.at(worst, np.concatenate(found_polls), np.concatenate(found_lags))
    counted = worst >= 0
    if not counted.any():
        return {}
    order = np.argsort(poll_time[counted], kind="stable")
    process = poll_process[counted][order].astype(np.int64)
    times, worst = poll_time[counted][order], worst[counted][order]
    consumer = process % workers if workers else process
    label = "worker" if workers else "process"
    return {f"{label} {c}": (times[consumer == c], worst[consumer == c])
            for c in np.unique(consumer)}


def _slices(sorted_keys: np.ndarray) -> dict:
    """key → (first, end) of its run in a sorted array."""
    if not len(sorted_keys):
        return {}
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    ends = np.r_[starts[1:], len(sorted_keys)]
    return {k: (int(a), int(b)) for k, a, b in zip(sorted_keys[starts].tolist(), starts, ends)}


def _reads_by_holder(reads: pa.Table):
    """(process, topic, partition) → slice of the reads sorted by holder then
    operation, with their op_index and offset arrays."""
    topics = pc.dictionary_encode(reads["topic"]).combine_chunks()
    code, names = _np(topics.indices), topics.dictionary.to_pylist()
    process, partition = _np(reads["process"]), _np(reads["partition"])
    at, offset = _np(reads["op_index"]), _np(reads["offset"])
    order = np.lexsort((at, partition, code, process))
    process, code, partition = process[order], code[order], partition[order]
    if not len(order):
        return {}, at, offset
    change = np.r_[True, (process[1:] != process[:-1]) | (code[1:] != code[:-1])
                   | (partition[1:] != partition[:-1])]
    starts = np.flatnonzero(change)
    ends = np.r_[starts[1:], len(order)]
    slices = {(int(process[a]), names[code[a]], int(partition[a])): (int(a), int(b))
              for a, b in zip(starts, ends)}
    return slices, at[order], offset[order]


def _oldest_after(acked: pa.Table) -> dict[tuple[str, int], tuple[np.ndarray, np.ndarray]]:
    """(topic, partition) → (acknowledged offsets sorted, the earliest
    acknowledgement among the offsets from each one on)."""
    out = {}
    keys = acked.select(["topic", "partition"]).group_by(["topic", "partition"]).aggregate([])
    for key in keys.to_pylist():
        part = acked.filter(pc.and_(pc.equal(acked["topic"], key["topic"]),
                                    pc.equal(acked["partition"], key["partition"])))
        offsets = _np(part["offset"])
        order = np.argsort(offsets, kind="stable")
        times = _np(part["time"]).astype(float)[order]
        out[(key["topic"], key["partition"])] = (
            offsets[order], np.minimum.accumulate(times[::-1])[::-1])
    return out
