"""The operation timeline, as Jepsen's `timeline.html` draws it: one column
per process (the nemesis first), one bar per operation from its
invocation to its completion, coloured by outcome, in history order (a
row per event, so overlapping operations are side by side).

At most MAX_OPERATIONS are drawn: those around the anomalies' evidence,
else around the faults, else the first ones; gaps in between are marked,
and the caption says how many were left out. Every text is escaped.
"""

from __future__ import annotations

from html import escape

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

MAX_OPERATIONS = 10_000
ROW_PX, COLUMN_PX = 3, 46


def choose(ops: pa.Table, around: list[int], budget: int) -> np.ndarray:
    """Positions (in ops, sorted by op_index) of the `budget` operations
    nearest (in history order) to those whose op_index is in `around`."""
    n = len(ops)
    if n <= budget:
        return np.arange(n)
    indexes = ops["op_index"].to_numpy()
    centres = np.unique(np.searchsorted(indexes, np.asarray(around, np.int64)).clip(0, n - 1))
    if not len(centres):
        return np.arange(budget)
    positions = np.arange(n)
    right = np.searchsorted(centres, positions).clip(0, len(centres) - 1)
    left = (right - 1).clip(0)
    distance = np.minimum(np.abs(positions - centres[right]), np.abs(positions - centres[left]))
    return np.sort(np.argsort(distance, kind="stable")[:budget])


def render(ops: pa.Table, around: list[int], budget: int = MAX_OPERATIONS) -> tuple[str, str]:
    """(html, caption) of the timeline; ops: the ops table (op_index,
    invoke_index, process, type, f, error, invoke_time, time), in any order."""
    ops = ops.sort_by("op_index")
    positions = choose(ops, around, budget)
    shown = ops.take(pa.array(positions, pa.int64())) if len(positions) else ops.slice(0, 0)
    rows = shown.to_pylist()
    processes = sorted({r["process"] for r in rows})
    column = {p: i for i, p in enumerate(processes)}
    # Rows: the events of the shown operations, in index order, gaps kept
    # as one marker row each.
    events = sorted({i for r in rows for i in (r["invoke_index"], r["op_index"])})
    after_gap = {rows[k]["invoke_index"] for k in range(1, len(rows))
                 if positions[k] > positions[k - 1] + 1}
    row_of, y, gaps = {}, 0, []
    for event in events:
        if event in after_gap:
            gaps.append(y)
            y += 4
        row_of[event] = y
        y += 1
    bars = []
    for r in rows:
        top = row_of[r["invoke_index"]] * ROW_PX
        height = max(ROW_PX, (row_of[r["op_index"]] - row_of[r["invoke_index"]] + 1) * ROW_PX)
        when = "" if r["time"] is None else f", done {r['time']:.3f} s"
        title = (f"op {r['op_index']}: process {r['process']} {r['f']} {r['type']}, "
                 f"invoked {r['invoke_time']:.3f} s{when}"
                 + (f" — {r['error']}" if r["error"] else ""))
        bars.append(f'<div class="op {escape(r["type"])}" style="top:{top}px;left:'
                    f'{column[r["process"]] * COLUMN_PX}px;height:{height}px" '
                    f'title="{escape(title)}"></div>')
    marks = "".join(f'<div class="gap" style="top:{g * ROW_PX}px"></div>' for g in gaps)
    heads = "".join(f'<div class="head" style="left:{column[p] * COLUMN_PX}px">'
                    f'{"nemesis" if p == -1 else escape(str(p))}</div>' for p in processes)
    width = max(1, len(processes)) * COLUMN_PX
    body = (f'<div class="timeline-heads" style="width:{width}px">{heads}</div>'
            f'<div class="timeline" style="width:{width}px;height:{y * ROW_PX + 4}px">'
            f'{marks}{"".join(bars)}</div>')
    left = len(ops) - len(rows)
    caption = (f"{len(rows):,} operations of {len(ops):,}"
               + (f" (the {left:,} others are cut: shown are those around "
                  f"{'the anomalies' if around else 'the start'}; a dashed line marks a gap)"
                  if left else ""))
    return body, caption


def sample_centres(anomaly_evidence: list[int], fault_ops: list[int]) -> list[int]:
    """Where the timeline looks: the anomalies' evidence, else the faults."""
    return sorted(set(anomaly_evidence)) or sorted(set(fault_ops))


def nemesis_indexes(ops: pa.Table) -> list[int]:
    return ops.filter(pc.equal(ops["process"], -1))["op_index"].to_pylist()
