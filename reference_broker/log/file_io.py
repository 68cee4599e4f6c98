"""Writing the log's files: whole writes, directory syncs, atomic replaces.

One idea: a write to a regular file lands in the page cache and survives a
kill -9 of the process; only fsync makes it survive the machine. The log
fsyncs when its flush policy says so (Kafka's `flush.messages`,
`flush.ms`) and for checkpoints, which are replaced atomically like
Kafka's CheckpointFile (write a temporary file, fsync, rename, fsync the
directory).
"""

from __future__ import annotations

import os
from pathlib import Path


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def write_all_at(fd: int, data: bytes | bytearray | memoryview, position: int) -> None:
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, position)
        view, position = view[written:], position + written


def fsync_directory(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_atomically(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    fsync_directory(path.parent)
