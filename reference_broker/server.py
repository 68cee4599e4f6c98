"""The network edge: one asyncio protocol object per connection, one shared
node (broker, controller or both) behind them all.

Kafka answers the requests of one connection in the order they arrived and
handles them one at a time (the network thread mutes a channel until its
response is sent), so a producer's pipelined batches are appended in the
order it sent them. Clients may pipeline: frames queue up, and reading
pauses while too many wait. A frame that cannot be decoded, is too large,
or asks for an API we do not speak closes that connection with a log line;
nothing a client sends can stop the broker.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections import deque

from reference_broker.node import Node
from reference_broker.protocol.client import set_client_host
from reference_broker.protocol.dispatch import dispatch
from reference_broker.protocol.framing import (
    FrameError, UnsupportedRequest, decode_request, encode_response, request_key, take_frames,
)
from reference_broker.protocol.produce import CloseConnection

log = logging.getLogger("reference_broker.server")

# Frames buffered per connection before reading pauses (flow control).
_MAX_QUEUED = 64


class Connection(asyncio.Protocol):
    def __init__(self, node: Node):
        self.node = node
        self.buffer = bytearray()
        self.frames: deque[bytes] = deque()
        self.ready = asyncio.Event()
        self.transport: asyncio.Transport | None = None
        self.worker: asyncio.Task | None = None
        self.peer = None
        self.paused = False

    def connection_made(self, transport):
        self.transport = transport
        self.peer = transport.get_extra_info("peername")
        self.worker = asyncio.get_running_loop().create_task(self._serve())

    def data_received(self, data: bytes):
        self.buffer += data
        try:
            frames = take_frames(self.buffer, self.node.config["socket.request.max.bytes"])
        except FrameError as e:
            self._close(f"bad frame: {e}")
            return
        if frames:
            self.frames.extend(frames)
            self.ready.set()
            if len(self.frames) >= _MAX_QUEUED and not self.paused:
                self.paused = True
                self.transport.pause_reading()

    def connection_lost(self, exc):
        if self.worker is not None:
            self.worker.cancel()

    def _close(self, reason: str) -> None:
        log.warning("closing connection from %s: %s", self.peer, reason)
        self.frames.clear()
        if self.transport is not None:
            self.transport.close()

    async def _serve(self) -> None:
        set_client_host(self.peer[0] if self.peer else "")
        while True:
            if not self.frames:
                self.ready.clear()
                await self.ready.wait()
                continue
            frame = self.frames.popleft()
            if self.paused and len(self.frames) < _MAX_QUEUED // 2:
                self.paused = False
                self.transport.resume_reading()
            reply = None
            try:
                decoded = decode_request(frame)
                response = await dispatch(self.node, decoded)
                if response is not None:
                    # Encoded inside the guard: an answer kio cannot write
                    # (a string too long for its field) is a handler bug too.
                    correlation_id = decoded.correlation_id \
                        if isinstance(decoded, UnsupportedRequest) else decoded[0].correlation_id
                    reply = encode_response(correlation_id, response)
            except (FrameError, CloseConnection) as e:
                self._close(str(e))
                return
            except Exception:  # noqa: BLE001 — a bug in one handler must not stop the broker
                key, version = request_key(frame)
                log.exception("api key %d v%d failed; closing the connection", key, version)
                self._close("internal error")
                return
            if reply is not None and not self.transport.is_closing():
                self.transport.write(reply)


async def serve(node: Node, ready: asyncio.Event | None = None) -> None:
    """Start the node, listen once it may serve (a broker: once unfenced),
    and serve until SIGTERM or SIGINT; then close the logs cleanly."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    config = node.config
    host, port = config.listen
    server = None
    try:
        starting = loop.create_task(node.start())
        stopping = loop.create_task(stop.wait())
        await asyncio.wait([starting, stopping], return_when=asyncio.FIRST_COMPLETED)
        if not starting.done():
            starting.cancel()
            await asyncio.gather(starting, return_exceptions=True)
            return
        starting.result()
        server = await loop.create_server(lambda: Connection(node), host, port,
                                          reuse_address=True)
        log.info("node %d (%s) listening on %s:%d, advertising %s:%d", node.node_id,
                 ",".join(sorted(config.process_roles)), host, port, *config.advertise)
        if ready is not None:
            ready.set()
        await stopping
    finally:
        log.info("node %d shutting down", node.node_id)
        if server is not None:
            server.close()
        await node.close()
