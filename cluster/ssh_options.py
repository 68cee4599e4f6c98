"""How kchaos reaches ssh hosts (`SshOptions`, one per backend, the same for
every host) and what goes wrong doing it (`SshError` and its kinds)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from cluster.node import SetupError

# Where nodes work on their hosts (`<root>/n<i>`), unless told otherwise.
DEFAULT_ROOT = "/var/lib/kchaos"


class SshError(SetupError, ConnectionError):
    """A host cannot be reached, refuses us, or dropped the session."""


class HostKeyRejected(SshError):
    """The host's key is not in known_hosts (and may not be added) or has changed."""


class SessionLost(SshError):
    """The session dropped while a command with side effects ran: it may or
    may not have taken effect, so it was not repeated."""


@dataclass(frozen=True)
class SshOptions:
    """How to reach every host of a backend (serialisable as it is)."""
    user: str = "root"
    port: int = 22
    key_file: str | None = None       # None: the SSH agent's and ~/.ssh's keys
    known_hosts: str | None = None    # None: ~/.ssh/known_hosts
    accept_new_host_keys: bool = False
    connect_timeout: float = 10.0
    reconnect_for: float = 60.0
    dead_after: float = 20.0

    def __post_init__(self):
        if not isinstance(self.user, str) or not self.user or any(c.isspace() for c in self.user):
            raise ValueError(f"user={self.user!r}: name the SSH user on the hosts, e.g. 'root'")
        if not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise ValueError(f"port={self.port!r}: the hosts' SSH port, 1..65535 (usually 22)")
        if self.key_file is not None and not Path(self.key_file).expanduser().is_file():
            raise ValueError(f"key_file={self.key_file!r}: no such file; pass the private key's "
                             f"path, or None to use the SSH agent and ~/.ssh's keys")
        for name in ("connect_timeout", "reconnect_for", "dead_after"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r}: seconds, more than 0")

    @property
    def root(self) -> bool:
        return self.user == "root"

    @property
    def known_hosts_path(self) -> Path:
        return Path(self.known_hosts or "~/.ssh/known_hosts").expanduser()

    def openssh_options(self) -> list[str]:
        """Options that make `ssh`/`scp` (and rsync's `ssh`) connect as
        paramiko does: this user, port and key, this known_hosts file only,
        no prompts, no ~/.ssh/config."""
        options = ["-F", "none", "-o", "BatchMode=yes", "-o", f"Port={self.port}",
                   "-o", f"User={self.user}", "-o", "StrictHostKeyChecking=yes",
                   "-o", f"UserKnownHostsFile={self.known_hosts_path}",
                   "-o", "GlobalKnownHostsFile=/dev/null", "-o", "CheckHostIP=no",
                   "-o", f"ConnectTimeout={max(1, round(self.connect_timeout))}",
                   "-o", "ServerAliveInterval=5"]
        if self.key_file:
            options += ["-o", f"IdentityFile={Path(self.key_file).expanduser()}",
                        "-o", "IdentitiesOnly=yes"]
        return options
