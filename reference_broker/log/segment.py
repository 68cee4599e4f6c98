"""One log segment: `<base offset, 20 digits>.log` and its sparse `.index`.

One idea, Kafka's LogSegment: batches are appended as bytes and read back
as bytes; a read finds its start through the sparse index plus a short scan
of batch headers, and never looks inside a batch. Recovery re-reads the
whole segment, checks every batch (complete, magic 2, CRC, offsets
increasing) and cuts the file at the first one that fails
(LogSegment.recover), rebuilding the index on the way.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from reference_broker.log.batch import (
    HEADER_SIZE, BatchHeader, CorruptRecordError, batch_prefix, check_crc, read_header,
)
from reference_broker.log.file_io import write_all_at
from reference_broker.log.leader_epoch_cache import LeaderEpochCache
from reference_broker.log.offset_index import OffsetIndex

log = logging.getLogger(__name__)

MAX_RELATIVE_OFFSET = 2**31 - 1  # index entries hold offsets as int32 deltas
_WALK_CHUNK = 16 * 1024  # header walks: a few index intervals per read
_SCAN_CHUNK = 1024 * 1024  # full scans (recovery, rebuilds)


def file_prefix(base_offset: int) -> str:
    """LogFileUtils.filenamePrefixFromOffset: 20 digits, zero-padded."""
    return f"{base_offset:020d}"


class LogSegment:
    def __init__(self, directory: Path, base_offset: int, index_interval_bytes: int):
        self.base_offset = base_offset
        self.log_path = directory / f"{file_prefix(base_offset)}.log"
        self.index_path = directory / f"{file_prefix(base_offset)}.index"
        # Positioned writes (no O_APPEND): an append lands at self.size
        # whatever a failed one left past it.
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        self._index_interval_bytes = index_interval_bytes
        self._index: OffsetIndex | None = None  # loaded on first use (Kafka's LazyIndex)
        self._bytes_since_last_index_entry = 0
        self._max_timestamp: int | None = None  # largest batch max timestamp, known once walked

    @property
    def index(self) -> OffsetIndex:
        if self._index is None:
            self._index = OffsetIndex.load(self.index_path, self.base_offset, self.size)
            if self._index is None:
                self._index = OffsetIndex(self.index_path, self.base_offset)
                self._index.rebuild(self._index_entries())
            self._bytes_since_last_index_entry = self.size - self._index.last_position()
        return self._index

    def _index_entries(self) -> list[tuple[int, int]]:
        """Index entries for the batches already in the file, as appends made them."""
        entries = []
        last_entry_position = 0
        for position, header in self.walk(0):
            if position - last_entry_position > self._index_interval_bytes:
                entries.append((header.last_offset, position))
                last_entry_position = position
        return entries

    def append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        """Write `data` (exactly the batches `headers` describe, offsets
        assigned) at the end; an index entry for the first batch written
        after more than index.interval.bytes since the last entry
        (LogSegment.append). A failed write changes nothing that counts."""
        index = self.index
        entries = []
        position = self.size
        since = self._bytes_since_last_index_entry
        max_timestamp = -1
        for header in headers:
            if since > self._index_interval_bytes:
                entries.append((header.last_offset, position))
                since = 0
            since += header.size
            position += header.size
            max_timestamp = max(max_timestamp, header.max_timestamp)
        try:
            write_all_at(self._fd, data, self.size)
        except OSError:
            # Nothing past self.size counts: the next append writes over
            # whatever part of this one landed, and recovery cuts a torn
            # tail. Cutting it off now only tidies, and fails as the write did.
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self.size)
            raise
        self.size = position
        # The index is sparse: an entry a disk error kept out costs a longer
        # scan, not a wrong answer.
        with contextlib.suppress(OSError):
            for offset, entry_position in entries:
                index.append(offset, entry_position)
        self._bytes_since_last_index_entry = since
        if self._max_timestamp is not None:
            self._max_timestamp = max(self._max_timestamp, max_timestamp)

    def max_timestamp(self) -> int:
        """The largest batch max timestamp here, -1 when empty (Kafka's
        LogSegment.maxTimestampSoFar): lets a timestamp search skip segments."""
        if self._max_timestamp is None:
            self._max_timestamp = max((header.max_timestamp for _, header in self.walk(0)), default=-1)
        return self._max_timestamp

    def walk(self, position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of every batch from `position` on, reading
        headers only: batches larger than a chunk are jumped over."""
        end = self.size
        while position < end:
            chunk = os.pread(self._fd, min(_WALK_CHUNK, end - position), position)
            at = 0
            while at + HEADER_SIZE <= len(chunk):
                header = read_header(chunk, at, position + at)
                yield position + at, header
                at += header.size
            if at == 0:
                raise CorruptRecordError(
                    f"{self.log_path}: torn record batch header at byte {position}")
            position += at

    def scan(self, position: int = 0, verify_crc: bool = False
             ) -> Iterator[tuple[int, BatchHeader, memoryview]]:
        """(position, header, bytes) of every batch from `position` on.
        Raises CorruptRecordError at the first batch that is torn or
        invalid (or fails its CRC, with `verify_crc`)."""
        end = self.size
        while position < end:
            chunk = memoryview(os.pread(self._fd, min(_SCAN_CHUNK, end - position), position))
            at = 0
            header = None
            while len(chunk) - at >= HEADER_SIZE:
                header = read_header(chunk, at, position + at)
                if header.size > len(chunk) - at:
                    break
                batch = chunk[at:at + header.size]
                if verify_crc:
                    check_crc(batch, header, position + at)
                yield position + at, header, batch
                at += header.size
            if at == 0:
                # One batch larger than a chunk, or the torn tail of the file.
                if header is None or position + header.size > end:
                    raise CorruptRecordError(
                        f"{self.log_path}: incomplete record batch at byte {position}, "
                        f"{end - position} bytes to the end of the segment")
                batch = memoryview(os.pread(self._fd, header.size, position))
                if verify_crc:
                    check_crc(batch, header, position)
                yield position, header, batch
                at = header.size
            position += at

    def locate(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >=
        `offset` (LogSegment.translateOffset), None if there is none here."""
        for position, header in self.walk(self.index.lookup(offset)):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(self, offset: int, max_bytes: int, upper_bound: int | None) -> bytes | None:
        """Whole batches from the one holding `offset`: at most `max_bytes`
        except that the first batch always comes whole (KIP-74), none whose
        base offset is >= `upper_bound`. None if no batch here reaches `offset`."""
        found = self.locate(offset)
        if found is None:
            return None
        position, first = found
        if upper_bound is not None and first.base_offset >= upper_bound:
            return b""
        data = os.pread(self._fd, min(max(max_bytes, first.size), self.size - position), position)
        end = first.size
        while end + HEADER_SIZE <= len(data):
            base_offset, size = batch_prefix(data, end)
            if end + size > len(data) or (upper_bound is not None and base_offset >= upper_bound):
                break
            end += size
        return data if end == len(data) else data[:end]

    def read_batch(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def recover(self, epochs: LeaderEpochCache) -> int:
        """Check every batch, cut the file at the first bad one, rebuild the
        index and give new leader epochs to the cache (LogSegment.recover).
        Returns the next offset after the last good batch."""
        entries = []
        valid_bytes = 0
        last_entry_position = 0
        next_offset = self.base_offset
        max_timestamp = -1
        try:
            for position, header, _ in self.scan(0, verify_crc=True):
                if header.base_offset < next_offset or header.last_offset < header.base_offset \
                        or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise CorruptRecordError(
                        f"record batch at byte {position}: offsets {header.base_offset}.."
                        f"{header.last_offset} do not follow {next_offset - 1} in a segment "
                        f"based at {self.base_offset}")
                if position - last_entry_position > self._index_interval_bytes:
                    entries.append((header.last_offset, position))
                    last_entry_position = position
                valid_bytes = position + header.size
                next_offset = header.last_offset + 1
                max_timestamp = max(max_timestamp, header.max_timestamp)
                epoch = header.partition_leader_epoch
                latest = epochs.latest_epoch()
                if epoch >= 0 and (latest is None or epoch > latest):
                    epochs.assign(epoch, header.base_offset)
        except CorruptRecordError as e:
            log.warning("recovery of %s: %s; truncating %d bytes at byte %d",
                        self.log_path, e, self.size - valid_bytes, valid_bytes)
        if valid_bytes < self.size:
            os.ftruncate(self._fd, valid_bytes)
            self.size = valid_bytes
        self._max_timestamp = max_timestamp
        if self._index is None:
            self._index = OffsetIndex(self.index_path, self.base_offset)
        self._index.rebuild(entries)
        self._bytes_since_last_index_entry = valid_bytes - last_entry_position
        return next_offset

    def truncate_to(self, offset: int) -> int | None:
        """Cut the segment at the batch holding `offset` (or the first one
        after it), dropping that whole batch (LogSegment.truncateTo).
        Returns its base offset, None if nothing was cut."""
        found = self.locate(offset)
        if found is None:
            return None
        position, header = found
        os.ftruncate(self._fd, position)
        self.size = position
        self._max_timestamp = None
        self.index.truncate_to_position(position)
        self._bytes_since_last_index_entry = position - self.index.last_position()
        return header.base_offset

    def flush(self) -> None:
        os.fsync(self._fd)
        if self._index is not None:
            self._index.flush()

    def close(self) -> None:
        os.close(self._fd)
        if self._index is not None:
            self._index.close()

    def delete(self) -> None:
        self.close()
        self.log_path.unlink()
        self.index_path.unlink(missing_ok=True)
