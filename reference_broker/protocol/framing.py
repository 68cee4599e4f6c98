"""Bytes ⇄ typed Kafka frames, with no I/O.

A Kafka request on the wire is a 4-byte big-endian size, then a request
header and a body whose layout depends on the api key and version in the
header's first four bytes. Header and body are decoded by kio; the header
version follows from the request schema (flexible versions use header v2,
KIP-482). Responses are framed the same way, with the response header kio
gives each response schema (v0 or v1; always v0 for ApiVersions, so a client
that does not yet know our versions can read it, KIP-511). The client side
(`encode_request`, `decode_response`) is here too: the broker's own peer
connections speak it.

Anything that cannot be decoded raises `FrameError`; the connection that
sent it is closed by the server, the broker keeps running. What Kafka
reads past is read past here too: tagged fields the schema does not know
(protocol/tagged_fields.py) and bytes after the request's last field
(RequestContext.parseRequest reads what the schema says; librdkafka 2.16
leaves three such bytes in its Metadata v9 "all topics" request).
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_request_schema
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError

from reference_broker.protocol.nullability import refuse_null_arrays
from reference_broker.protocol.tagged_fields import read_skipping_unknown_tags

_SIZE = struct.Struct(">i")
_KEY_VERSION = struct.Struct(">hh")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")


class FrameError(ValueError):
    """A frame that cannot be read: the connection must be closed."""


@dataclass(frozen=True)
class UnsupportedRequest:
    """A well-framed request whose api key or version we cannot decode.

    Only ApiVersions gets an answer (KIP-511: in the v0 format, so the client
    can step down); any other is a protocol violation."""
    api_key: int
    api_version: int
    correlation_id: int


def take_frames(buffer: bytearray, max_request_bytes: int) -> list[bytes]:
    """Remove and return every complete frame body at the start of `buffer`.

    A size above `max_request_bytes` (Kafka's socket.request.max.bytes) or
    below the smallest header is rejected before any of it is buffered.
    """
    frames = []
    start = 0
    while len(buffer) - start >= 4:
        (size,) = _SIZE.unpack_from(buffer, start)
        if size < _KEY_VERSION_CORRELATION.size or size > max_request_bytes:
            raise FrameError(f"request size {size} outside [{_KEY_VERSION_CORRELATION.size}, "
                             f"{max_request_bytes}] (socket.request.max.bytes)")
        if len(buffer) - start - 4 < size:
            break
        frames.append(bytes(buffer[start + 4:start + 4 + size]))
        start += 4 + size
    del buffer[:start]
    return frames


def decode_request(frame: bytes) -> tuple[Any, Any] | UnsupportedRequest:
    """(header, request) entities of one frame body, or UnsupportedRequest."""
    api_key, api_version, correlation_id = _KEY_VERSION_CORRELATION.unpack_from(frame)
    try:
        schema = load_request_schema(api_key, api_version)
    except (UnknownAPIKey, UnknownEntity):
        return UnsupportedRequest(api_key, api_version, correlation_id)
    try:
        try:
            header, used = entity_reader(schema.__header_schema__)(frame, 0)
            request, _ = entity_reader(schema)(frame, used)
        except KeyError:
            # kio's reader met a tagged field tag it does not know: read the
            # frame again as Kafka does, skipping it.
            header, used = read_skipping_unknown_tags(schema.__header_schema__, frame, 0)
            request, _ = read_skipping_unknown_tags(schema, frame, used)
        refuse_null_arrays(request)
    except (SerialError, ValueError, IndexError, OverflowError, KeyError) as e:
        raise FrameError(f"api key {api_key} v{api_version} correlation id {correlation_id}: "
                         f"cannot decode: {type(e).__name__}: {e}") from e
    return header, request


def encode_response(correlation_id: int, response: Any) -> bytes:
    """A size-prefixed response frame."""
    return _frame(response.__header_schema__(correlation_id=correlation_id), response)


def encode_request(request: Any, correlation_id: int, client_id: str | None = None) -> bytes:
    """A size-prefixed request frame."""
    header = request.__header_schema__(
        request_api_key=request.__api_key__, request_api_version=request.__version__,
        correlation_id=correlation_id, client_id=client_id)
    return _frame(header, request)


def decode_response(body: bytes, schema: type) -> tuple[int, Any]:
    """(correlation id, response entity) of one response frame body, which
    must be consumed exactly."""
    header, used = entity_reader(schema.__header_schema__)(body, 0)
    response, size = entity_reader(schema)(body, used)
    if used + size != len(body):
        raise FrameError(f"{schema.__name__}: {len(body) - used - size} undecoded bytes")
    return header.correlation_id, response


def _frame(header: Any, entity: Any) -> bytes:
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    entity_writer(type(header))(buffer, header)
    entity_writer(type(entity))(buffer, entity)
    frame = buffer.getbuffer()
    _SIZE.pack_into(frame, 0, len(frame) - 4)
    data = bytes(frame)
    del frame
    return data


def request_key(frame: bytes) -> tuple[int, int]:
    """(api key, api version) of a frame, for log lines about frames that
    could not be decoded."""
    return _KEY_VERSION.unpack_from(frame)
