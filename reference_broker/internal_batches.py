"""Record batches of the broker's own topics: key/value records in one
uncompressed batch, and back, through kio's writer and reader.

`__consumer_offsets` (offsets_topic.py), `__transaction_state`
(txn/) and `__cluster_metadata` (metadata_batches.py) write their records
this way, and so do transaction markers (txn/partition_txns.py).
Client batches are never re-encoded (log/batch.py keeps them as the bytes
that arrived).
"""

from __future__ import annotations

import io
import time
from datetime import datetime, timezone

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

TRANSACTIONAL = 0x10     # a batch's attributes, bit 4 (KIP-98)
CONTROL = 0x20           # bit 5: a control batch (transaction markers)


def encode_batch(records: list[tuple[bytes, bytes | None]], *, producer_id: int = -1,
                 producer_epoch: int = -1, attributes: int = 0) -> bytes:
    now = datetime.fromtimestamp(time.time(), tz=timezone.utc)
    batch = NewRecordBatch(
        producer_id=i64(producer_id), producer_epoch=i16(producer_epoch), base_sequence=i32(-1),
        attributes=i16(attributes),
        records=tuple(Record(attributes=i8(0), timestamp=now, offset=i64(n), key=key,
                             value=value, headers=())
                      for n, (key, value) in enumerate(records)))
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def decode_batch(raw: bytes) -> list[tuple[bytes, bytes | None]]:
    batch, _ = read_batch(raw, 0)
    return [(record.key, record.value) for record in batch.records]

