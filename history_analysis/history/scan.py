"""The fast pass over a history: every rule of the contract, one block at a time.

Each block of whole lines is parsed once (blocks.py), checked as columns
(vectorised.py) and paired with its completions (pairing.py), which carries
the outstanding invocations to the next block; the paired operations (schema
pairing.PAIRED) go to a sink — ingest writes them as tables. The next block
is parsed (by Arrow, on every core, without the GIL) while this one is
checked, so memory holds two blocks, whatever the size of the file.

The fast pass flags lines; the exact validator (reader.py) describes them.
When a block breaks a rule, or Arrow refuses it, the exact validator
re-reads that block alone from the state carried into it, and raises the
HistoryError `HistoryReader` would raise on the whole file: the same line,
field and words. Should the two disagree on which line is the first bad
one, that is a bug of the fast pass: `Disagreement`, and nothing is written.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa

from history_analysis.history.blocks import Block, parse, parse_exactly, read_blocks
from history_analysis.history.outcome import (
    HistoryError, HistoryReport, TruncatedLine, Unmatched,
)
from history_analysis.history.pairing import Carry, pair, unmatched
from history_analysis.history.reader import Outstanding, ReaderState, check_lines
from history_analysis.history.strict_json import loads
from history_analysis.history.vectorised import Envelope, envelope_faults, value_faults

# Bytes of history per block: measured on a 1M-event history (182 MB),
# 16 MB blocks ingest as fast as 64 MB ones and faster than 4 MB ones;
# memory holds about ten times a block (Arrow's tables of two blocks).
BLOCK_BYTES = 16 << 20

Sink = Callable[[pa.Table], None]


class Disagreement(HistoryError):
    """The fast pass and the exact validator disagree on a history: a bug
    of the fast pass, to be reported; nothing is written."""


def scan(path: str | os.PathLike, sink: Sink) -> HistoryReport:
    """Validate the history at `path` by every rule, handing each block's
    paired operations to `sink`, and the unmatched invocations last (as
    `info` operations of unknown time); the report, or HistoryError at the
    first broken rule."""
    path = os.fspath(path)
    try:
        handle = open(path, "rb")
    except OSError as e:
        raise HistoryError(path, 0, f"cannot read the history: {e.strerror}") from None
    with handle:
        return scan_blocks(path, read_blocks(handle, BLOCK_BYTES), sink)


def validate_history(path: str | os.PathLike) -> HistoryReport:
    """Validate a whole history by every rule: its report, or HistoryError
    at the first broken rule, as `HistoryReader` would raise it. The fast
    pass without a sink: no tables are written."""
    return scan(path, lambda operations: None)


def scan_blocks(path: str, blocks: Iterable[Block], sink: Sink) -> HistoryReport:
    report = HistoryReport(path)
    carry = Carry()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="parse") as parser:
        pending = None
        for block in _complete_lines(blocks, report):
            parsing = parser.submit(parse, block)
            if pending is not None:
                carry = _check(path, *pending, carry, report, sink)
            pending = (block, parsing)
        if pending is not None:
            carry = _check(path, *pending, carry, report, sink)
    left = unmatched(carry)
    if left.num_rows:
        sink(left)
    report.unmatched = [Unmatched(line, index, process, f) for line, index, process, f in zip(
        carry.lines, *(carry.outstanding[c].to_pylist() for c in ("index", "process", "f")))]
    return report


def _complete_lines(blocks: Iterable[Block], report: HistoryReport) -> Iterator[Block]:
    """The blocks but a last line without its newline that does not parse:
    a writer killed mid-line, which the contract tolerates (reported)."""
    for block in blocks:
        if not block.data.endswith(b"\n"):          # the last line, alone
            try:
                loads(block.data.decode())
            except (ValueError, RecursionError):
                report.truncated = TruncatedLine(block.first_line, len(block.data))
                return
        yield block


def _check(path: str, block: Block, parsing, carry: Carry, report: HistoryReport,
           sink: Sink) -> Carry:
    """Validate one block, pair it, hand its operations to the sink."""
    events = parsing.result()
    if events is None:                         # Arrow refused it: find out why
        _exactly(path, block, carry, flagged=None)
        try:
            events = parse_exactly(block)
        except ValueError as e:
            raise HistoryError(path, block.first_line, str(e)) from None
    env = Envelope.of(events)
    faults = envelope_faults(env, carry.next_index, carry.last_time)
    faults |= value_faults(env, events["value"].combine_chunks())
    paired = pair(events, env, carry, block)
    faults |= paired.faults
    if faults.any():
        _exactly(path, block, carry, flagged=block.first_line + int(np.argmax(faults)))
    report.events += events.num_rows
    report.operations.update(paired.completed)
    sink(paired.operations)
    return paired.carry


def _exactly(path: str, block: Block, carry: Carry, flagged: int | None) -> None:
    """The exact validator's verdict on a block the fast pass flagged (at
    line `flagged`) or could not parse (None): raises its HistoryError.
    Returns only if it finds nothing wrong where Arrow refused the block."""
    lines = block.text().split(b"\n")
    lines = [line + b"\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])
    try:
        for _ in check_lines(path, lines, block.first_line, _reader_state(carry)):
            pass
    except HistoryError as e:
        if flagged is not None and e.line != flagged:
            raise Disagreement(path, e.line, f"{e.message} (but the fast validation "
                               f"flagged line {flagged} first: a bug of ingest, please "
                               "report it)") from None
        raise
    if flagged is not None:
        raise Disagreement(path, flagged, "the fast validation flagged this line, the exact "
                           "validator passes it: a bug of ingest, please report it")


def _reader_state(carry: Carry) -> ReaderState:
    """The state carried into a block, as the exact validator keeps it: its
    outstanding invocations parsed again from their lines as written."""
    outstanding = {}
    for line, raw in zip(carry.lines, carry.raw):
        event = loads(raw.decode())
        outstanding[event["process"]] = Outstanding(
            line, event["index"], event["f"], event["value"], event.get("phase") or "main")
    return ReaderState(carry.next_index, carry.last_time, outstanding,
                       set(carry.ended.tolist()))
