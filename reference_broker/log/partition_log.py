"""The log of one partition replica: segments, leader epochs, flush policy.

One idea, Kafka's UnifiedLog/LocalLog over a directory: an append-only
sequence of segments (the last one active), where the leader assigns
offsets and its epoch to incoming batches without re-encoding them, a
follower appends the leader's batches as they are, and every append moves
the log end offset (LEO). Opening the directory recovers it: the active
segment is checked batch by batch and cut at the first torn or corrupt one,
and the leader epoch cache drops entries at or past the recovered LEO
(LogLoader). No fsync on the write path unless the flush policy asks.
"""

from __future__ import annotations

import bisect
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from reference_broker.log.batch import BatchHeader, assign_offsets, first_record_at_or_after, parse_batches
from reference_broker.log.file_io import fsync_directory
from reference_broker.log.leader_epoch_cache import CHECKPOINT_FILE, LeaderEpochCache
from reference_broker.log.segment import MAX_RELATIVE_OFFSET, LogSegment

log = logging.getLogger(__name__)

_SEGMENT_NAME_DIGITS = 20


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1 << 30           # segment.bytes
    index_interval_bytes: int = 4096       # index.interval.bytes
    flush_messages: int | None = None      # flush.messages (None = never by count)
    flush_ms: int | None = None            # flush.ms (None = never by time)

    def __post_init__(self) -> None:
        if not 0 < self.segment_bytes <= MAX_RELATIVE_OFFSET:
            raise ValueError(f"segment_bytes={self.segment_bytes!r}: must be in 1..{MAX_RELATIVE_OFFSET} "
                             "(positions in the index are int32)")
        if self.index_interval_bytes < 0:
            raise ValueError(f"index_interval_bytes={self.index_interval_bytes!r}: must be >= 0")
        for name in ("flush_messages", "flush_ms"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{name}={value!r}: must be >= 0, or None to never flush by it")


@dataclass(frozen=True)
class AppendInfo:
    """What an append wrote: offsets -1 when there were no batches."""
    first_offset: int
    last_offset: int
    batches: list[BatchHeader]  # headers AFTER offsets were assigned


class OffsetOutOfRange(Exception):
    """A read outside [log_start_offset, log_end_offset] -> OFFSET_OUT_OF_RANGE."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int):
        super().__init__(f"offset {offset} is outside the log [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


class UnexpectedAppendOffset(ValueError):
    """A follower append whose offsets go backwards (Kafka's
    UnexpectedAppendOffsetException / OffsetsOutOfOrderException)."""


class PartitionLog:
    def __init__(self, directory: Path, config: LogConfig, segments: list[LogSegment],
                 epochs: LeaderEpochCache, log_end_offset: int):
        self.directory = directory
        self.config = config
        self._segments = segments
        self._bases = [segment.base_offset for segment in segments]
        self._epochs = epochs
        self._log_end_offset = log_end_offset
        self._recovery_point = log_end_offset  # Kafka: everything below it was flushed
        self._unflushed: set[LogSegment] = set()
        self._directory_dirty = False
        self._last_flush = time.monotonic()

    @classmethod
    def open(cls, directory: Path, config: LogConfig) -> PartitionLog:
        """Open the log in `directory`, creating it, or recovering it after
        a crash: the active segment is checked and cut at its first bad batch."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"{CHECKPOINT_FILE}.tmp").unlink(missing_ok=True)
        bases = sorted(int(path.stem) for path in directory.glob("*.log")
                       if len(path.stem) == _SEGMENT_NAME_DIGITS and path.stem.isdigit())
        for index_path in directory.glob("*.index"):
            if index_path.stem.isdigit() and int(index_path.stem) not in bases:
                index_path.unlink()
        epochs = LeaderEpochCache(directory / CHECKPOINT_FILE)
        segments = [LogSegment(directory, base, config.index_interval_bytes) for base in bases or [0]]
        log_end_offset = segments[-1].recover(epochs)
        epochs.truncate_from_end(log_end_offset)
        log = cls(directory, config, segments, epochs, log_end_offset)
        log._directory_dirty = not bases
        return log

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        return self._log_end_offset

    def append_as_leader(self, records: bytes | bytearray | memoryview, leader_epoch: int,
                         headers: list[BatchHeader] | None = None) -> AppendInfo:
        """Append a producer's batches: offsets from the LEO and
        `leader_epoch` are stamped into them, the rest is written as
        received. `headers`, when given, are parse_batches(records) from the
        caller (spares a second CRC pass); otherwise the records are parsed
        here and CorruptRecordError means nothing was appended."""
        if headers is None:
            headers = parse_batches(records)
        if not headers:
            return AppendInfo(-1, -1, [])
        buffer = bytearray(records)
        stamped = assign_offsets(buffer, headers, self._log_end_offset, leader_epoch)
        self._append(buffer, stamped)
        return AppendInfo(stamped[0].base_offset, stamped[-1].last_offset, stamped)

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo:
        """Append the leader's batches with their offsets and epochs: they
        must start at or after the LEO and increase (UnifiedLog.appendAsFollower)."""
        headers = parse_batches(records)
        if not headers:
            return AppendInfo(-1, -1, [])
        next_offset = self._log_end_offset
        for header in headers:
            if header.base_offset < next_offset or header.last_offset < header.base_offset:
                raise UnexpectedAppendOffset(
                    f"follower append: batch at offsets {header.base_offset}..{header.last_offset} "
                    f"does not follow offset {next_offset - 1} (log end offset {self._log_end_offset})")
            next_offset = header.last_offset + 1
        self._append(records, headers)
        return AppendInfo(headers[0].base_offset, headers[-1].last_offset, headers)

    def _append(self, data: bytes | bytearray | memoryview, headers: list[BatchHeader]) -> None:
        first_offset = headers[0].base_offset
        last_offset = headers[-1].last_offset
        active = self._segments[-1]
        # LogSegment.shouldRoll: the append would overflow segment.bytes, or
        # its offsets the int32 deltas of the index. Roll at the append's first offset.
        if active.size > 0 and (active.size + len(data) > self.config.segment_bytes
                                or last_offset - active.base_offset > MAX_RELATIVE_OFFSET):
            # Recovery re-assigns only the active segment's epochs: none may
            # be pending when it stops being active (leader_epoch_cache.py).
            self._epochs.checkpoint()
            active = self._roll(first_offset)
        active.append(data, headers)        # a failure changes nothing
        self._unflushed.add(active)
        for header in headers:
            # UnifiedLog.append: maybeAssignEpochStartOffset for every v2 batch.
            if header.partition_leader_epoch >= 0:
                self._epochs.assign(header.partition_leader_epoch, header.base_offset)
        self._log_end_offset = last_offset + 1
        self._maybe_flush()

    def _roll(self, base_offset: int) -> LogSegment:
        segment = LogSegment(self.directory, base_offset, self.config.index_interval_bytes)
        self._segments.append(segment)
        self._bases.append(base_offset)
        self._directory_dirty = True
        return segment

    def _maybe_flush(self) -> None:
        # UnifiedLog.append: flush when unflushedMessages (LEO - recovery
        # point) reaches flush.messages; flush.ms is Kafka's scheduler check,
        # made here at append time.
        # The append stands whatever a flush does: one that fails (a disk
        # error) leaves the recovery point where it was, to the next append.
        flush_messages, flush_ms = self.config.flush_messages, self.config.flush_ms
        due = (flush_messages is not None
               and self._log_end_offset - self._recovery_point >= flush_messages) \
            or (flush_ms is not None and (time.monotonic() - self._last_flush) * 1000 >= flush_ms)
        if due:
            try:
                self.flush()
            except OSError as e:
                log.warning("%s: flush failed, tried again at the next append: %s",
                            self.directory, e)

    def read(self, offset: int, max_bytes: int, upper_bound: int | None = None) -> bytes:
        """Whole batches from the one holding `offset`, from one segment:
        <= `max_bytes` except that the first batch always comes whole
        (KIP-74), none whose base offset is >= `upper_bound` (the high
        watermark for consumers). b"" at the end."""
        if max_bytes < 0:
            raise ValueError(f"max_bytes={max_bytes!r}: must be >= 0")
        if offset < self.log_start_offset or offset > self._log_end_offset:
            raise OffsetOutOfRange(offset, self.log_start_offset, self._log_end_offset)
        if offset == self._log_end_offset or (upper_bound is not None and offset >= upper_bound):
            return b""
        for segment in self._segments[self._segment_index(offset):]:
            data = segment.read(offset, max_bytes, upper_bound)
            if data is not None:
                return data
        return b""

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >=
        `timestamp_ms`, searched in offset order (UnifiedLog.fetchOffsetByTimestamp
        over batch max timestamps, then the batch's records); None if none."""
        for segment in self._segments:
            if segment.max_timestamp() < timestamp_ms:
                continue
            for position, header in segment.walk(0):
                if header.max_timestamp >= timestamp_ms:
                    found = first_record_at_or_after(
                        segment.read_batch(position, header.size), header, timestamp_ms)
                    if found is not None:
                        return found
        return None

    def latest_epoch(self) -> int | None:
        return self._epochs.latest_epoch()

    def epoch_for_offset(self, offset: int) -> int | None:
        """The leader epoch `offset` was written in (ListOffsets' leader epoch)."""
        return self._epochs.epoch_for_offset(offset)

    def assign_epoch_start_offset(self, epoch: int, start_offset: int) -> None:
        """A new leader caches (epoch, LEO) at election, before any append
        (Partition.makeLeader, KAFKA-7415)."""
        self._epochs.assign(epoch, start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """OffsetForLeaderEpoch (KIP-101/279): (largest epoch <= `epoch`, its
        end offset); (-1, -1) if unknown. See LeaderEpochCache.end_offset_for."""
        return self._epochs.end_offset_for(epoch, self._log_end_offset)

    def truncate_to(self, offset: int) -> None:
        """Drop every batch at or after `offset` (UnifiedLog.truncateTo): later
        segments, the tail of the one holding it, index entries, epoch
        entries. A batch holding `offset` goes whole, so the LEO becomes
        its base offset; below the log start everything goes and the log
        restarts at `offset` (truncateFullyAndStartAt)."""
        if offset < 0:
            raise ValueError(f"offset={offset!r}: must be >= 0")
        if offset >= self._log_end_offset:
            return
        if offset < self.log_start_offset:
            for segment in reversed(self._segments):
                segment.delete()
            self._segments, self._bases = [], []
            self._unflushed.clear()
            self._roll(offset)
            self._log_end_offset = offset
        else:
            index = self._segment_index(offset)
            # Newest first: a crash part-way leaves a prefix of the log.
            for segment in reversed(self._segments[index + 1:]):
                segment.delete()
                self._unflushed.discard(segment)
            del self._segments[index + 1:]
            del self._bases[index + 1:]
            cut = self._segments[index].truncate_to(offset)
            self._log_end_offset = offset if cut is None else min(offset, cut)
        self._unflushed.add(self._segments[-1])
        self._directory_dirty = True
        self._recovery_point = min(self._recovery_point, self._log_end_offset)
        self._epochs.truncate_from_end(self._log_end_offset)

    def batches(self, start_offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """Every batch from the one holding `start_offset` on, with its bytes."""
        for segment, position in self._starts(start_offset):
            for _, header, batch in segment.scan(position):
                yield header, bytes(batch)

    def headers(self, start_offset: int = 0) -> Iterator[BatchHeader]:
        """The headers of batches(start_offset), reading headers only: what
        rebuilding producer state needs."""
        for segment, position in self._starts(start_offset):
            for _, header in segment.walk(position):
                yield header

    def _starts(self, start_offset: int) -> Iterator[tuple[LogSegment, int]]:
        """(segment, position) to read from, from the batch holding `start_offset`."""
        start_offset = max(start_offset, self.log_start_offset)
        if start_offset >= self._log_end_offset:
            return
        first, *rest = self._segments[self._segment_index(start_offset):]
        found = first.locate(start_offset)
        if found is not None:
            yield first, found[0]
        for segment in rest:
            yield segment, 0

    def _segment_index(self, offset: int) -> int:
        """The segment holding `offset`: the last one based at or below it."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def flush(self) -> None:
        """fsync every segment written since the last flush (and the
        directory when segments came or went) and a pending epoch
        checkpoint; moves the recovery point."""
        self._epochs.checkpoint()
        for segment in self._unflushed:
            segment.flush()
        self._unflushed.clear()
        if self._directory_dirty:
            fsync_directory(self.directory)
            self._directory_dirty = False
        self._recovery_point = self._log_end_offset
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """A clean shutdown: flush, then close every file."""
        self.flush()
        for segment in self._segments:
            segment.close()
