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


def colliding_topic(name: str, existing) -> str | None:
    """An existing topic whose name differs from `name` only by '.' against
    '_' (metric names cannot tell them apart): Kafka refuses the new one with
    INVALID_TOPIC_EXCEPTION (Topic.hasCollisionChars / unifyCollisionChars,
    ReplicationControlManager.validateNewTopicNames). The name itself
    existing is TOPIC_ALREADY_EXISTS instead."""
    if name in existing or ("." not in name and "_" not in name):
        return None
    unified = name.replace(".", "_")
    return next((other for other in sorted(existing)
                 if other != name and other.replace(".", "_") == unified), None)
