"""Which topic names are legal (Kafka's Topic.validate): asked by the
controller before it creates a topic and by Metadata before it reports one."""

from __future__ import annotations

import re

_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def topic_name_error(name: str) -> str | None:
    if name in (".", ".."):
        return f"topic name {name!r} is illegal"
    if not _TOPIC_NAME.match(name or ""):
        # The message is answered in a string field of at most 32767 bytes:
        # quote no more of the name than a legal one could have.
        shown = repr(name[:249]) + ("..." if len(name) > 249 else "")
        return (f"topic name {shown} must be 1 to 249 characters of "
                "ASCII letters, digits, '.', '_' and '-'")
    return None
