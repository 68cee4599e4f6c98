"""Hypothesis strategies for request frames, from well-formed to hostile:
any request entity kio can encode (every API and version the broker
advertises, with arbitrary field values), valid requests with bytes
flipped, inserted or deleted, and honest bodies behind lying sizes.

Strings, records and sizes are biased towards values the broker acts on
(the topic "t" exists, the group "g" is served), so that requests get past
the first lookup into the handlers."""

from __future__ import annotations

import dataclasses
import struct
import types
import typing
from functools import cache

from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import Records

from reference_broker.protocol.dispatch import VERSIONS
from tests.reference_broker.protocol import entities
from tests.reference_broker.protocol.wire import encode_request, size_prefixed
from tests.reference_broker.record_batches import kio_batch, values_batch

BATCHES = [values_batch(2), kio_batch([b"k"], producer_id=0, producer_epoch=0, base_sequence=0)]

TEMPLATES = [encode_request(request, correlation_id)[4:] for correlation_id, request in enumerate([
    entities.produce("t", 0, BATCHES[0]),
    entities.produce("t", 0, BATCHES[1], version=3),
    entities.metadata(["t", "u"]),
    entities.metadata(None, version=1),
    entities.fetch("t", 0, 0),
    entities.fetch("t", 0, 1, version=4),
    entities.api_versions(),
    entities.init_producer_id(),
    entities.offset_commit("g", -1, "", {("t", 0): 1}),
    entities.join_group("g", version=4),
], start=1)]

# As long as a (legacy, int16-sized) string field holds: an answer that
# quotes one must still fit its own fields.
_LONGEST = st.sampled_from(["x" * 32767, "é" * 16383])
_BY_TYPE = {
    TopicName: st.sampled_from(["t", "u", "__consumer_offsets"]) | st.text(max_size=6) | _LONGEST,
    GroupId: st.sampled_from(["g", ""]) | st.text(max_size=6) | _LONGEST,
    Records: st.none() | st.sampled_from(BATCHES) | st.binary(max_size=80),
}
# Partition indexes near the real ones; partition counts small, as a legal
# CreateTopics of thousands of partitions costs a log directory each.
_BY_FIELD = {
    "num_partitions": st.integers(-2, 3),
    "replication_factor": st.integers(-2, 3),
    "partition": st.integers(-1, 2),
    "partition_index": st.integers(-1, 2),
    "index": st.integers(-1, 2),
}


def _strategy(annotation) -> st.SearchStrategy:
    """Values of one kio field type: nested entities built field by field,
    tuples short, the biased types above, everything else from kio's own
    Hypothesis registrations."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return st.one_of(*(_strategy(arg) for arg in typing.get_args(annotation)))
    if annotation is type(None):
        return st.none()
    if origin is tuple:
        return st.lists(_strategy(typing.get_args(annotation)[0]), max_size=3).map(tuple)
    if annotation in _BY_TYPE:
        return _BY_TYPE[annotation]
    if dataclasses.is_dataclass(annotation):
        return _entity(annotation)
    return st.from_type(annotation)


@cache
def _entity(cls: type) -> st.SearchStrategy:
    hints = typing.get_type_hints(cls)
    return st.builds(cls, **{
        field.name: _BY_FIELD[field.name] if field.name in _BY_FIELD
        else _strategy(hints[field.name])
        for field in dataclasses.fields(cls) if field.init})


@st.composite
def requests(draw) -> bytes:
    """A well-formed frame of any request the broker advertises."""
    key, (low, high) = draw(st.sampled_from(sorted(VERSIONS.items())))
    schema = load_request_schema(key, draw(st.integers(low, high)))
    return encode_request(draw(_entity(schema)), draw(st.integers(-(2 ** 31), 2 ** 31 - 1)))


@st.composite
def mutated_requests(draw) -> bytes:
    """A valid request, its body damaged, behind an honest size."""
    body = bytearray(draw(st.sampled_from(TEMPLATES)))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "insert", "delete"]))
        at = draw(st.integers(0, len(body)))
        if kind == "flip" and at < len(body):
            body[at] ^= draw(st.integers(1, 255))
        elif kind == "insert":
            body[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:
            del body[at:at + draw(st.integers(1, 8))]
    return size_prefixed(bytes(body))


@st.composite
def lying_prefixes(draw, max_request: int) -> bytes:
    """A valid body behind a size that is not its own."""
    body = draw(st.sampled_from(TEMPLATES))
    size = draw(st.one_of(
        st.integers(0, len(body) - 1), st.integers(len(body) + 1, len(body) + 64),
        st.sampled_from([-1, -(2 ** 31), 7, max_request + 1, 2 ** 31 - 1])))
    return struct.pack(">i", size) + body
