"""Who sent the request being handled (JoinGroup records the client host)."""

from __future__ import annotations

from contextvars import ContextVar

_host: ContextVar[str] = ContextVar("client_host", default="")


def client_host() -> str:
    return _host.get()


def set_client_host(host: str) -> None:
    _host.set(host)
