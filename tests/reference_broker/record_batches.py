"""Record batches from real encoders, for the log and producer state tests:
kio's batch writer (`kio.records`) and kafka-python's
DefaultRecordBatchBuilder (a client's own encoder, compression included)."""

from __future__ import annotations

import datetime
import io
import warnings

from kio.records.readers import read_batch
from kio.records.schema import NewRecordBatch, Record
from kio.records.writers import write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

with warnings.catch_warnings():
    # kafka-python's package import loads its protocol schemas with the
    # deprecated importlib.resources API.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatchBuilder

BASE_TIME_MS = 1_700_000_000_000


def kio_batch(values: list[bytes], *, producer_id: int = -1, producer_epoch: int = -1,
              base_sequence: int = -1, timestamps: list[int] | None = None,
              attributes: int = 0, partition_leader_epoch: int = 0, base_offset: int = 0) -> bytes:
    """One magic v2 batch of `values` (no keys), encoded by kio."""
    if timestamps is None:
        timestamps = [BASE_TIME_MS + i for i in range(len(values))]
    records = tuple(
        Record(attributes=i8(0),
               timestamp=TZAwareMicros.parse(
                   datetime.datetime.fromtimestamp(ts / 1000, tz=datetime.UTC)),
               offset=i64(base_offset + i), key=None, value=value, headers=())
        for i, (value, ts) in enumerate(zip(values, timestamps)))
    buffer = io.BytesIO()
    write_new_batch(buffer, NewRecordBatch(
        producer_id=i64(producer_id), producer_epoch=i16(producer_epoch),
        partition_leader_epoch=i32(partition_leader_epoch), base_sequence=i32(base_sequence),
        records=records, attributes=i16(attributes)))
    return buffer.getvalue()


def values_batch(count: int, size: int = 10, *, start: int = 0, **kw) -> bytes:
    """A kio batch of `count` values of `size` bytes each, numbered from `start`."""
    return kio_batch([b"%0*d" % (size, start + i) for i in range(count)], **kw)


def kafka_python_batch(values: list[bytes], *, compression: int = 0, timestamps: list[int] | None = None,
                       producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1) -> bytes:
    """One batch as kafka-python's producer builds it (compression: 0 none, 1 gzip)."""
    if timestamps is None:
        timestamps = [BASE_TIME_MS + i for i in range(len(values))]
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False, producer_id=producer_id,
        producer_epoch=producer_epoch, base_sequence=base_sequence, batch_size=1 << 20)
    for offset, (value, ts) in enumerate(zip(values, timestamps)):
        builder.append(offset, timestamp=ts, key=None, value=value, headers=[])
    return bytes(builder.build())


def records_in(data: bytes) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record in `data`, decoded by kio (CRCs checked)."""
    found, position = [], 0
    while position < len(data):
        batch, size = read_batch(data, position)
        found += [(record.offset, record.value) for record in batch.records]
        position += size
    return found
