"""The history contract's rules over a whole block of events at once.

A block is an Arrow table of events (blocks.BLOCK, row i at line
`first_line + i`). The functions here flag the rows that break a rule, as
numpy masks, with column operations only. They find faults, they do not
describe them: the first flagged line goes to the exact validator
(reader.py), which names the field and what was expected, so both paths
report a fault in the same words. They flag a row only for what it and the
rows before it show, so on a valid prefix they flag nothing.

The rules are the reader's, derived from the same declarations
(schema.OPERATIONS' kinds, through `Kind.violations`); the per-process
discipline lives in pairing.py, beside the state it carries from block to
block, and the echo rule beside its exact twin (schema.check_same_request).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.history.schema import (
    CLIENT_FS, EVENT_TYPES, FS, NEMESIS_PROCESS, OPERATIONS, PHASES, codes, nulls,
)

INVOKE, OK, FAIL, INFO = (EVENT_TYPES.index(t) for t in ("invoke", "ok", "fail", "info"))
CRASH = FS.index("crash")
# No process has this id: what a null process reads as.
NO_PROCESS = NEMESIS_PROCESS - 1


@dataclass
class Envelope:
    """A block's envelope as numpy columns, computed once for every rule:
    names as their positions in EVENT_TYPES, FS and PHASES (-1: unknown or
    null; a null phase is `main`), a null number as -1 (no process: as
    NO_PROCESS)."""

    index: np.ndarray
    time: np.ndarray
    process: np.ndarray
    type: np.ndarray
    f: np.ndarray
    phase: np.ndarray
    error_given: np.ndarray   # an error other than null
    missing: np.ndarray       # a required envelope field is null

    @classmethod
    def of(cls, events: pa.Table) -> Envelope:
        def number(name: str, null: int) -> np.ndarray:
            return np.asarray(pc.fill_null(events[name], null), dtype=np.int64)

        # (A value missing is a client value that fits no shape, value_faults;
        # a nemesis event without one is not parsed by blocks.py.)
        missing = np.zeros(events.num_rows, dtype=bool)
        for name in ("index", "time", "process", "type", "f"):
            missing |= nulls(events[name])
        phase = events["phase"]
        return cls(
            index=number("index", -1), time=number("time", -1),
            process=number("process", NO_PROCESS),
            type=codes(events["type"], EVENT_TYPES), f=codes(events["f"], FS),
            phase=codes(pc.fill_null(phase, "main"), PHASES),
            error_given=np.asarray(events["error"].is_valid()),
            missing=missing)


def envelope_faults(env: Envelope, first_index: int, last_time: int) -> np.ndarray:
    """Rows whose envelope breaks a rule: the required fields present, the
    index sequence (first_index, first_index + 1, …), time never going back
    (from last_time), known types, an f that fits the process (nemesis fs
    for process -1, client fs for the others), known phases, `error` only
    on fail and info, nemesis completions info or fail, crashes info."""
    n = len(env.index)
    bad = env.missing.copy()
    bad |= env.index != np.arange(first_index, first_index + n)
    if n:
        before = np.concatenate([[last_time], np.maximum.accumulate(env.time)[:-1]])
        bad |= env.time < before
    nemesis = env.process == NEMESIS_PROCESS
    bad |= (env.type < 0) | (env.process < NEMESIS_PROCESS)
    # Nemesis fs come after the client ones in FS.
    bad |= np.where(nemesis, env.f < len(CLIENT_FS), (env.f < 0) | (env.f >= len(CLIENT_FS)))
    bad |= env.phase < 0
    may_err = (env.type == FAIL) | (env.type == INFO)
    bad |= env.error_given & ~may_err
    completion = env.type != INVOKE
    bad |= nemesis & completion & ~may_err
    bad |= (env.f == CRASH) & completion & (env.type != INFO)
    return bad


def value_faults(env: Envelope, values: pa.StructArray) -> np.ndarray:
    """Client rows whose value fits neither shape it may have: the
    invocation's for an invocation; the completion's — or, for fail and
    info, the invocation's — for a completion. (Nemesis values are
    free-form objects, checked as they are parsed.) Each field's verdict
    under each kind is computed once over the whole block, then combined
    per f (Shape.invalid's memo)."""
    bad = np.zeros(len(values), dtype=bool)
    absent = nulls(values)
    memo: dict = {}
    invoke = env.type == INVOKE
    may_echo = (env.type == FAIL) | (env.type == INFO)
    for code, (asked, done) in enumerate(OPERATIONS.values()):
        rows = env.f == code
        if not rows.any():
            continue
        off_asked = asked.invalid(values, memo) | absent
        invoked = rows & invoke
        bad[invoked] = off_asked[invoked]
        completed = rows & ~invoke
        if completed.any():
            off_done = done.invalid(values, memo) | absent
            bad[completed] = (off_done & ~(may_echo & ~off_asked))[completed]
    return bad
