"""A connection from this broker to another node — the controller, or a
partition leader it replicates from — speaking the Kafka protocol with kio.

One request at a time per connection (the far side answers in order anyway);
any failure closes the connection and raises PeerError, and the next request
reconnects. Callers decide whether and when to retry.
"""

from __future__ import annotations

import asyncio
import itertools
import struct

from kio.index import load_response_schema
from kio.serial.errors import SerialError

from reference_broker.protocol.framing import decode_response, encode_request

_SIZE = struct.Struct(">i")


class PeerError(ConnectionError):
    """The peer could not be reached or answered something unreadable."""


class Peer:
    def __init__(self, host: str, port: int, client_id: str):
        self.host, self.port, self.client_id = host, port, client_id
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self._lock = asyncio.Lock()
        self._correlation = itertools.count(1)

    def __repr__(self) -> str:
        return f"Peer({self.host}:{self.port})"

    async def request(self, request, timeout: float):
        """Send `request` (a kio request entity), return the response entity."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._exchange(request), timeout)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError,
                    SerialError, ValueError) as e:
                self.close()
                raise PeerError(f"{self}: {type(e).__name__}: {e}") from e
            except asyncio.CancelledError:
                # The caller gave up mid-exchange (its client went away): the
                # answer may still arrive, and would be read as the next
                # request's. Only a fresh connection is in step.
                self.close()
                raise

    async def _exchange(self, request):
        if self._streams is None:
            self._streams = await asyncio.open_connection(self.host, self.port)
        reader, writer = self._streams
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        writer.write(encode_request(request, correlation_id, self.client_id))
        await writer.drain()
        (size,) = _SIZE.unpack(await reader.readexactly(4))
        answered, response = decode_response(
            await reader.readexactly(size),
            load_response_schema(request.__api_key__, request.__version__))
        if answered != correlation_id:
            raise ValueError(f"correlation id {answered}, expected {correlation_id}")
        return response

    def close(self) -> None:
        if self._streams is not None:
            self._streams[1].close()
            self._streams = None


class Peers:
    """A connection per broker, for one kind of request this broker makes
    of the others (transaction markers, verifications): kinds get pools of
    their own so that one does not queue behind the other."""

    def __init__(self, client_id: str):
        self.client_id = client_id
        self._peers: dict[int, Peer] = {}

    def to(self, broker_id: int, host: str, port: int) -> Peer:
        peer = self._peers.get(broker_id)
        if peer is None or (peer.host, peer.port) != (host, port):
            if peer is not None:
                peer.close()
            peer = self._peers[broker_id] = Peer(host, port, self.client_id)
        return peer

    def close(self) -> None:
        for peer in self._peers.values():
            peer.close()
        self._peers.clear()
