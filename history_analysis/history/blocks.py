"""A history file as blocks of whole lines, each parsed once into Arrow.

A block is read into a buffer of its own and parsed by Arrow's JSON reader
on every core with the types schema.py declares (`BLOCK`: the envelope,
`value` as schema.VALUE, and `value_json`), which refuses most type errors
by itself. Row i of a block is its line `first_line + i`.

Nemesis events (process -1) have free-form values no fixed Arrow type
holds. A regular expression finds their lines before Arrow sees the block;
Python's json parses them (there are few), their values are kept as JSON
text, and each is replaced in the buffer by `{}` padded to the same
length, so every row stays at its line.

`parse` returns None where the fast path cannot vouch for a block as the
exact validator would: Arrow refuses it, a line is blank (Arrow skips
those), a byte is not UTF-8 (Arrow does not check), or a nemesis line is
not what it seemed. The exact validator then names the fault; if it finds
none (a valid line Arrow does not take: a key written twice, an escaped
key), `parse_exactly` reads the block with Python's json instead.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import BinaryIO, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from history_analysis.history.schema import EVENT, EVENT_FIELDS, INT64_MAX, INT64_MIN
from history_analysis.history.strict_json import loads

BLOCK = EVENT.append(pa.field("value_json", pa.string()))

# A nemesis line: process -1, however the writer spaced it (JSON whitespace;
# a line holds no newline). Measured on a 182 MB history: 0.16 s, against
# 0.07 s for a literal search of the compact spelling only. A line this
# misses (an escaped key) is one Arrow refuses or `parse` sees as process -1.
_NEMESIS_LINE = re.compile(rb'"process"[ \t\r]*:[ \t\r]*-1(?![0-9.eE])')
_BOM = b"\xef\xbb\xbf"     # Arrow skips it at the start of a buffer; JSON has none
_PARSE = pj.ParseOptions(explicit_schema=EVENT, unexpected_field_behavior="error")
# Arrow splits a block into chunks of this size, parsed in parallel.
_READ = pj.ReadOptions(use_threads=True, block_size=1 << 20)
# The envelope's JSON types, for nemesis lines parsed by Python (`bool` is
# an int to Python, not to JSON).
_ENVELOPE_TYPES = {"index": int, "time": int, "process": int, "type": str, "f": str,
                   "error": str, "phase": str}


@dataclass
class Block:
    """Whole lines of a history: `lines` of them from `first_line`, the last
    maybe without its newline (the end of the file)."""

    first_line: int
    data: bytearray
    lines: int
    # Nemesis lines blanked for Arrow: (start, end) in data -> the line.
    nemesis: dict[tuple[int, int], bytes] = field(default_factory=dict)

    def text(self) -> bytes:
        """The block as written."""
        text = bytearray(self.data)
        for (start, end), line in self.nemesis.items():
            text[start:end] = line
        return bytes(text)

    def raw_lines(self, rows) -> list[bytes]:
        """The lines at these rows (ascending) as written. Walks back from
        the end: the rows asked for are invocations still outstanding at the
        end of the block, which are most often among its last lines."""
        data, found = self.data, {}
        end, row = len(data), self.lines - 1
        for target in sorted(set(int(r) for r in rows), reverse=True):
            start = data.rfind(b"\n", 0, end - 1) + 1
            while row > target:
                end, row = start, row - 1
                start = data.rfind(b"\n", 0, end - 1) + 1
            found[target] = self.nemesis.get((start, end)) or bytes(data[start:end])
        return [found[int(r)] for r in rows]


def read_blocks(handle: BinaryIO, block_bytes: int) -> Iterator[Block]:
    """The file as blocks of about `block_bytes` of whole lines (a longer
    line makes a longer block). A last line without its newline comes
    alone, as the last block."""
    first_line, rest = 1, b""
    while True:
        data = bytearray(len(rest) + block_bytes)
        data[:len(rest)] = rest
        got = handle.readinto(memoryview(data)[len(rest):])
        end = len(rest) + got
        if got == 0:
            if rest:
                yield Block(first_line, bytearray(rest), 1)
            return
        cut = data.rfind(b"\n", 0, end) + 1
        rest = bytes(data[cut:end])
        if cut == 0:
            continue
        del data[cut:]
        lines = data.count(b"\n")
        yield Block(first_line, data, lines)
        first_line += lines


def parse(block: Block) -> pa.Table | None:
    """The block as BLOCK rows, one per line; None if the fast path cannot
    vouch for it (the module's docstring)."""
    data = block.data
    if data.startswith(_BOM) or not data.isascii() and not _utf8(data):
        return None
    nemesis = _take_nemesis(block)
    if nemesis is None:
        return None
    try:
        events = pj.read_json(pa.BufferReader(pa.py_buffer(data)), read_options=_READ,
                              parse_options=_PARSE)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    if events.num_rows != block.lines:
        return None
    events = events.append_column("value_json", pa.nulls(events.num_rows, pa.string()))
    if nemesis:
        events = _with_nemesis(events.combine_chunks(), nemesis)
    # A nemesis line the expression missed (an escaped key) that Arrow read.
    if (pc.sum(pc.equal(events["process"], -1)).as_py() or 0) != len(nemesis):
        return None
    return events


def _utf8(data: bytearray) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


def _take_nemesis(block: Block) -> dict[int, dict] | None:
    """Parse the block's nemesis lines and blank them: row -> event (its
    value as JSON text); None if one is not a nemesis event that fits the
    envelope's types."""
    data = block.data
    events, row, counted = {}, 0, 0
    for match in list(_NEMESIS_LINE.finditer(data)):
        start = data.rfind(b"\n", 0, match.start()) + 1
        if start < counted:                  # the same line again
            continue
        end = data.find(b"\n", match.end())
        end = len(data) if end < 0 else end + 1
        row += data.count(b"\n", counted, start)
        line = bytes(data[start:end])
        try:
            event = loads(line.decode())
        except (ValueError, RecursionError):
            return None
        if not _fits_envelope(event):
            return None
        events[row] = {**event, "value": None,
                       "value_json": json.dumps(event["value"], separators=(",", ":"))}
        block.nemesis[(start, end)] = line
        width = end - start - (1 if line.endswith(b"\n") else 0)
        data[start:start + width] = b"{}" + b" " * (width - 2)
        counted = end
        row += 1
    return events


def _fits_envelope(event) -> bool:
    """A nemesis event as Arrow would have read it: an object of the
    envelope's fields with their JSON types, process -1, value an object."""
    if type(event) is not dict or event.get("process") != -1 or type(event.get("value")) \
            is not dict or not event.keys() <= EVENT_FIELDS.keys():
        return False
    for name, kind in _ENVELOPE_TYPES.items():
        value = event.get(name)
        if value is not None and (type(value) is not kind or kind is int
                                  and not INT64_MIN <= value <= INT64_MAX):
            return False
    return True


def _with_nemesis(events: pa.Table, nemesis: dict[int, dict]) -> pa.Table:
    """Put the nemesis events into their rows (Arrow read them as `{}`)."""
    rows = np.fromiter(nemesis, dtype=np.int64, count=len(nemesis))
    mask = np.zeros(events.num_rows, dtype=bool)
    mask[rows] = True
    mask = pa.array(mask)
    columns = []
    for field_ in BLOCK:
        column = events[field_.name]
        if field_.name != "value":
            values = pa.array([nemesis[r].get(field_.name) for r in rows.tolist()],
                              type=field_.type)
            column = pc.replace_with_mask(column.combine_chunks(), mask, values)
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=BLOCK)


def parse_exactly(block: Block) -> pa.Table:
    """A block the exact validator passed, parsed by Python's json as the
    exact validator reads it. Raises ValueError naming the first line Arrow
    cannot hold (a lone surrogate in a string)."""
    rows = []
    for line in block.text().split(b"\n")[:block.lines]:
        event = loads(line.decode())
        if event["process"] == -1:
            event = {**event, "value": None,
                     "value_json": json.dumps(event["value"], separators=(",", ":"))}
        rows.append(event)
    try:
        return pa.Table.from_pylist(rows, schema=BLOCK)
    except (pa.ArrowException, UnicodeError):
        for i, row in enumerate(rows):
            try:
                pa.Table.from_pylist([row], schema=BLOCK)
            except (pa.ArrowException, UnicodeError) as e:
                raise ValueError(f"line {block.first_line + i}: Arrow cannot hold this "
                                 f"event ({e})") from None
        raise
