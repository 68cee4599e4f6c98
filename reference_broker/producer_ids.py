"""Producer ids for InitProducerId, unique across brokers and restarts.

Ids are handed out in blocks whose end is persisted (`producer-ids.json`)
before any id in them is used, so a restart never reuses one (not even
after a write of that end failed); the node id
in the high bits keeps brokers apart. Kafka asks the controller for blocks
instead (KIP-730).
"""

from __future__ import annotations

import json
from pathlib import Path

from reference_broker.log.file_io import replace_atomically

_BLOCK = 1000
_NODE_SHIFT = 40


class ProducerIds:
    def __init__(self, data_dir: Path, node_id: int):
        self.path = Path(data_dir) / "producer-ids.json"
        self.node_id = node_id
        self._next = self._limit = 0

    def open(self) -> None:
        """Resume after the last persisted block."""
        self._next = self._limit = (json.loads(self.path.read_text())["limit"]
                                    if self.path.exists() else 0)

    def allocate(self) -> int:
        if self._next >= self._limit:
            # The new end is ours only once it is on disk: a failed write
            # (a disk error) must leave the block unused, or ids handed out
            # after it are handed out again after a restart, and a new
            # producer's first batches match another's as duplicates.
            limit = self._limit + _BLOCK
            replace_atomically(self.path, json.dumps({"limit": limit}).encode())
            self._limit = limit
        producer_id = self._next
        self._next += 1
        return (self.node_id << _NODE_SHIFT) + producer_id
