"""The metadata log on the wire: records travel in a Fetch response on
`__cluster_metadata` as one record batch whose record values are the
encoded metadata records and whose offsets are their log offsets, as
KRaft's own `__cluster_metadata` partition carries them."""

from __future__ import annotations

from reference_broker.controller.records import MetadataRecord, decode, encode
from reference_broker.log.batch import parse_batches, with_offsets
from reference_broker.internal_batches import decode_batch, encode_batch


def encode_metadata_batch(records: list[MetadataRecord], base_offset: int) -> bytes:
    if not records:
        return b""
    return with_offsets(encode_batch([(b"", encode(r)) for r in records]), base_offset, 0)


def decode_metadata_batches(data: bytes, from_offset: int) -> list[MetadataRecord]:
    """The records at `from_offset` and after, which must follow on from it."""
    records: list[MetadataRecord] = []
    position = 0
    for header in parse_batches(data):
        raw = data[position:position + header.size]
        position += header.size
        for delta, (_, value) in enumerate(decode_batch(raw)):
            offset = header.base_offset + delta
            if offset < from_offset + len(records):
                continue
            if offset != from_offset + len(records):
                raise ValueError(f"metadata record at offset {offset}, expected "
                                 f"{from_offset + len(records)}")
            records.append(decode(value))
    return records
