"""Reading a flexible request that carries tagged fields its schema does not
know — as Kafka's generated readers do, skipping them (KIP-482: they keep
them as `_unknownTaggedFields`), where kio's reader refuses the frame.

Real clients send such frames: librdkafka 2.16 writes Metadata v9's null
topic array ("all topics") as a one-byte count in a four-byte space it
does not shrink, so Kafka reads three zero booleans, then takes the
request's own AllowAutoTopicCreation (1 in a producer's) as a count of
one tagged field, tag 0 of size 0, and ignores the byte left over
(seen on the wire here; RequestContext.parseRequest reads what the schema
says and no further).

Only the fallback when kio's reader fails: fields in schema order, each
read by kio's field reader, nested structs and arrays of them read by this
module so that their tagged fields are skipped too.
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from kio.serial._introspect import (
    EntityField, EntityTupleField, classify_field, get_field_tag, is_optional,
)
from kio.serial._parse import get_field_reader
from kio.serial.readers import (
    read_compact_array_length, read_legacy_array_length, read_unsigned_varint,
)
from kio.static.constants import EntityType


def read_skipping_unknown_tags(entity_type: type, buffer: bytes, offset: int) \
        -> tuple[Any, int]:
    """(entity, bytes read) of `entity_type` at `offset`."""
    start = offset
    # A request header's client id stays a legacy string in v2 (KIP-482).
    header = entity_type.__type__ == EntityType.header
    values: dict[str, Any] = {}
    tagged = {}
    for field in fields(entity_type):
        tag = get_field_tag(field)
        if tag is not None:
            tagged[tag] = field
            continue
        kind = classify_field(field)
        if isinstance(kind, EntityTupleField):
            read_length = read_compact_array_length if entity_type.__flexible__ \
                else read_legacy_array_length
            length, used = read_length(buffer, offset)
            offset += used
            if length is None or length < 0:    # a null array
                values[field.name] = None
                continue
            items = []
            for _ in range(length):
                item, used = read_skipping_unknown_tags(kind.type_, buffer, offset)
                items.append(item)
                offset += used
            values[field.name] = tuple(items)
        elif isinstance(kind, EntityField) and not is_optional(field):
            values[field.name], used = read_skipping_unknown_tags(kind.type_, buffer, offset)
            offset += used
        else:
            values[field.name], used = get_field_reader(entity_type, field, header, False)(
                buffer, offset)
            offset += used
    if entity_type.__flexible__:
        count, used = read_unsigned_varint(buffer, offset)
        offset += used
        for _ in range(count):
            tag, used = read_unsigned_varint(buffer, offset)
            offset += used
            size, used = read_unsigned_varint(buffer, offset)
            offset += used
            if tag in tagged:
                field = tagged[tag]
                values[field.name], _ = get_field_reader(entity_type, field, header, True)(
                    buffer, offset)
            if offset + size > len(buffer):
                raise ValueError(f"tagged field {tag} of {size} bytes runs past the frame")
            offset += size
    return entity_type(**values), offset - start
