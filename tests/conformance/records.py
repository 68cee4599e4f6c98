"""Record batches (magic v2) for the suite, encoded and decoded here so
that timestamps are exact milliseconds and compression is possible (gzip,
which Kafka and the reference broker both take): kio's writer goes through
float seconds and has no codecs.

A fetched batch is compared by what it says — offsets, epochs, producer
fields, timestamps, each record — with its CRC checked here, not compared
(the producer id inside it differs between clusters)."""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass

from crc32c import crc32c

GZIP = 1
TIMESTAMP_TYPE_BIT = 0x08   # LogAppendTime
TRANSACTIONAL = 0x10        # KIP-98: a transaction's batch
CONTROL = 0x20              # a transaction marker
_HEADER = struct.Struct(">qiibIhiqqqhii")   # base offset .. record count


@dataclass(frozen=True)
class Rec:
    value: bytes | None
    key: bytes | None = None
    timestamp: int = 0
    headers: tuple[tuple[str, bytes | None], ...] = ()


def _varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)        # zigzag
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(data: bytes | None) -> bytes:
    return _varint(-1) if data is None else _varint(len(data)) + data


def encode(records: list[Rec], *, producer_id: int = -1, producer_epoch: int = -1,
           base_sequence: int = -1, compression: int = 0, transactional: bool = False) -> bytes:
    base_ts = records[0].timestamp
    body = bytearray()
    for delta, r in enumerate(records):
        rec = bytearray(b"\0")      # attributes
        rec += _varint(r.timestamp - base_ts) + _varint(delta) + _bytes(r.key) + _bytes(r.value)
        rec += _varint(len(r.headers))
        for k, v in r.headers:
            rec += _bytes(k.encode()) + _bytes(v)
        body += _varint(len(rec)) + rec
    if compression == GZIP:
        body = bytearray(gzip.compress(bytes(body), mtime=0))
    attributes = compression | (TRANSACTIONAL if transactional else 0)
    after_crc = struct.pack(">hiqqqhii", attributes, len(records) - 1, base_ts,
                            max(r.timestamp for r in records), producer_id, producer_epoch,
                            base_sequence, len(records)) + bytes(body)
    length = 4 + 1 + 4 + len(after_crc)     # leader epoch, magic, crc, rest
    return struct.pack(">qiibI", 0, length, 0, 2, crc32c(after_crc)) + after_crc


class _Reader:
    def __init__(self, data: bytes):
        self.data, self.pos = data, 0

    def varint(self) -> int:
        shift = n = 0
        while True:
            byte = self.data[self.pos]
            self.pos += 1
            n |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                return (n >> 1) ^ -(n & 1)

    def bytes(self) -> bytes | None:
        size = self.varint()
        if size < 0:
            return None
        out = self.data[self.pos:self.pos + size]
        self.pos += size
        return out


def decode(data: bytes | None) -> list[dict]:
    """Every complete batch of a fetched records field, as plain dicts
    (a partial batch at the end, which Kafka may send, is left out and
    counted as `partial_tail_bytes`). Raises on a bad CRC."""
    batches, pos, data = [], 0, data or b""
    while len(data) - pos >= 12:
        base_offset, length = struct.unpack_from(">qi", data, pos)
        if len(data) - pos - 12 < length:
            break
        (leader_epoch, magic, crc, attributes, last_delta, base_ts, max_ts, pid, epoch, seq,
         count) = _HEADER.unpack_from(data, pos)[2:]
        after_crc = data[pos + 21:pos + 12 + length]
        if crc32c(after_crc) != crc:
            raise ValueError(f"batch at offset {base_offset}: CRC mismatch")
        body = data[pos + 61:pos + 12 + length]
        if attributes & 0x07 == GZIP:
            body = gzip.decompress(body)
        elif attributes & 0x07:
            raise ValueError(f"batch at offset {base_offset}: codec {attributes & 7} unsupported")
        reader, records = _Reader(body), []
        for _ in range(count):
            reader.varint()
            reader.pos += 1     # record attributes
            ts_delta, offset_delta = reader.varint(), reader.varint()
            key, value = reader.bytes(), reader.bytes()
            headers = [(reader.bytes().decode(), reader.bytes()) for _ in range(reader.varint())]
            records.append({"offset": base_offset + offset_delta, "timestamp": base_ts + ts_delta,
                            "key": key, "value": value, "headers": headers})
        batches.append({"base_offset": base_offset, "length": length,
                        "partition_leader_epoch": leader_epoch, "magic": magic,
                        "attributes": attributes, "last_offset_delta": last_delta,
                        "base_timestamp": base_ts, "max_timestamp": max_ts,
                        "producer_id": pid, "producer_epoch": epoch, "base_sequence": seq,
                        "records": records})
        pos += 12 + length
    if pos < len(data):
        batches.append({"partial_tail_bytes": len(data) - pos})
    return batches
