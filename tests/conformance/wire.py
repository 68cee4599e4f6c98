"""A blocking Kafka-protocol client for the conformance suite: one TCP
connection, requests encoded and responses decoded by kio alone — neither
broker's code is involved, so both are spoken to by the same bytes.

Requests on one connection are answered in order (Kafka's rule); `send`
and `receive` may be split so that a request that blocks on the broker (a
JoinGroup waiting for a rebalance) can be left outstanding while other
connections go on. acks=0 Produce gets no answer: `send(expect=False)`.
A few answers are read with a schema of the suite's own (lenient.py) where
kio refuses what both brokers write.
"""

from __future__ import annotations

import io
import socket
import struct
from collections import deque
from typing import Any

from kio.index import load_response_schema
from kio.serial import entity_reader, entity_writer

from tests.conformance.lenient import SCHEMAS as LENIENT

_SIZE = struct.Struct(">i")
TIMEOUT = 30.0      # s: the longest any single answer may take (acks=all, a rebalance)


class Closed(Exception):
    """The broker closed the connection (or it was never open)."""


def encode(request: Any, correlation_id: int, client_id: str = "kchaos-conformance") -> bytes:
    header = request.__header_schema__(
        request_api_key=request.__api_key__, request_api_version=request.__version__,
        correlation_id=correlation_id, client_id=client_id)
    body = io.BytesIO()
    entity_writer(type(header))(body, header)
    entity_writer(type(request))(body, request)
    return _SIZE.pack(len(body.getvalue())) + body.getvalue()


def decode(body: bytes, schema: type) -> tuple[int, Any]:
    header, used = entity_reader(schema.__header_schema__)(body, 0)
    response, size = entity_reader(schema)(body, used)
    if used + size != len(body):
        raise ValueError(f"{schema.__name__}: {len(body) - used - size} undecoded bytes")
    return header.correlation_id, response


class Connection:
    def __init__(self, host: str, port: int, *, timeout: float = TIMEOUT):
        self.address = (host, port)
        try:
            self.sock = socket.create_connection(self.address, timeout=timeout)
        except OSError as e:
            raise Closed(f"{host}:{port}: {e}") from e
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._next = 1
        self.pending: deque[tuple[int, type]] = deque()
        self.closed = False

    def send(self, request: Any, *, expect: bool = True) -> None:
        if self.closed:
            raise Closed(f"{self.address}: closed")
        correlation_id, self._next = self._next, self._next + 1
        if expect:
            key = (request.__api_key__, request.__version__)
            self.pending.append((correlation_id, LENIENT.get(key) or load_response_schema(*key)))
        try:
            self.sock.sendall(encode(request, correlation_id))
        except OSError as e:
            self.close()
            raise Closed(f"{self.address}: {e}") from e

    def receive(self) -> Any:
        correlation_id, schema = self.pending.popleft()
        (size,) = _SIZE.unpack(self._read(4))
        got, response = decode(self._read(size), schema)
        if got != correlation_id:
            raise AssertionError(f"{self.address}: answer to correlation id {got}, "
                                 f"expected {correlation_id}")
        return response

    def call(self, request: Any) -> Any:
        self.send(request)
        return self.receive()

    def is_closed_by_peer(self, wait: float = 0.5) -> bool:
        """Whether the broker has closed this connection (EOF within wait)."""
        if self.closed:
            return True
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(1, socket.MSG_PEEK)
        except (TimeoutError, socket.timeout):
            return False
        except OSError:
            data = b""
        finally:
            if not self.closed:
                self.sock.settimeout(TIMEOUT)
        if not data:
            self.close()
            return True
        return False

    def _read(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except OSError as e:
                self.close()
                raise Closed(f"{self.address}: {e}") from e
            if not chunk:
                self.close()
                raise Closed(f"{self.address}: closed by the broker")
            data += chunk
        return bytes(data)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.sock.close()
