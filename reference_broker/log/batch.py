"""Record batches as bytes: the magic v2 header, checked and re-stamped
without ever decoding a record.

One idea: the broker keeps batches as the bytes that arrived. Only the
61-byte header is read (one `struct.unpack_from`), the CRC-32C is checked
over the batch, and the leader rewrites the two fields the CRC does not
cover, the base offset and the partition leader epoch (KIP-98's format,
DefaultRecordBatch). Records are decoded in one place only: the timestamp
search of ListOffsets, which is not on the produce or fetch path.

Header layout (DefaultRecordBatch): baseOffset int64, batchLength int32,
partitionLeaderEpoch int32, magic int8, crc uint32, attributes int16,
lastOffsetDelta int32, baseTimestamp int64, maxTimestamp int64,
producerId int64, producerEpoch int16, baseSequence int32, recordsCount int32.
The CRC covers attributes to the end of the batch.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base offset + batch length, not counted in batch_length
CRC_START = 21  # attributes: the first byte the CRC covers
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD
MAGIC = 2
MAX_SEQUENCE = 2**31 - 1
NO_SEQUENCE = -1

_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_LEADER_EPOCH_AT = 12
_PREFIX = struct.Struct(">qi")

_COMPRESSION_MASK = 0x07
_TIMESTAMP_TYPE_MASK = 0x08
_TRANSACTIONAL_MASK = 0x10
_CONTROL_MASK = 0x20
CREATE_TIME = 0
LOG_APPEND_TIME = 1
_GZIP = 1


class CorruptRecordError(ValueError):
    """Bytes that are not a well-formed magic v2 record batch (Kafka's
    CorruptRecordException -> CORRUPT_MESSAGE). The message says what is
    wrong and at which byte."""


class InvalidRecordError(ValueError):
    """Well-formed batches that a client may not send (Kafka's
    InvalidRecordException -> INVALID_RECORD, from LogValidator)."""


def increment_sequence(sequence: int, increment: int) -> int:
    """Sequence numbers wrap from 2**31-1 to 0 (DefaultRecordBatch.incrementSequence)."""
    if sequence > MAX_SEQUENCE - increment:
        return increment - (MAX_SEQUENCE - sequence) - 1
    return sequence + increment


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte header of one magic v2 record batch, as on the wire."""

    base_offset: int
    batch_length: int  # bytes after the 12-byte offset+length prefix
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        return LOG_OVERHEAD + self.batch_length

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def last_sequence(self) -> int:
        # DefaultRecordBatch.lastSequence: no sequence stays no sequence.
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL_MASK)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def timestamp_type(self) -> int:
        """CREATE_TIME (0) or LOG_APPEND_TIME (1), Kafka's TimestampType ids."""
        return LOG_APPEND_TIME if self.attributes & _TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def compression(self) -> int:
        """Kafka's CompressionType id: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd."""
        return self.attributes & _COMPRESSION_MASK


def read_header(data: bytes | bytearray | memoryview, position: int = 0,
                where: int | None = None) -> BatchHeader:
    """The header at `position`; checks magic and the declared length, not
    that the batch is complete. `where` is the byte reported in errors
    (defaults to `position`)."""
    at = position if where is None else where
    available = len(data) - position
    if available < HEADER_SIZE:
        raise CorruptRecordError(
            f"record batch at byte {at}: {available} bytes left, a batch header needs {HEADER_SIZE}")
    header = BatchHeader(*HEADER.unpack_from(data, position))
    if header.magic != MAGIC:
        raise CorruptRecordError(
            f"record batch at byte {at}: magic {header.magic}, only magic {MAGIC} is supported")
    if header.batch_length < MIN_BATCH_LENGTH:
        raise CorruptRecordError(
            f"record batch at byte {at}: batch_length {header.batch_length} is below "
            f"the header's own {MIN_BATCH_LENGTH} bytes")
    return header


def check_crc(batch: bytes | bytearray | memoryview, header: BatchHeader, where: int) -> None:
    """CRC-32C of attributes..end against the stored one (DefaultRecordBatch.isValid)."""
    computed = crc32c.crc32c(batch[CRC_START:header.size])
    if computed != header.crc:
        raise CorruptRecordError(
            f"record batch at byte {where}: CRC-32C mismatch, stored {header.crc:#010x}, "
            f"computed {computed:#010x}")


def parse_batches(data: bytes | bytearray | memoryview, verify_crc: bool = True) -> list[BatchHeader]:
    """Headers of the complete magic v2 batches that make up `data` (one
    partition's `records` of a Produce request or a fetch response); every
    byte must belong to a complete, valid batch. Empty data -> []."""
    view = memoryview(data)
    end = len(view)
    position = 0
    headers: list[BatchHeader] = []
    while position < end:
        header = read_header(view, position)
        if position + header.size > end:
            raise CorruptRecordError(
                f"record batch at byte {position}: declares {header.size} bytes, "
                f"only {end - position} remain")
        if verify_crc:
            check_crc(view[position:position + header.size], header, position)
        headers.append(header)
        position += header.size
    return headers


def validate_client_batches(headers: Sequence[BatchHeader]) -> None:
    """The rules LogValidator applies to a client's Produce data on top of
    well-formedness, each an INVALID_RECORD: a v2 produce carries one batch
    per partition (getFirstBatchAndMaybeValidateNoMoreBatches), whose offset
    range matches its record count, that is not a control batch, and that
    has a sequence if it has a producer id (validateBatch)."""
    if len(headers) > 1:
        raise InvalidRecordError(
            f"{len(headers)} record batches for one partition: a magic v2 produce carries exactly one")
    for header in headers:
        count_from_offsets = header.last_offset_delta + 1
        if count_from_offsets <= 0:
            raise InvalidRecordError(
                f"batch has an invalid offset range: last_offset_delta {header.last_offset_delta}")
        if header.records_count <= 0:
            raise InvalidRecordError(f"invalid reported count for record batch: {header.records_count}")
        if count_from_offsets != header.records_count:
            raise InvalidRecordError(
                f"inconsistent batch offset range ({count_from_offsets} offsets) and count of "
                f"records {header.records_count}")
        if header.is_control:
            raise InvalidRecordError("clients are not allowed to write control records")
        if header.has_producer_id and header.base_sequence < 0:
            raise InvalidRecordError(
                f"invalid sequence number {header.base_sequence} in record batch with "
                f"producer id {header.producer_id}")


def assign_offsets(buffer: bytearray, headers: Sequence[BatchHeader], base_offset: int,
                   partition_leader_epoch: int) -> list[BatchHeader]:
    """Stamp consecutive offsets from `base_offset` and the leader epoch into
    the batches of `buffer` in place (LogValidator.assignOffsetsNonCompressed:
    setLastOffset, setPartitionLeaderEpoch; neither is under the CRC).
    Returns the headers as they now are."""
    stamped: list[BatchHeader] = []
    position = 0
    next_offset = base_offset
    for header in headers:
        _BASE_OFFSET.pack_into(buffer, position, next_offset)
        _LEADER_EPOCH.pack_into(buffer, position + _LEADER_EPOCH_AT, partition_leader_epoch)
        stamped.append(BatchHeader(
            next_offset, header.batch_length, partition_leader_epoch, header.magic, header.crc,
            header.attributes, header.last_offset_delta, header.base_timestamp,
            header.max_timestamp, header.producer_id, header.producer_epoch,
            header.base_sequence, header.records_count))
        position += header.size
        next_offset += header.last_offset_delta + 1
    return stamped


def with_offsets(raw: bytes | bytearray | memoryview, base_offset: int,
                 partition_leader_epoch: int) -> bytes:
    """A copy of the batches in `raw` with consecutive offsets from
    `base_offset` and the given leader epoch; nothing else changes, so the
    CRC stays valid."""
    buffer = bytearray(raw)
    assign_offsets(buffer, parse_batches(buffer, verify_crc=False), base_offset, partition_leader_epoch)
    return bytes(buffer)


def batch_prefix(data: bytes | bytearray | memoryview, position: int) -> tuple[int, int]:
    """(base offset, size) of the batch at `position`: all that cutting a
    read at a batch boundary needs."""
    base_offset, batch_length = _PREFIX.unpack_from(data, position)
    return base_offset, LOG_OVERHEAD + batch_length


def first_record_at_or_after(batch: bytes | bytearray | memoryview, header: BatchHeader,
                             timestamp_ms: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of `batch` whose timestamp is
    >= `timestamp_ms`, as FileRecords.searchForTimestamp finds it. With
    LOG_APPEND_TIME every record carries the batch's max timestamp. Records
    compressed with snappy, lz4 or zstd cannot be decoded with the standard
    library, and records that do not decode at all (the CRC only proves
    they arrived as sent) cannot be searched: then the batch answers for
    itself (base offset, max timestamp)."""
    if header.max_timestamp < timestamp_ms:
        return None
    if header.timestamp_type == LOG_APPEND_TIME or header.compression not in (0, _GZIP):
        return header.base_offset, header.max_timestamp
    try:
        return _search_records(batch, header, timestamp_ms)
    except (IndexError, EOFError, OSError, zlib.error):
        return header.base_offset, header.max_timestamp


def _search_records(batch: bytes | bytearray | memoryview, header: BatchHeader,
                    timestamp_ms: int) -> tuple[int, int] | None:
    body: bytes | memoryview = memoryview(batch)[HEADER_SIZE:header.size]
    if header.compression == _GZIP:
        body = gzip.decompress(body)
    position = 0
    for _ in range(header.records_count):
        length, position = _read_varint(body, position)
        record_end = position + length
        timestamp_delta, position = _read_varint(body, position + 1)  # skip attributes
        offset_delta, position = _read_varint(body, position)
        timestamp = header.base_timestamp + timestamp_delta
        if timestamp >= timestamp_ms:
            return header.base_offset + offset_delta, timestamp
        position = record_end
    return None


def _read_varint(data: bytes | memoryview, position: int) -> tuple[int, int]:
    """A zig-zag varint/varlong (the record fields' encoding) and the next position."""
    shift = 0
    raw = 0
    while True:
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), position
        shift += 7
