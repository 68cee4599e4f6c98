"""How kchaos reaches ssh hosts (`SshOptions`, one per backend, the same for
every host) and what goes wrong doing it (`SshError` and its kinds)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from cluster.node import SetupError
from settings import setting

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
    """How to reach every host of a backend, and where nodes work there
    (serialisable as it is; a run's `ssh` settings, `--ssh-*`)."""
    user: str = setting("root", "SSH user on the hosts (sudo -n when not root).")
    port: int = setting(22, "SSH port of the hosts.")
    key_file: str | None = setting(None, "SSH private key file.", flag="--ssh-key",
                                   default_text="the SSH agent's and ~/.ssh's keys")
    known_hosts: str | None = setting(None, "known_hosts file the hosts' keys are checked "
                                      "against.", default_text="~/.ssh/known_hosts")
    root_dir: str = setting(DEFAULT_ROOT, "Directory on the hosts where nodes work "
                            "(<root>/n1, ...) and kchaos is installed.", flag="--ssh-root")
    accept_new_host_keys: bool = setting(
        False, "Accept and record the key of a host known_hosts does not list (a changed "
        "key is always refused).")
    connect_timeout: float = setting(10.0, "Seconds a connection or a session may take to "
                                     "open.", cli=False)
    reconnect_for: float = setting(60.0, "Seconds a lost connection is retried before the "
                                   "host counts as unreachable.", cli=False)
    dead_after: float = setting(20.0, "Seconds a connection may carry no packets before it "
                                "counts as dead (TCP_USER_TIMEOUT).", cli=False)

    def __post_init__(self):
        if not isinstance(self.user, str) or not self.user or any(c.isspace() for c in self.user):
            raise ValueError(f"user={self.user!r}: name the SSH user on the hosts, e.g. 'root'")
        if not isinstance(self.port, int) or not 0 < self.port < 65536:
            raise ValueError(f"port={self.port!r}: the hosts' SSH port, 1..65535 (usually 22)")
        if not PurePosixPath(self.root_dir).is_absolute():
            raise ValueError(f"root_dir={self.root_dir!r}: an absolute path on the hosts, e.g. "
                             f"{DEFAULT_ROOT!r}")
        for name in ("connect_timeout", "reconnect_for", "dead_after"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}={getattr(self, name)!r}: seconds, more than 0")

    def key_file_problem(self) -> str | None:
        """Why key_file cannot be used, if it cannot (checked where the hosts
        are about to be reached, not where a recorded run is read)."""
        if self.key_file is not None and not Path(self.key_file).expanduser().is_file():
            return "no such file; pass the private key's path, or none to use the SSH " \
                   "agent and ~/.ssh's keys"
        return None

    @property
    def as_root(self) -> bool:
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
