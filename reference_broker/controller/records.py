"""The metadata change records and their encoding.

Every change to the cluster's metadata is one record, and the metadata log is
the sequence of them: replaying it from the start rebuilds the state
(KIP-500/KIP-631, Kafka's `__cluster_metadata`). A record's offset is its
index in that sequence. The shapes follow Kafka's metadata records
(metadata/src/main/resources/common/metadata/): RegisterBrokerRecord,
FenceBrokerRecord, UnfenceBrokerRecord, TopicRecord, ConfigRecord (topic
resources only, as `SetTopicConfig`), RemoveTopicRecord, and for
partitions one simplification: where Kafka writes a PartitionRecord on
creation and PartitionChangeRecords (deltas) after, we always write the full
`PartitionState`, so a reader never has to merge.

Encoding: one JSON object per record, `{"type": <class name>, <fields>}`,
UTF-8, never containing a raw newline (so a file of them can be one per
line). `decode` checks every field and names the bad one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields


class CorruptMetadataRecord(ValueError):
    """Bytes that are not a well-formed metadata record."""


@dataclass(frozen=True, slots=True)
class CreateCluster:
    """The first record of a new metadata log: the cluster's id, which every
    broker reports in Metadata (Kafka keeps it in meta.properties, written
    by `kafka-storage format`; here the log carries it to the brokers)."""
    cluster_id: str


@dataclass(frozen=True, slots=True)
class RegisterBroker:
    """A broker (re)registers. It starts fenced (Kafka's RegisterBrokerRecord
    defaults `fenced` to true). Its broker epoch is this record's offset, as
    in QuorumController.registerBroker (`offsetControl.nextWriteOffset()`)."""
    broker_id: int
    host: str
    port: int
    epoch: int


@dataclass(frozen=True, slots=True)
class FenceBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class UnfenceBroker:
    broker_id: int


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    topic_id: str


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The whole state of one partition, written on creation and on every
    change. `leader` is -1 when there is none; the leader epoch moves on every
    leader change, the partition epoch on every change
    (PartitionRegistration.merge)."""
    topic: str
    partition: int
    replicas: tuple[int, ...]     # assignment order: elections prefer earlier replicas
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int
    partition_epoch: int


@dataclass(frozen=True, slots=True)
class SetTopicConfig:
    """One per-topic config override set (`value`), or removed so the topic
    falls back to the broker's setting (`value` None) — Kafka's ConfigRecord
    for a TOPIC resource. Written after the topic's CreateTopic and before
    its partitions on creation (ReplicationControlManager.createTopic), and
    alone by IncrementalAlterConfigs; deleting the topic drops them all."""
    topic: str
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class DeleteTopic:
    name: str


MetadataRecord = (CreateCluster | RegisterBroker | FenceBroker | UnfenceBroker | CreateTopic
                  | SetTopicConfig | PartitionState | DeleteTopic)

_TYPES = {cls.__name__: cls for cls in (CreateCluster, RegisterBroker, FenceBroker,
                                         UnfenceBroker, CreateTopic, SetTopicConfig,
                                         PartitionState, DeleteTopic)}


def encode(record: MetadataRecord) -> bytes:
    name = type(record).__name__
    if _TYPES.get(name) is not type(record):
        raise TypeError(f"encode: {record!r} is not a metadata record; expected one of "
                        + ", ".join(_TYPES))
    body = {"type": name}
    for f in fields(record):
        value = getattr(record, f.name)
        body[f.name] = list(value) if isinstance(value, tuple) else value
    return json.dumps(body, separators=(",", ":")).encode()


def decode(data: bytes) -> MetadataRecord:
    try:
        body = json.loads(data)
    except (UnicodeDecodeError, ValueError) as e:
        raise CorruptMetadataRecord(f"metadata record is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise CorruptMetadataRecord(f"metadata record is a JSON {type(body).__name__}, "
                                    "expected an object")
    name = body.get("type")
    cls = _TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        raise CorruptMetadataRecord(f"field 'type' is {name!r}; expected one of "
                                    + ", ".join(_TYPES))
    expected = {f.name: f.type for f in fields(cls)}
    unknown = sorted(set(body) - set(expected) - {"type"})
    if unknown:
        raise CorruptMetadataRecord(f"{name}: unknown field(s) {', '.join(unknown)}")
    values = {}
    for field_name, kind in expected.items():
        if field_name not in body:
            raise CorruptMetadataRecord(f"{name}: field {field_name!r} is missing")
        values[field_name] = _check(name, field_name, kind, body[field_name])
    return cls(**values)


def _check(record: str, field_name: str, kind: str, value):
    # Annotations are strings here (`from __future__ import annotations`).
    # bool is an int subclass in Python, but never a valid id or epoch.
    if kind == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif kind == "str":
        ok = isinstance(value, str)
    elif kind == "str | None":
        ok = value is None or isinstance(value, str)
    else:
        ok = isinstance(value, list) and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value)
        value = tuple(value) if ok else value
    if not ok:
        shown = {"int": "an integer", "str": "a string",
                 "str | None": "a string or null"}.get(kind, "a list of integers")
        raise CorruptMetadataRecord(f"{record}: field {field_name!r} is {value!r}; "
                                    f"expected {shown}")
    return value
