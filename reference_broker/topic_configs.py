"""Per-topic configs: the one table of the topic-level settings this broker
accepts (CreateTopics, IncrementalAlterConfigs), what each does here, and
the parsing, validation and resolution derived from it. Names, types,
defaults and ranges are Kafka 3.7's LogConfig.

One idea: a topic config is accepted only when the broker keeps its
promise. Every key is one of

  APPLIED     overrides a broker setting (its synonym) on this topic and
              takes effect;
  INERT       any valid value is accepted, but the key tunes something this
              broker does not have (compaction, tiered storage, throttles
              without a rate, file preallocation), so no value changes what a
              client can observe;
  RESTRICTED  the key governs something a client can observe that this
              broker does not implement (compaction, retention,
              recompression, timestamp rules): only values that describe what
              the broker does anyway are accepted — others are INVALID_CONFIG,
              never accepted and ignored.

A name not in the table is INVALID_CONFIG, as LogConfig.validateNames
refuses it. DescribeConfigs and docs/broker-topic-configs.md are derived
from TOPIC_CONFIGS too.
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reference_broker.config import LONG_MAX, kafka_text

WEEK_MS = 7 * 24 * 3600 * 1000      # Kafka's default retention.ms and segment.ms


class Effect(enum.Enum):
    APPLIED = "applied"
    INERT = "inert"
    RESTRICTED = "restricted"


@dataclass(frozen=True)
class ConfigKey:
    name: str
    type: str                       # Kafka's ConfigDef type: boolean, string, int, long, ...
    effect: Effect
    doc: str                        # what it does here (DescribeConfigs' documentation)
    default: str | None = None      # Kafka's default; None: the broker setting's value
    broker_setting: str | None = None   # APPLIED: the broker setting it overrides
    at_least: float | None = None
    at_most: float | None = None
    one_of: tuple[str, ...] | None = None   # valid strings (for a list: valid items)
    pattern: str | None = None              # valid strings (for a list: valid items)
    honoured: Callable[[Any], bool] | None = None   # RESTRICTED: the values kept here
    refusal: str = ""               # RESTRICTED: why other values are refused, and what is accepted


_APPLIED, _INERT, _RESTRICTED = Effect.APPLIED, Effect.INERT, Effect.RESTRICTED
_NO_COMPACTION = "compaction tuning; this broker never compacts (cleanup.policy=delete only)"
_NO_DELETION = "this broker never deletes records"
_NO_TIERED = "tiered storage is not implemented"

TOPIC_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in (
    ConfigKey("min.insync.replicas", "int", _APPLIED,
              "acks=all produce on this topic needs this many in-sync replicas "
              "(NOT_ENOUGH_REPLICAS below it), and the high watermark does not advance "
              "below it (KAFKA-15583)", broker_setting="min.insync.replicas", at_least=1),
    ConfigKey("unclean.leader.election.enable", "boolean", _APPLIED,
              "whether the controller may elect a replica outside the ISR for this topic's "
              "partitions; turning it on elects for leaderless partitions at once "
              "(KAFKA-12670)",
              broker_setting="unclean.leader.election.enable"),
    ConfigKey("max.message.bytes", "int", _APPLIED,
              "the largest record batch a producer may send to this topic (MESSAGE_TOO_LARGE)",
              broker_setting="message.max.bytes", at_least=0),
    ConfigKey("segment.bytes", "int", _APPLIED,
              "a segment of this topic's log rolls at this size",
              broker_setting="log.segment.bytes", at_least=14),
    ConfigKey("index.interval.bytes", "int", _APPLIED,
              "bytes between offset index entries (segments opened from now on)",
              broker_setting="log.index.interval.bytes", at_least=0),
    ConfigKey("flush.messages", "long", _APPLIED,
              "fsync the log after this many messages (Long.MAX_VALUE: never)",
              broker_setting="log.flush.interval.messages", at_least=1),
    ConfigKey("flush.ms", "long", _APPLIED,
              "fsync the log when an append finds the last flush this old "
              "(Long.MAX_VALUE: never)",
              broker_setting="log.flush.interval.ms", at_least=0),
    ConfigKey("cleanup.policy", "list", _RESTRICTED, "what happens to old segments",
              default="delete", one_of=("compact", "delete"),
              honoured=lambda v: set(v) == {"delete"},
              refusal="log compaction is not implemented: only delete is accepted"),
    ConfigKey("retention.ms", "long", _RESTRICTED, "how long records are kept",
              default=str(WEEK_MS), at_least=-1, honoured=lambda v: v == -1 or v >= WEEK_MS,
              refusal=f"{_NO_DELETION}: only -1 (forever) or at least {WEEK_MS} "
                      "(Kafka's default of 7 days) is accepted"),
    ConfigKey("retention.bytes", "long", _RESTRICTED, "how many bytes a partition keeps",
              default="-1", honoured=lambda v: v == -1,
              refusal=f"{_NO_DELETION}: only -1 (no limit) is accepted"),
    ConfigKey("compression.type", "string", _RESTRICTED, "how the broker stores batches",
              default="producer",
              one_of=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
              honoured=lambda v: v == "producer",
              refusal="batches are stored as the producer sent them: only producer is accepted"),
    ConfigKey("message.timestamp.type", "string", _RESTRICTED, "which timestamp records carry",
              default="CreateTime", one_of=("CreateTime", "LogAppendTime"),
              honoured=lambda v: v == "CreateTime",
              refusal="batches keep the producer's timestamps: only CreateTime is accepted"),
    *(ConfigKey(name, "long", _RESTRICTED, "how far a record's timestamp may be from the "
                "broker's clock", default=str(LONG_MAX), at_least=0,
                honoured=lambda v: v == LONG_MAX,
                refusal=f"timestamps are not checked: only {LONG_MAX} (no limit) is accepted")
      for name in ("message.timestamp.difference.max.ms", "message.timestamp.before.max.ms",
                   "message.timestamp.after.max.ms")),
    ConfigKey("remote.storage.enable", "boolean", _RESTRICTED, "tiered storage for this topic",
              default="false", honoured=lambda v: v is False,
              refusal=f"{_NO_TIERED}: only false is accepted"),
    ConfigKey("delete.retention.ms", "long", _INERT, _NO_COMPACTION, default="86400000",
              at_least=0),
    ConfigKey("min.compaction.lag.ms", "long", _INERT, _NO_COMPACTION, default="0", at_least=0),
    ConfigKey("max.compaction.lag.ms", "long", _INERT, _NO_COMPACTION, default=str(LONG_MAX),
              at_least=1),
    ConfigKey("min.cleanable.dirty.ratio", "double", _INERT, _NO_COMPACTION, default="0.5",
              at_least=0, at_most=1),
    ConfigKey("file.delete.delay.ms", "long", _INERT,
              f"delay before a deleted segment's file goes; {_NO_DELETION}", default="60000",
              at_least=0),
    ConfigKey("segment.ms", "long", _INERT,
              "time-based segment rolls; segments roll at segment.bytes only, and rolling "
              "matters only to retention and compaction", default=str(WEEK_MS), at_least=1),
    ConfigKey("segment.jitter.ms", "long", _INERT,
              "jitter of time-based segment rolls (segment.ms)", default="0", at_least=0),
    ConfigKey("segment.index.bytes", "int", _INERT,
              "the offset index's preallocated size; the index here grows as needed",
              default="10485760", at_least=4),
    ConfigKey("preallocate", "boolean", _INERT,
              "preallocating segment files (performance only)", default="false"),
    ConfigKey("message.downconversion.enable", "boolean", _INERT,
              "down-conversion for old fetchers; Fetch starts at v4 here, so none is needed",
              default="true"),
    ConfigKey("message.format.version", "string", _INERT,
              "ignored by Kafka since 3.0 (KIP-724): batches are always magic v2",
              default="3.0-IV1", pattern=r"\d+\.\d+(\.\d+)?(-IV\d+)?"),
    *(ConfigKey(name, "list", _INERT,
                "replicas the replication throttle applies to; the throttle rate is a dynamic "
                "broker setting this broker does not have, so nothing is throttled (as in Kafka "
                "without a rate)", default="", pattern=r"\*|\d+:\d+")
      for name in ("leader.replication.throttled.replicas",
                   "follower.replication.throttled.replicas")),
    *(ConfigKey(name, "long", _INERT, f"local retention under tiered storage; {_NO_TIERED} "
                "(remote.storage.enable=false only)", default="-2", at_least=-2)
      for name in ("local.retention.ms", "local.retention.bytes")),
)}

_INTEGER = re.compile(r"[+-]?\d+")
_RANGES = {"int": (-2 ** 31, 2 ** 31 - 1), "long": (-2 ** 63, LONG_MAX)}


class InvalidConfig(ValueError):
    """A topic config Kafka answers with INVALID_CONFIG; the message says which."""


def parse(name: str, text: str) -> Any:
    """The value of `name` given as `text` (ConfigDef.parseType, then the
    key's validator and, for RESTRICTED keys, what this broker honours).
    Raises InvalidConfig naming the key and the value."""
    key = TOPIC_CONFIGS.get(name)
    if key is None:
        raise InvalidConfig(f"Unknown topic config name: {name}")
    try:
        value = _parse_type(key, text.strip())
        for item in (value if key.type == "list" else [value]):
            _check(key, item)
    except ValueError as e:
        raise InvalidConfig(f"Invalid value {text} for configuration {name}: {e}") from None
    if key.honoured is not None and not key.honoured(value):
        raise InvalidConfig(f"Invalid value {text} for configuration {name}: {key.refusal}")
    return value


def _parse_type(key: ConfigKey, text: str) -> Any:
    if key.type == "boolean":
        if text.lower() not in ("true", "false"):
            raise ValueError("Expected value to be either true or false")
        return text.lower() == "true"
    if key.type in _RANGES:
        low, high = _RANGES[key.type]
        if not _INTEGER.fullmatch(text) or not low <= int(text) <= high:
            raise ValueError(f"Not a number of type {key.type.upper()}")
        return int(text)
    if key.type == "double":
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError("Not a number of type DOUBLE")
        return value
    if key.type == "list":
        return [item.strip() for item in text.split(",")] if text else []
    return text


def _check(key: ConfigKey, value: Any) -> None:
    if key.at_least is not None and value < key.at_least:
        raise ValueError(f"Value must be at least {key.at_least:g}")
    if key.at_most is not None and value > key.at_most:
        raise ValueError(f"Value must be no more than {key.at_most:g}")
    if key.one_of is not None and value not in key.one_of:
        raise ValueError("String must be one of: " + ", ".join(key.one_of))
    if key.pattern is not None and not re.fullmatch(key.pattern, value):
        raise ValueError(f"{value!r} does not match {key.pattern}")


def validate(configs: Iterable[tuple[str, str | None]]) -> str | None:
    """Why these (name, value) pairs are not a valid set of topic configs,
    or None. The order is ControllerConfigurationValidator's: null values,
    then names, then values."""
    configs = list(configs)
    nulls = [name for name, value in configs if value is None]
    if nulls:
        return "Null value not supported for topic configs: " + ",".join(nulls)
    unknown = [name for name, _ in configs if name not in TOPIC_CONFIGS]
    if unknown:
        return f"Unknown topic config name: {unknown[0]}"
    try:
        for name, value in configs:
            parse(name, value)
    except InvalidConfig as e:
        return str(e)
    return None


def canonical_text(name: str, text: str) -> str:
    """A valid value as Kafka prints it back (ConfigDef.convertToString):
    trimmed, booleans in lower case, lists joined by commas."""
    value = parse(name, text)
    return ",".join(value) if isinstance(value, list) else kafka_text(value)


def default_text(name: str, settings: Mapping[str, Any]) -> str:
    """The value `name` has on a topic that does not set it: the broker
    setting it overrides, else Kafka's default."""
    key = TOPIC_CONFIGS[name]
    if key.broker_setting is not None:
        return kafka_text(settings[key.broker_setting])
    return key.default


def value_of(name: str, overrides: Mapping[str, str], fallback: Any) -> Any:
    """The topic's value of `name`: its override (already validated when it
    was set), else `fallback`."""
    return parse(name, overrides[name]) if name in overrides else fallback


def resolve(overrides: Mapping[str, str], settings: Mapping[str, Any]) -> dict[str, Any]:
    """Every APPLIED key's value on a topic: its override, else the broker
    setting it overrides."""
    return {name: value_of(name, overrides, settings[key.broker_setting])
            for name, key in TOPIC_CONFIGS.items() if key.effect is Effect.APPLIED}


# IncrementalAlterConfigs (KIP-339): AlterConfigOp.OpType ids.
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATIONS = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


@dataclass(frozen=True)
class ConfigChange:
    name: str
    operation: int      # SET, DELETE, APPEND or SUBTRACT
    value: str | None


class InvalidRequest(ValueError):
    """A change Kafka answers with INVALID_REQUEST."""


def changed(overrides: Mapping[str, str], changes: Iterable[ConfigChange]) -> dict[str, str]:
    """A topic's overrides after IncrementalAlterConfigs' `changes`, as
    ConfigurationControlManager.incrementalAlterConfigResource computes
    them: SET replaces, DELETE returns the key to its default, APPEND and
    SUBTRACT edit the items of a LIST-typed key (starting from its default
    when it is not set). Raises InvalidRequest for duplicate keys or an
    unknown operation, InvalidConfig for APPEND/SUBTRACT on a key that is
    not a list and for a result that does not validate."""
    changes = list(changes)
    names = [change.name for change in changes]
    if len(set(names)) != len(names):
        raise InvalidRequest("Error due to duplicate config keys")
    result = dict(overrides)
    for change in changes:
        operation = _OPERATIONS.get(change.operation)
        if operation is None:
            raise InvalidRequest(f"Unknown alter config operation {change.operation} "
                                 f"for {change.name}; expected 0 (SET), 1 (DELETE), "
                                 "2 (APPEND) or 3 (SUBTRACT)")
        if change.operation == SET:
            result[change.name] = change.value
        elif change.operation == DELETE:
            result.pop(change.name, None)
        else:
            key = TOPIC_CONFIGS.get(change.name)
            if key is None or key.type != "list":
                raise InvalidConfig(f"Can't {operation} to key {change.name} because its type "
                                    "is not LIST.")
            current = result.get(change.name, key.default)
            items = [item.strip() for item in current.split(",")] if current.strip() else []
            edits = [item.strip() for item in (change.value or "").split(",")]
            if change.operation == APPEND:
                items += [item for item in dict.fromkeys(edits) if item not in items]
            else:
                items = [item for item in items if item not in edits]
            result[change.name] = ",".join(items)
    problem = validate(result.items())
    if problem:
        raise InvalidConfig(problem)
    return result
