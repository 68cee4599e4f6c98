"""Poll order: does each consumer read a partition forwards, without gaps?

Owns `nonmonotonic-poll`, `poll-skip`, `int-nonmonotonic-poll` and
`int-poll-skip` (docs/anomalies.md). Per consumer process and partition, the
records it read (polls of any completion type: a broker must never return
what is not in its log) in the order it got them, (op_index, pos). The one
idea: one order over those reads with the partition's resets merged in
gives each read the read before it and the latest reset; consecutive reads
with no reset between them must move exactly one step forwards in the dense
order. Two reads of one poll are the `int-` types; the last read of one poll
and the first of the next poll that read the partition are the others.

Resets: an assignment event of the same process with op_index in (earlier
poll, later poll] that concerns the partition (its own row, or a subscribe
of its topic, which names no partition), or a `reset` the client reported:
a position it restarted by itself (workloads/clients/confluent.py). The interval includes the later
poll itself: rebalance callbacks a poll reports fire before it returns
records. A reset breaks the chain; no check across it.

Choices where the definitions (docs/anomalies.md) are silent:
- Records that did not decode (value null) are `garbage-read`'s concern and
  hold no place in the version order: they are left out here.
- Going backwards includes re-reading the same offset (b ≤ a).
- Evidence: [earlier poll, later poll]; the one op index, once, for the
  `int-` types (one operation proves them).
"""

from __future__ import annotations

import numpy as np

from checkers.collected import Collected, family_result
from checkers.findings import Findings
from checkers.grouping import NONE, latest, order, starts, take
from checkers.partition import Partition
from checkers.result import CheckResult
from checkers.send_order import report_pairs
from checkers.summary import Summary

FAMILY = "poll-order"
TYPES = ("nonmonotonic-poll", "poll-skip", "int-nonmonotonic-poll", "int-poll-skip")


def findings(part: Partition, out: Findings) -> None:
    r, a = part.reads, part.assignments
    read = r.where(r.has_value)
    subscribed = [(op, process) for topic, op, _, process, _ in part.context.subscriptions
                  if topic == part.topic]
    reset_op = np.concatenate([a.op, np.array([op for op, _ in subscribed], np.int64)])
    reset_process = np.concatenate([a.process, np.array([p for _, p in subscribed], np.int64)])
    n, m = len(read), len(reset_op)
    process = np.concatenate([read.process, reset_process])
    op = np.concatenate([read.op, reset_op])
    # pos -1 sorts a reset before the reads of the poll that reported it.
    pos = np.concatenate([read.pos, np.full(m, -1)])
    is_read = np.concatenate([np.ones(n, bool), np.zeros(m, bool)])
    offset = np.concatenate([read.offset, np.full(m, NONE)])
    value = np.concatenate([read.value, np.zeros(m, np.int64)])

    by = order(process, op, pos)
    process, op, is_read, offset, value = process[by], op[by], is_read[by], offset[by], value[by]
    first = starts(process)
    prev = latest(is_read, first, strictly_before=True)
    reset = latest(~is_read, first)
    prev_op = take(op, prev, NONE)
    # A reset at the earlier poll's own index fired before that poll's reads,
    # so only one after it lies between the two.
    chained = is_read & (prev != NONE) & ((reset == NONE) | (take(op, reset, NONE) <= prev_op))
    rows = {"process": process[chained], "op": op[chained], "offset": offset[chained],
            "value": value[chained], "prev_op": prev_op[chained],
            "prev_offset": take(offset, prev, NONE)[chained],
            "prev_value": take(value, prev, 0)[chained]}
    backwards = rows["offset"] <= rows["prev_offset"]
    # Subtraction, not `prev + 1`: no overflow for offsets near 2**63.
    jumped = rows["offset"] - rows["prev_offset"] > 1
    report_pairs(part, out, rows, backwards, jumped,
                 ("nonmonotonic-poll", "int-nonmonotonic-poll", "poll-skip", "int-poll-skip"))


def check(found: Collected, summary: Summary) -> CheckResult:
    return family_result(found, FAMILY, TYPES)
