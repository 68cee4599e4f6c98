"""Send order: does each producer's log order follow the order it sent in?

Owns `nonmonotonic-send`, `int-nonmonotonic-send` and `int-send-skip`
(docs/anomalies.md). Per producer process and partition, take the sends
that may have happened and whose position is known (`ok` and `info` sends
with a position, `Partition.sent`) in the order the process sent them,
(op_index, pos), and compare each send with the one before it. A later
send landing before an earlier one is a reordering; inside one operation,
consecutive sends that are not neighbours in the dense order mean another
producer's records landed between them.

Choices where the definitions (docs/anomalies.md) are silent:
- Equal positions (two values at one offset) are `inconsistent-offsets`, a
  divergence matter, not a reordering: only position(v2) < position(v1) is
  reported.
- `fail` sends are never evidence (docs/anomalies.md), even when someone read
  them (that is `aborted-read`): they are left out, so the sends around
  one are compared with each other. An `info` send nobody read has no position, even
  if its completion carries an offset, and is left out too.
- Evidence: [op of v1, op of v2] across operations; the one op index, once,
  for the `int-` types (one operation proves them).
"""

from __future__ import annotations

import numpy as np

from checkers.collected import Collected, family_result
from checkers.findings import Findings, pairs, singles
from checkers.grouping import NONE, order, previous, starts
from checkers.partition import FAIL, Partition
from checkers.result import CheckResult
from checkers.summary import Summary

FAMILY = "send-order"
TYPES = ("nonmonotonic-send", "int-nonmonotonic-send", "int-send-skip")


def consecutive(part: Partition, process, op, pos, offset, value) -> dict:
    """Rows and their predecessor per process, in (op, pos) order: the
    columns of both, and `has_prev`."""
    by = order(process, op, pos)
    process, op, offset, value = process[by], op[by], offset[by], value[by]
    first = starts(process)
    return {"process": process, "op": op, "offset": offset, "value": value,
            "prev_op": previous(op, first, NONE), "prev_offset": previous(offset, first, NONE),
            "prev_value": previous(value, first, 0), "has_prev": ~first}


def report_pairs(part: Partition, out: Findings, rows: dict, backwards: np.ndarray,
                 jumped: np.ndarray, types: tuple[str, str, str | None, str]) -> None:
    """Report consecutive pairs: `types` names (backwards across ops,
    backwards inside one op, apart across ops or None, apart inside one op);
    `jumped` pairs are apart when values lie strictly between them in the
    dense order."""
    across = rows["op"] != rows["prev_op"]
    dense_gap = part.dense(rows["offset"]) - part.dense(rows["prev_offset"])
    placed = (part.dense(rows["offset"]) != NONE) & (part.dense(rows["prev_offset"]) != NONE)
    apart = jumped & ~backwards & placed & (dense_gap > 1)
    backwards_across, backwards_inside, apart_across, apart_inside = types
    for type_, mask, inside in ((backwards_across, backwards & across, False),
                                (backwards_inside, backwards & ~across, True),
                                (apart_across, apart & across, False),
                                (apart_inside, apart & ~across, True)):
        if type_ is None or not mask.any():
            continue
        out.cases(type_, process=rows["process"][mask],
                  offsets=pairs(rows["prev_offset"][mask], rows["offset"][mask]),
                  values=pairs(rows["prev_value"][mask], rows["value"][mask]),
                  evidence=singles(rows["op"][mask]) if inside
                  else pairs(rows["prev_op"][mask], rows["op"][mask]))


def findings(part: Partition, out: Findings) -> None:
    s, position = part.sends, part.sent.position
    known = (s.type != FAIL) & (position != NONE)
    rows = consecutive(part, s.process[known], s.op[known], s.pos[known], position[known],
                       s.value[known])
    has_prev = rows["has_prev"]
    backwards = has_prev & (rows["offset"] < rows["prev_offset"])
    # Subtraction, not `prev + 1`: offsets are non-negative, no overflow.
    jumped = has_prev & (rows["op"] == rows["prev_op"]) \
        & (rows["offset"] - rows["prev_offset"] > 1)
    report_pairs(part, out, rows, backwards, jumped,
                 ("nonmonotonic-send", "int-nonmonotonic-send", None, "int-send-skip"))


def check(found: Collected, summary: Summary) -> CheckResult:
    return family_result(found, FAMILY, TYPES)
