"""Record batches of the broker's own topics: key/value records in one
uncompressed batch, and back, through kio's writer and reader.

`__consumer_offsets` (offsets_topic.py) and `__cluster_metadata`
(metadata_batches.py) both write their records this way; client batches
are never re-encoded (log/batch.py keeps them as the bytes that arrived).
"""

from __future__ import annotations

import io
import time
from datetime import datetime, timezone

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64


def encode_batch(records: list[tuple[bytes, bytes | None]]) -> bytes:
    now = datetime.fromtimestamp(time.time(), tz=timezone.utc)
    batch = NewRecordBatch(
        producer_id=i64(-1), producer_epoch=i16(-1), base_sequence=i32(-1),
        attributes=i16(0),
        records=tuple(Record(attributes=i8(0), timestamp=now, offset=i64(n), key=key,
                             value=value, headers=())
                      for n, (key, value) in enumerate(records)))
    buffer = io.BytesIO()
    write_new_batch(buffer, batch)
    return buffer.getvalue()


def decode_batch(raw: bytes) -> list[tuple[bytes, bytes | None]]:
    batch, _ = read_batch(raw, 0)
    return [(record.key, record.value) for record in batch.records]
