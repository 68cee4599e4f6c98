"""An in-memory `OffsetStore`: the `__consumer_offsets` partitions as lists.

Records enter the list synchronously (as the real store appends before it
waits for acks); the call then yields once, or waits for its `hold` event when
a test wants to finish appends in an order of its choosing.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict

from kio.schema.errors import ErrorCode

from reference_broker.group import StoreError


class MemoryOffsetStore:
    def __init__(self):
        self.partitions: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.failure: ErrorCode | None = None
        self.holds: list[asyncio.Event] | None = None   # set to a list to hold every append

    async def append(self, partition: int, records: list[tuple[bytes, bytes | None]],
                     producer: tuple[int, int] | None = None) -> None:
        if self.failure is not None:
            raise StoreError(self.failure)
        self.partitions[partition].extend(records)
        if self.holds is not None:
            hold = asyncio.Event()
            self.holds.append(hold)
            await hold.wait()
        else:
            await asyncio.sleep(0)

    def all_records(self) -> list[tuple[bytes, bytes | None]]:
        return [record for partition in sorted(self.partitions)
                for record in self.partitions[partition]]
