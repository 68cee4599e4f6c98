"""The gate's control socket: one command per connection over a unix
socket, one JSON line back.

    client: `stall\\n`    gate: {"ok": true, "command": "stall", "stalled": true, ...}

Commands: `stall`, `unstall`, `errors`, `stop-errors`, `heal` (unstall and
stop errors), `drop` (forget what is not written back: `dropped_files`,
`dropped_bytes`), `sync` (write everything back), `status`, `shutdown`
(write back, unmount, exit — what SIGTERM does). Every answer carries the
gate's status. The server runs in threads of its own, never in a FUSE
worker, so it answers while the disk is stalled.

Unix socket paths are short (108 bytes): both sides bind or connect to
the socket's name from inside its directory (a `/proc/self/fd/N/` path).
"""

from __future__ import annotations

import json
import os
import socket
import socketserver
import threading
from collections.abc import Callable

COMMANDS = ("stall", "unstall", "errors", "stop-errors", "heal", "drop", "sync", "status",
            "shutdown")


class GateUnreachable(OSError):
    """No gate answers on the socket (none mounted, or it died)."""


def _short(path: str) -> tuple[str, int]:
    """A path to `path` short enough for AF_UNIX, and the directory fd
    that keeps it valid (close it after bind/connect)."""
    directory, name = os.path.split(os.path.abspath(path))
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    return f"/proc/self/fd/{fd}/{name}", fd


class ControlServer:
    def __init__(self, path: str, handle: Callable[[str], dict]):
        self.path = os.path.abspath(path)
        self.handle = handle
        if os.path.exists(self.path):
            os.unlink(self.path)    # a dead gate's socket
        outer = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                command = self.rfile.readline(256).decode(errors="replace").strip()
                try:
                    answer = {"ok": True, "command": command, **outer.handle(command)}
                except Exception as e:  # noqa: BLE001 — the client gets it
                    answer = {"ok": False, "command": command,
                              "error": f"{type(e).__name__}: {e}"}
                self.wfile.write(json.dumps(answer).encode() + b"\n")

        class Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
            daemon_threads = True

        short, fd = _short(self.path)
        try:
            self.server = Server(short, Handler)
        finally:
            os.close(fd)
        self.thread = threading.Thread(target=self.server.serve_forever, name="control",
                                       daemon=True)

    def start(self) -> None:
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def request(path: str, command: str, timeout: float = 30.0) -> dict:
    """Send one command; the gate's answer. GateUnreachable when nobody
    listens on path."""
    if not os.path.exists(path):
        raise GateUnreachable(f"no disk gate socket at {path}: no gate is mounted there "
                              f"(python -m nemesis.disk serve ... --control {path})")
    short, fd = _short(path)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            try:
                sock.connect(short)
            except (ConnectionRefusedError, FileNotFoundError) as e:
                raise GateUnreachable(f"the disk gate at {path} does not answer ({e}): it "
                                      f"died; unmount it (nemesis.disk.fault.unmount_all)") from e
            os.close(fd)
            fd = -1
            sock.sendall(command.encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    raise GateUnreachable(f"the disk gate at {path} closed the connection "
                                          f"without answering {command!r}")
                data += chunk
    finally:
        if fd >= 0:
            os.close(fd)
    return json.loads(data)
