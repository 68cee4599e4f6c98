"""The sparse offset index of one segment: `<base offset>.index`.

One idea, Kafka's OffsetIndex: every `index.interval.bytes` of log, one
8-byte entry (relative offset int32, position int32, big-endian) maps the
last offset of a batch to the byte where that batch starts. A lookup takes
the greatest entry at or below the target and the segment scans forward
from its position to the batch whose last offset reaches the target; with
no entry the scan starts at byte 0. Entries are kept in memory (two int
arrays, 8 bytes an entry) and appended to the file as they are made.
"""

from __future__ import annotations

import bisect
import os
import struct
from array import array
from pathlib import Path

from reference_broker.log.file_io import write_all

ENTRY = struct.Struct(">ii")


class OffsetIndex:
    def __init__(self, path: Path, base_offset: int):
        self.path = path
        self.base_offset = base_offset
        self._offsets = array("i")  # relative to base_offset
        self._positions = array("i")
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    @classmethod
    def load(cls, path: Path, base_offset: int, log_size: int) -> OffsetIndex | None:
        """The index in `path`, or None when it is missing or fails the
        sanity check (OffsetIndex.sanityCheck: whole entries; here also
        increasing offsets and positions inside the log), so the caller
        rebuilds it from the log."""
        if not path.exists():
            return None
        data = path.read_bytes()
        if len(data) % ENTRY.size:
            return None
        index = cls(path, base_offset)
        last_offset = last_position = -1
        for relative_offset, position in ENTRY.iter_unpack(data):
            if relative_offset <= last_offset or position <= last_position or position >= log_size:
                index.close()
                return None
            index._offsets.append(relative_offset)
            index._positions.append(position)
            last_offset, last_position = relative_offset, position
        return index

    def __len__(self) -> int:
        return len(self._offsets)

    def append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        write_all(self._fd, ENTRY.pack(relative, position))
        self._offsets.append(relative)
        self._positions.append(position)

    def lookup(self, offset: int) -> int:
        """Position of the greatest entry whose offset is <= `offset`, else 0."""
        slot = bisect.bisect_right(self._offsets, offset - self.base_offset) - 1
        return self._positions[slot] if slot >= 0 else 0

    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    def truncate_to_position(self, position: int) -> None:
        """Drop the entries of batches at or after byte `position` of the log."""
        keep = bisect.bisect_left(self._positions, position)
        if keep == len(self._positions):
            return
        del self._offsets[keep:]
        del self._positions[keep:]
        os.ftruncate(self._fd, keep * ENTRY.size)

    def rebuild(self, entries: list[tuple[int, int]]) -> None:
        """Replace every entry with `entries` ((offset, position) pairs), one write."""
        self._offsets = array("i", (offset - self.base_offset for offset, _ in entries))
        self._positions = array("i", (position for _, position in entries))
        os.ftruncate(self._fd, 0)
        data = b"".join(ENTRY.pack(relative, position)
                        for relative, position in zip(self._offsets, self._positions))
        write_all(self._fd, data)

    def flush(self) -> None:
        os.fsync(self._fd)

    def close(self) -> None:
        os.close(self._fd)
