"""Pairing invocations with their completions, a block of events at a time.

A process has one operation outstanding at a time, so an invocation's
completion is the next event of the same process. Sorted stably by
process, each completion directly follows its invocation: one sort pairs a
whole block, with the invocations still outstanding from earlier blocks
(`Carry`) put in front. The same order shows the per-process discipline the
contract asks for — no second invocation before a completion, no
completion without an invocation of the same f and phase, nothing after an
`info` completion ended a client process — and each completion next to
what it must repeat of its invocation (schema.same_request_violations), as
flags on rows, which the exact validator then describes.

The sort is by position, never by the `index` a line claims: a line with a
wrong index is flagged itself, and must not move the rows before it.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.history.blocks import BLOCK, Block
from history_analysis.history.schema import (
    EVENT_TYPES, FS, NEMESIS_PROCESS, VALUE, same_request_violations,
)
from history_analysis.history.vectorised import INFO, INVOKE, Envelope

# Every operation's envelope: the first columns of every table
# (history_analysis/tables.py) and of PAIRED.
OP_COLUMNS = (
    ("op_index", pa.int64()), ("invoke_index", pa.int64()), ("invoke_time", pa.int64()),
    ("time", pa.int64()), ("process", pa.int64()), ("type", pa.string()),
    ("phase", pa.string()),
)

# One row per operation, as pairing produces it: the invocation's value
# (`asked`) and the completion's (`done`, null when none was recorded);
# nemesis values are kept as their JSON text.
PAIRED = pa.schema([*OP_COLUMNS, ("f", pa.string()), ("error", pa.string()),
                    ("asked", VALUE), ("done", VALUE), ("value_json", pa.string())])


@dataclass
class Carry:
    """What one block leaves to the next: where the index and the clock
    are, the invocations still outstanding (BLOCK rows, with their lines as
    written, for the exact validator) and the processes an `info`
    completion ended."""

    next_index: int = 0
    last_time: int = 0
    outstanding: pa.Table = field(default_factory=BLOCK.empty_table)
    lines: list[int] = field(default_factory=list)
    raw: list[bytes] = field(default_factory=list)
    ended: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))


@dataclass
class Paired:
    faults: np.ndarray      # per row of the block: breaks the discipline or the echo rule
    operations: pa.Table    # PAIRED: the operations the block completed, in its order
    carry: Carry
    completed: Counter      # (f, type) -> how many of those operations


def pair(events: pa.Table, env: Envelope, carry: Carry, block: Block) -> Paired:
    """Pair a block's events (BLOCK rows, in file order, `env` their
    envelope) with each other and with the invocations carried in."""
    held = carry.outstanding.num_rows
    before = Envelope.of(carry.outstanding)
    process = np.concatenate([before.process, env.process])
    type_ = np.concatenate([before.type, env.type])
    f = np.concatenate([before.f, env.f])
    phase = np.concatenate([before.phase, env.phase])
    by = np.argsort(process, kind="stable")
    p, t, f_, ph = process[by], type_[by], f[by], phase[by]
    n = len(by)
    invoke = t == INVOKE
    first = np.ones(n, dtype=bool)
    first[1:] = p[1:] != p[:-1]
    after_invoke = np.concatenate([[False], invoke[:-1]]) & ~first
    after_info = np.concatenate([[False], t[:-1] == INFO]) & ~first
    client = p != NEMESIS_PROCESS
    # An invocation: nothing outstanding, the process not ended.
    faults = invoke & (after_invoke | client & after_info
                       | first & np.isin(p, carry.ended))
    # A completion: right after its own invocation, of the same f and phase.
    same = np.concatenate([[False], (f_[1:] == f_[:-1]) & (ph[1:] == ph[:-1])])
    # A line without a known type or f (the envelope rules flag it) completes nothing.
    completes = ~invoke & after_invoke & same & (t >= 0) & (f_ >= 0)
    faults |= ~invoke & ~completes

    done_at = np.flatnonzero(completes)
    done_at = done_at[np.argsort(by[done_at], kind="stable")]      # in history order
    both = pa.concat_tables([carry.outstanding, events])
    operations = _operations(both, by[done_at - 1], by[done_at])
    echo = same_request_violations(f_[done_at], operations["asked"].combine_chunks(),
                                   operations["done"].combine_chunks())
    faults[done_at[echo]] = True
    by_row = np.zeros(n, dtype=bool)
    by_row[by] = faults

    still = np.sort(by[invoke & np.append(first[1:], True)])        # last of its process
    from_block = still[still >= held] - held
    raw = dict(zip(from_block.tolist(), block.raw_lines(from_block)))
    ended = np.union1d(carry.ended, p[client & (t == INFO)])
    times = env.time
    next_carry = Carry(
        next_index=carry.next_index + events.num_rows,
        last_time=int(times[-1]) if len(times) else carry.last_time,
        outstanding=both.take(pa.array(still, type=pa.int64())).combine_chunks(),
        lines=[carry.lines[r] if r < held else block.first_line + r - held
               for r in still.tolist()],
        raw=[carry.raw[r] if r < held else raw[r - held] for r in still.tolist()],
        ended=ended)
    kinds = np.bincount(f_[done_at] * len(EVENT_TYPES) + t[done_at],
                        minlength=len(FS) * len(EVENT_TYPES))
    completed = Counter({(FS[k // len(EVENT_TYPES)], EVENT_TYPES[k % len(EVENT_TYPES)]): int(c)
                         for k, c in enumerate(kinds) if c})
    return Paired(by_row[held:], operations, next_carry, completed)


def unmatched(carry: Carry) -> pa.Table:
    """The invocations never completed, as `info` operations of unknown time."""
    return _operations(carry.outstanding, np.arange(carry.outstanding.num_rows), None)


def _operations(events: pa.Table, asked: np.ndarray, done: np.ndarray | None) -> pa.Table:
    """PAIRED rows: each invocation at `asked` with its completion at `done`
    (None: no completion)."""
    def taken(rows: np.ndarray, *names: str) -> dict:
        at = pa.array(rows, type=pa.int64())
        return {name: events[name].take(at) for name in names}

    inv = taken(asked, "index", "time", "process", "phase", "f", "value", "value_json")
    phase = pc.fill_null(inv["phase"], "main")
    if done is None:
        n = len(asked)
        return pa.table({
            "op_index": inv["index"], "invoke_index": inv["index"],
            "invoke_time": inv["time"], "time": pa.nulls(n, pa.int64()),
            "process": inv["process"], "type": pa.repeat(pa.scalar("info"), n),
            "phase": phase, "f": inv["f"], "error": pa.nulls(n, pa.string()),
            "asked": inv["value"], "done": pa.nulls(n, inv["value"].type),
            "value_json": inv["value_json"],
        }, schema=PAIRED)
    com = taken(done, "index", "time", "type", "error", "value", "value_json")
    return pa.table({
        "op_index": com["index"], "invoke_index": inv["index"], "invoke_time": inv["time"],
        "time": com["time"], "process": inv["process"], "type": com["type"],
        "phase": phase, "f": inv["f"], "error": com["error"],
        "asked": inv["value"], "done": com["value"], "value_json": com["value_json"],
    }, schema=PAIRED)
