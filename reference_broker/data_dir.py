"""What a broker keeps in its data directory beside the logs' own files:
one directory per partition replica, `<topic>-<partition>/`, tagged with its
topic id (`partition.metadata`, KIP-516) so a re-created topic never reuses
an old log, and `replication-offset-checkpoint`, every local replica's high
watermark (Kafka's OffsetCheckpointFile: version, count, then
`topic partition offset` lines)."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from reference_broker.log.file_io import replace_atomically

log = logging.getLogger("reference_broker")

CHECKPOINT = "replication-offset-checkpoint"


def partition_dir(data_dir: Path, topic: str, index: int, topic_id: str) -> Path:
    """The replica's directory, made if missing. A directory left by an
    older topic of the same name is removed first: never mix the two logs
    (Kafka's partition.metadata check)."""
    directory = data_dir / f"{topic}-{index}"
    tag = directory / "partition.metadata"
    if directory.exists() and (not tag.exists() or _tagged_id(tag) != topic_id):
        log.warning("%s: removing a log of another topic id", directory.name)
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    if not tag.exists():
        replace_atomically(tag, f"version: 0\ntopic_id: {topic_id}\n".encode())
    return directory


def _tagged_id(path: Path) -> str | None:
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            return value.strip()
    return None


def write_checkpoint(path: Path, high_watermarks: dict[tuple[str, int], int]) -> None:
    lines = [f"{t} {i} {offset}" for (t, i), offset in sorted(high_watermarks.items())]
    replace_atomically(path, "\n".join(["0", str(len(lines)), *lines, ""]).encode())


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """The checkpointed high watermarks; unreadable means none (HWs then
    start at the log start and come back from the leaders)."""
    try:
        lines = path.read_text().splitlines()
        count = int(lines[1])
        entries = {}
        for line in lines[2:2 + count]:
            topic, index, offset = line.split()
            entries[(topic, int(index))] = int(offset)
        return entries
    except (OSError, ValueError, IndexError):
        return {}
