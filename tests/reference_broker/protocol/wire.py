"""A socket-free wire for the reference broker: a real single-node
`broker,controller` node on a data dir, `Connection`s fed bytes through a fake transport, requests encoded and
responses decoded by kio — a client that knows nothing of the broker's
own framing code.

`run(main)` runs one test's coroutine on a fresh event loop whose exception
handler records everything it is told, and fails the test if anything was
reported or if the broker logged an error (a handler that crashed shows up
as a closed connection: the log line is what tells it from a rejected frame).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import struct
from collections import deque
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

from kio.index import load_response_schema
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.errors import ErrorCode

from reference_broker.config import BrokerConfig, parse_settings
from reference_broker.protocol import framing
from reference_broker.node import Node as ServerNode
from reference_broker.protocol.dispatch import VERSIONS
from reference_broker.server import Connection
from tests.reference_broker.protocol import entities

ADDRESS = ("127.0.0.1", 9092)
SETTINGS = ("group.initial.rebalance.delay.ms=0",)
TIMEOUT = 5.0

_SIZE = struct.Struct(">i")
_KEY_VERSION_CORRELATION = struct.Struct(">hhi")


def advertised(api_keys) -> dict[int, tuple[int, int]]:
    """ApiVersions' answer as dispatch's table: key -> (min, max)."""
    return {k.api_key: (k.min_version, k.max_version) for k in api_keys}


async def settle() -> None:
    """Let connection workers run everything they can without waiting."""
    for _ in range(10):
        await asyncio.sleep(0)


def broker_config(data_dir: Path, *settings: str, bugs: frozenset[str] = frozenset()) \
        -> BrokerConfig:
    return BrokerConfig(node_id=1, listen=ADDRESS, advertise=ADDRESS, data_dir=data_dir,
                        settings=parse_settings([*SETTINGS, *settings]), bugs=bugs)


class Node:
    """A broker and the connections made to it. Like the sockets of a real
    server, every connection stays alive until one side closes it; leaving
    the node closes them all, then the broker, as `server.serve` does."""

    def __init__(self, server: ServerNode):
        self.server = server
        self.broker = server.broker
        self.clients: list[Client] = []

    def connect(self) -> Client:
        client = Client(self.server)
        self.clients.append(client)
        return client

    async def assert_serves(self, topic: str = "t") -> None:
        """A fresh, well-behaved connection gets ApiVersions and Metadata
        right (`topic` exists or is auto-created)."""
        client = self.connect()
        versions = await client.call(entities.api_versions())
        assert versions.error_code == ErrorCode.none
        assert advertised(versions.api_keys) == VERSIONS
        meta = await client.call(entities.metadata([topic]))
        assert [(b.node_id, b.host, b.port) for b in meta.brokers] == [(1, *ADDRESS)]
        assert [(t.name, t.error_code, len(t.partitions)) for t in meta.topics] == \
            [(topic, ErrorCode.none, 1)]


@contextlib.asynccontextmanager
async def open_node(data_dir: Path, *settings: str,
                    bugs: frozenset[str] = frozenset()) -> AsyncIterator[Node]:
    """An open broker (opened inside the loop: loading `__consumer_offsets`
    starts member timers) to connect to, with these bug switches on."""
    server = ServerNode(broker_config(data_dir, *settings, bugs=bugs))
    await server.start()
    node = Node(server)
    try:
        yield node
    finally:
        for client in node.clients:
            client.disconnect()
        await asyncio.sleep(0)  # let the cancelled workers finish
        for client in node.clients:
            client.assert_worker_healthy()
        await server.close()


class _ErrorLog(logging.Handler):
    def __init__(self):
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def run(main: Coroutine, *, expected_error: str | None = None) -> Any:
    """asyncio.run(main), failing on anything the loop's exception handler or
    the broker's error log saw, including during shutdown and after garbage
    collection of tasks ("Task exception was never retrieved"). With
    `expected_error`, the broker must have logged errors, each containing it."""
    reported: list[dict] = []
    errors = _ErrorLog()
    logger = logging.getLogger("reference_broker")
    logger.addHandler(errors)
    try:
        with asyncio.Runner() as runner:
            runner.get_loop().set_exception_handler(lambda loop, context: reported.append(context))
            result = runner.run(main)
        gc.collect()
    finally:
        logger.removeHandler(errors)
    assert not reported, f"event loop exception handler was called: {reported}"
    logged = [f"{r.getMessage()} {r.exc_text or ''}" for r in errors.records]
    if expected_error is None:
        assert not logged, f"broker logged errors: {logged}"
    else:
        assert logged and all(expected_error in line for line in logged), logged
    return result


class FakeTransport(asyncio.Transport):
    """What a `Connection` sees of a socket: writes are kept, close() is
    recorded and followed by connection_lost on the next loop turn, as
    asyncio's socket transports do."""

    def __init__(self, protocol: asyncio.Protocol, peer=("127.0.0.1", 40000)):
        super().__init__()
        self.protocol = protocol
        self.peer = peer
        self.written = bytearray()
        self.written_after_close = bytearray()
        self.closed = False
        self.reading = True
        self.changed = asyncio.Event()

    def write(self, data) -> None:
        if self.closed:
            self.written_after_close += data
        else:
            self.written += data
        self.changed.set()

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.changed.set()
            asyncio.get_running_loop().call_soon(self.protocol.connection_lost, None)

    def is_closing(self) -> bool:
        return self.closed

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def is_reading(self) -> bool:
        return self.reading

    def get_extra_info(self, name, default=None):
        return {"peername": self.peer}.get(name, default)


class ConnectionClosed(Exception):
    """The broker closed the connection before the awaited response."""


def encode_request(request, correlation_id: int, client_id: str | None = "wire-test") -> bytes:
    """The size-prefixed frame of a kio request entity."""
    return framing.encode_request(request, correlation_id, client_id)


def size_prefixed(body: bytes) -> bytes:
    return _SIZE.pack(len(body)) + body


def response_schema(api_key: int, api_version: int) -> type:
    """The response entity a request of (key, version) is answered with.
    KIP-511: ApiVersions of a version the broker does not advertise is
    answered in v0, whether or not kio knows that version."""
    low, high = VERSIONS[entities.API_VERSIONS]
    if api_key == entities.API_VERSIONS and not low <= api_version <= high:
        return ApiVersionsResponseV0
    return load_response_schema(api_key, api_version)


decode_response = framing.decode_response


def split_frames(data: bytes | bytearray) -> tuple[list[bytes], int]:
    """Complete size-prefixed frame bodies at the start of `data`, and how
    many bytes they used."""
    frames, position = [], 0
    while len(data) - position >= 4:
        (size,) = _SIZE.unpack_from(data, position)
        assert size >= 0, f"negative response size {size}"
        if len(data) - position - 4 < size:
            break
        frames.append(bytes(data[position + 4:position + 4 + size]))
        position += 4 + size
    return frames, position


class Client:
    """One connection to the broker, driven by hand."""

    def __init__(self, server: ServerNode):
        self.connection = Connection(server)
        self.transport = FakeTransport(self.connection)
        self.connection.connection_made(self.transport)
        self._next_correlation_id = 1
        self._read = 0
        # (correlation id, api key, api version) of requests still unanswered, in order
        self.pending: deque[tuple[int, int, int]] = deque()

    def send(self, request) -> int:
        """Encode and feed one request; returns its correlation id."""
        correlation_id = self._next_correlation_id
        self._next_correlation_id += 1
        self.expect(correlation_id, request.__api_key__, request.__version__)
        self.feed(encode_request(request, correlation_id))
        return correlation_id

    def expect(self, correlation_id: int, api_key: int, api_version: int) -> None:
        """Register a request fed as raw bytes, so its answer can be decoded."""
        self.pending.append((correlation_id, api_key, api_version))

    def feed(self, data: bytes, *, chunk: int | None = None) -> None:
        """Raw bytes, as `chunk`-sized reads of the socket (one read if None);
        nothing more arrives once the broker closed the connection."""
        step = chunk or max(len(data), 1)
        for start in range(0, len(data), step):
            if self.transport.closed:
                return
            self.connection.data_received(data[start:start + step])

    async def receive(self, timeout: float = TIMEOUT) -> Any:
        """The next response, decoded with the schema of the oldest
        unanswered request (responses come in request order)."""
        correlation_id, body = await self._next_frame(timeout)
        expected, key, version = self.pending.popleft()
        assert correlation_id == expected, \
            f"response for correlation id {correlation_id}, expected {expected}"
        decoded_id, response = decode_response(body, response_schema(key, version))
        assert decoded_id == correlation_id
        return response

    async def _next_frame(self, timeout: float) -> tuple[int, bytes]:
        """(correlation id, body) of the next response frame; raises
        ConnectionClosed if the broker closed first."""
        async with asyncio.timeout(timeout):
            while True:
                frames, _ = split_frames(self.transport.written[self._read:])
                if frames:
                    self._read += 4 + len(frames[0])
                    return struct.unpack_from(">i", frames[0])[0], frames[0]
                if self.transport.closed:
                    raise ConnectionClosed(f"closed with {len(self.pending)} requests unanswered")
                self.transport.changed.clear()
                await self.transport.changed.wait()

    async def call(self, request, *, timeout: float = TIMEOUT) -> Any:
        self.send(request)
        return await self.receive(timeout)

    async def closed(self, timeout: float = TIMEOUT) -> None:
        """Wait until the broker closes the connection; nothing may be
        written after the close, and the connection's worker must have ended
        without an exception."""
        async with asyncio.timeout(timeout):
            while not self.transport.closed:
                self.transport.changed.clear()
                await self.transport.changed.wait()
            await asyncio.sleep(0)  # connection_lost runs on the next turn
            await asyncio.sleep(0)
        assert not self.transport.written_after_close
        self.assert_worker_healthy()

    def unread(self) -> bytes:
        return bytes(self.transport.written[self._read:])

    def assert_worker_healthy(self) -> None:
        worker = self.connection.worker
        if worker is not None and worker.done() and not worker.cancelled():
            assert worker.exception() is None, f"connection worker raised {worker.exception()!r}"

    def disconnect(self) -> None:
        """The client goes away (the socket closed from its side)."""
        if not self.transport.closed:
            self.transport.closed = True
            self.connection.connection_lost(None)


def header_prefix(api_key: int, api_version: int, correlation_id: int) -> bytes:
    """The fixed first bytes of any request header (key, version, correlation id)."""
    return _KEY_VERSION_CORRELATION.pack(api_key, api_version, correlation_id)
