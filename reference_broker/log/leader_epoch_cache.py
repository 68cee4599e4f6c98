"""The leader epoch cache of one partition replica and its
`leader-epoch-checkpoint` file (KIP-101, KIP-279).

One idea, Kafka's LeaderEpochFileCache: (epoch, start offset) entries,
increasing in both, where the start offset is the first offset written in
that epoch. OffsetForLeaderEpoch answers from it, and a follower truncates
to the answer instead of to its high watermark (KIP-101). Every change is
checkpointed at once, atomically, in Kafka's text format:

    0               <- version
    2               <- number of entries
    0 0             <- epoch start_offset
    3 120

A checkpoint that fails (a disk error) leaves the change pending: the
entries in memory stay the truth, and the next change or `checkpoint()`
writes them. Kafka would take the log directory offline (KIP-112); here
the error is transient (docs/broker.md). Raising instead, half-way through
an append whose batches were already written, left a log end offset behind
its own segment: the retried append wrote the same offsets twice, and
recovery after a restart cut the log there — acknowledged records lost.
Until it is written, a pending entry's batches are all in the active
segment (PartitionLog rolls only after a checkpoint), whose recovery
assigns their epochs again.
"""

from __future__ import annotations

import logging
from pathlib import Path

from reference_broker.log.file_io import replace_atomically

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "leader-epoch-checkpoint"
_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, path: Path):
        self.path = path
        self._entries: list[tuple[int, int]] = []
        self._pending = False
        for epoch, start_offset in _read_checkpoint(path):
            self._assign(epoch, start_offset)

    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    def latest_epoch(self) -> int | None:
        return self._entries[-1][0] if self._entries else None

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that `epoch` starts at `start_offset` (LeaderEpochFileCache.assign)."""
        if self._assign(epoch, start_offset):
            self._changed()

    def checkpoint(self) -> None:
        """Write a pending change; a disk error raises, and it stays pending."""
        if self._pending:
            self._write()
            self._pending = False

    def _changed(self) -> None:
        self._pending = True
        try:
            self.checkpoint()
        except OSError as e:
            log.warning("%s: leader epoch checkpoint failed, kept pending: %s", self.path.parent, e)

    def _assign(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset}): both must be >= 0")
        if self._entries:
            latest_epoch, latest_start = self._entries[-1]
            # isUpdateNeeded: a new epoch, or the latest one starting earlier.
            if epoch == latest_epoch and start_offset >= latest_start:
                return False
        # maybeTruncateNonMonotonicEntries: entries that the new one
        # contradicts (same or later epoch, same or later start) go.
        while self._entries and (self._entries[-1][0] >= epoch or self._entries[-1][1] >= start_offset):
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch (LeaderEpochFileCache.endOffsetFor):
        the largest epoch <= the requested one and the start offset of the
        next higher epoch, or the log end offset for the latest epoch.
        A requested epoch below every cached one answers (requested epoch,
        start of the first cached epoch); an undefined or unknown-high one
        answers (-1, -1)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._entries[-1][0]:
            return requested_epoch, log_end_offset
        higher = next((entry for entry in self._entries if entry[0] > requested_epoch), None)
        if higher is None:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor = None
        for entry in self._entries:
            if entry[0] > requested_epoch:
                break
            floor = entry
        if floor is None:
            return requested_epoch, higher[1]
        return floor[0], higher[1]

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch the record at `offset` was written in (LeaderEpochFileCache.epochForOffset)."""
        previous = None
        for epoch, start_offset in self._entries:
            if start_offset == offset:
                return epoch
            if start_offset > offset:
                return previous
            previous = epoch
        return previous

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop the entries whose start offset is >= `end_offset` (truncateFromEnd):
        after a log truncation, and on load with the recovered log end offset."""
        if end_offset < 0 or not self._entries or self._entries[-1][1] < end_offset:
            return
        while self._entries and self._entries[-1][1] >= end_offset:
            self._entries.pop()
        self._changed()

    def _write(self) -> None:
        lines = [str(_VERSION), str(len(self._entries))]
        lines += [f"{epoch} {start_offset}" for epoch, start_offset in self._entries]
        replace_atomically(self.path, ("\n".join(lines) + "\n").encode())


def _read_checkpoint(path: Path) -> list[tuple[int, int]]:
    """Entries of a checkpoint file; [] if there is none. A malformed file
    raises ValueError naming it (Kafka fails the log directory)."""
    if not path.exists():
        return []
    lines = path.read_text().splitlines()
    try:
        version, count = int(lines[0]), int(lines[1])
        entries = [(int(epoch), int(offset)) for epoch, offset in (line.split() for line in lines[2:])]
    except (IndexError, ValueError) as e:
        raise ValueError(f"malformed leader epoch checkpoint {path}: {e}") from None
    if version != _VERSION or count != len(entries):
        raise ValueError(
            f"malformed leader epoch checkpoint {path}: version {version} (expected {_VERSION}), "
            f"{count} entries declared, {len(entries)} present")
    return entries
