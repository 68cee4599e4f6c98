"""Arrays written as null where the schema does not allow null.

kio's readers turn a null array (length -1) into None whatever the field's
schema says, so a handler could meet None where every well-formed request
has a tuple (found by the fuzz test: DescribeConfigs' resources). Kafka's
generated readers refuse it ("non-nullable field ... was serialized as
null"); `refuse_null_arrays` does the same after decoding, so such a frame
is a malformed request, not a handler's crash.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.serial._introspect import EntityField, EntityTupleField, classify_field, is_optional


def refuse_null_arrays(entity: Any, path: str = "") -> None:
    """ValueError naming the first non-nullable array that is None."""
    for field in dataclasses.fields(entity):
        value = getattr(entity, field.name)
        where = f"{path}{field.name}"
        try:
            kind = classify_field(field)
        except Exception:  # noqa: BLE001 — a primitive kio cannot classify holds no arrays
            continue
        if isinstance(kind, EntityTupleField):
            if value is None:
                if not is_optional(field):
                    raise ValueError(f"non-nullable field {where} was serialized as null")
                continue
            for i, item in enumerate(value):
                refuse_null_arrays(item, f"{where}[{i}].")
        elif isinstance(kind, EntityField) and value is not None:
            refuse_null_arrays(value, f"{where}.")
        elif value is None and _is_array(field) and not is_optional(field):
            raise ValueError(f"non-nullable field {where} was serialized as null")


def _is_array(field: dataclasses.Field) -> bool:
    return "tuple[" in str(field.type)
