"""kio entities as plain data to compare: dataclasses become dicts of
their fields, tuples lists, error codes their names, durations and
datetimes milliseconds, UUIDs strings. Nothing is dropped here; what may
legitimately differ is rewritten by each step's normaliser, by name."""

from __future__ import annotations

import dataclasses
import datetime
import enum
import uuid
from typing import Any

from kio.schema.errors import ErrorCode


def plain(value: Any) -> Any:
    if isinstance(value, ErrorCode):
        return value.name
    if isinstance(value, enum.Enum):
        return value.value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (tuple, list)):
        return [plain(item) for item in value]
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"cannot make {type(value).__name__} plain: {value!r}")


def keyed(items: list[dict], *key: str) -> dict:
    """An unordered list of dicts as a dict by key (the protocol's
    maps-as-arrays: topics by name, partitions by index, configs by name).
    A key repeated is kept apart (`key#2`), so a duplicate shows as a
    difference rather than being merged away."""
    out: dict = {}
    for item in items:
        k = item[key[0]] if len(key) == 1 else tuple(item[part] for part in key)
        label, n = k, 1
        while label in out:
            n += 1
            label = f"{k}#{n}"
        out[label] = item
    return out


def drop(item: dict, *names: str) -> dict:
    return {k: v for k, v in item.items() if k not in names}
