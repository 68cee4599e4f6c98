"""Record batches of the broker's own topics: key/value records in one
uncompressed batch, and back, through kio's writer and reader.

`__consumer_offsets` (offsets_topic.py), `__transaction_state`
(txn/) and `__cluster_metadata` (metadata_batches.py) write their records
this way, and so do transaction markers: the one-record control batch a
coordinator's WriteTxnMarkers puts into each partition of a transaction.
Client batches are never re-encoded (log/batch.py keeps them as the bytes
that arrived).
"""

from __future__ import annotations

import io
import struct
import time
from datetime import datetime, timezone

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import i8, i16, i32, i64

from reference_broker.txn.partition_txns import Marker

# MemoryRecords.writeEndTransactionalMarker: attributes transactional (bit
# 4) | control (bit 5); the key is ControlRecordType (int16 version 0,
# int16 type: ABORT 0, COMMIT 1), the value EndTransactionMarker (int16
# version 0, int32 coordinator epoch).
TRANSACTIONAL = 0x10
_MARKER_ATTRIBUTES = TRANSACTIONAL | 0x20
_CONTROL_KEY = struct.Struct(">hh")
_MARKER_VALUE = struct.Struct(">hi")


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


def encode_marker(producer_id: int, producer_epoch: int, marker: Marker) -> bytes:
    return encode_batch([(_CONTROL_KEY.pack(0, marker.result),
                          _MARKER_VALUE.pack(0, marker.coordinator_epoch))],
                        producer_id=producer_id, producer_epoch=producer_epoch,
                        attributes=_MARKER_ATTRIBUTES)


def decode_marker(raw: bytes) -> Marker:
    """The marker of a transactional control batch's bytes."""
    (key, value), = decode_batch(raw)
    _, result = _CONTROL_KEY.unpack_from(key)
    _, coordinator_epoch = _MARKER_VALUE.unpack_from(value)
    return Marker(result, coordinator_epoch)
