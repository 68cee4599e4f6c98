"""One SSH connection (paramiko) to one host: connecting (host keys:
cluster/ssh_host_keys.py) and reconnecting, running a command line on it,
and SFTP.

A connection outlives partitions. The socket has TCP_USER_TIMEOUT set to
`dead_after`, and the transport sends a keepalive when idle, so a path that
stops carrying packets (a partition, a paused or rebooted host) kills the
connection within about `dead_after` seconds instead of TCP's fifteen
minutes. The next use reconnects, with backoff, for at most `reconnect_for`
seconds; host-key and authentication failures are final at once.

What is repeated after a drop: a command whose session could not be opened
never reached the host and is always tried again; one that was running when
the session dropped is tried again only when the caller says it is
repeatable (cluster/ssh.py decides: commands without side effects), since
it may have taken effect. SFTP reads and writes (whole files, written to a
scratch name and renamed) are repeatable.
"""

from __future__ import annotations

import logging
import select
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import paramiko

from cluster.ssh_host_keys import RecordUnknown, RefuseUnknown, changed_key_message
from cluster.ssh_options import HostKeyRejected, SessionLost, SshError, SshOptions

log = logging.getLogger("cluster")

# sshd's default MaxSessions is 10 sessions per connection: one stays open
# for SFTP, the rest leave room for a user's own.
MAX_CHANNELS = 8
# A command is sent at most this many times (the first try and the repeats).
MAX_ATTEMPTS = 3
_T = TypeVar("_T")


class _Transient(Exception):
    """A connection attempt failed in a way that trying again may fix."""


class Connection:
    """The connection of node `name` to `host` (at `address`): one paramiko
    transport at a time, replaced when it dies."""

    def __init__(self, name: str, host: str, address: str, options: SshOptions):
        self.name, self.host, self.address, self.options = name, host, address, options
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()                 # (re)connecting
        self._channels = threading.BoundedSemaphore(MAX_CHANNELS)
        self._sftp_lock = threading.Lock()            # one SFTP request at a time
        self._sftp: tuple[paramiko.Transport, paramiko.SFTPClient] | None = None
        self.ever_connected = False

    def __str__(self) -> str:
        return (f"{self.name} ({self.options.user}@{self.host}:{self.options.port}"
                + (f", {self.address}" if self.address != self.host else "") + ")")

    # -- connecting --------------------------------------------------------

    def transport(self) -> paramiko.Transport:
        """A live transport: the current one, else a new connection. The
        first connection is tried once (a wrong host, port or key should
        fail at once); later ones are retried with backoff."""
        with self._lock:
            transport = self._client.get_transport() if self._client else None
            if transport is not None and transport.is_active():
                return transport
            self._close_client()
            started, delay, attempts = time.monotonic(), 0.25, 0
            while True:
                attempts += 1
                try:
                    self._client = self._connect()
                except _Transient as e:
                    elapsed = time.monotonic() - started
                    if not self.ever_connected or elapsed + delay > self.options.reconnect_for:
                        tries = (f" ({attempts} attempts in {elapsed:.0f} s)"
                                 if self.ever_connected else "")
                        raise SshError(
                            f"cannot reach {self}{tries}: {e}; check that the host is up, "
                            f"that sshd listens on port {self.options.port} and that no "
                            f"firewall drops it (try: ssh -p {self.options.port} "
                            f"{self.options.user}@{self.host} true)") from None
                    time.sleep(delay)
                    delay = min(delay * 2, 5.0)
                    continue
                if self.ever_connected:
                    log.info("%s: reconnected after %d attempt(s)", self, attempts)
                self.ever_connected = True
                return self._client.get_transport()

    def _connect(self) -> paramiko.SSHClient:
        options = self.options
        try:
            sock = socket.create_connection((self.address, options.port),
                                            timeout=options.connect_timeout)
        except OSError as e:
            raise _Transient(e.strerror or str(e) or type(e).__name__) from None
        # Commands are small request/answer exchanges: Nagle's algorithm with
        # delayed ACKs would add tens of milliseconds to each.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if hasattr(socket, "TCP_USER_TIMEOUT"):  # Linux: see the module docstring
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT,
                            int(options.dead_after * 1000))
        client = paramiko.SSHClient()
        known = options.known_hosts_path
        try:
            if known.is_file():
                client.load_host_keys(str(known))
        except (OSError, paramiko.SSHException) as e:
            sock.close()
            raise SshError(f"{self}: cannot read known_hosts {known}: {e}; fix the file or "
                           f"pass another known_hosts= (--ssh-known-hosts)") from None
        try:
            client.set_missing_host_key_policy(RecordUnknown(options)
                                               if options.accept_new_host_keys
                                               else RefuseUnknown(options, self.host))
            # The known_hosts lookup is by the name the user gave, as OpenSSH's.
            client.connect(self.host, options.port, options.user, sock=sock,
                           key_filename=(str(Path(options.key_file).expanduser())
                                         if options.key_file else None),
                           look_for_keys=options.key_file is None, allow_agent=True,
                           timeout=options.connect_timeout,
                           banner_timeout=options.connect_timeout,
                           auth_timeout=options.connect_timeout)
        except HostKeyRejected as e:
            client.close()
            raise HostKeyRejected(f"{self}: {e}") from None
        except paramiko.BadHostKeyException as e:
            client.close()
            raise HostKeyRejected(changed_key_message(str(self), self.host, options, e)) from None
        except paramiko.AuthenticationException as e:
            client.close()
            key = options.key_file or "the SSH agent's or ~/.ssh's keys"
            raise SshError(
                f"{self} refused authentication ({e}): check that the public key of {key} "
                f"is in ~{options.user}/.ssh/authorized_keys on the host, or pass another "
                f"--ssh-key (key_file=) or --ssh-user (user=)") from None
        except (paramiko.SSHException, EOFError, OSError) as e:
            client.close()
            raise _Transient(f"{type(e).__name__}: {e}") from None
        transport = client.get_transport()
        # An idle connection sends something now and then, so that a dead
        # path is noticed (TCP_USER_TIMEOUT) before the next command.
        transport.set_keepalive(max(1, round(min(5.0, options.dead_after / 2))))
        return client

    def drop(self, transport: paramiko.Transport) -> None:
        """Close transport if it is still the current one (it died)."""
        with self._lock:
            if self._client is not None and self._client.get_transport() is transport:
                self._close_client()

    def close(self) -> None:
        with self._lock:
            self._close_client()

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- commands ----------------------------------------------------------

    def execute(self, command: str, *, what: Sequence[str], input: bytes | None,
                timeout: float | None, repeatable: bool) -> tuple[int, bytes, bytes]:
        """Run command line on the host: (exit status, stdout, stderr).
        `what` is the argv the caller asked for (messages, TimeoutExpired);
        `repeatable` says whether the command may run again after the session
        dropped while it ran."""
        for attempt in range(1, MAX_ATTEMPTS + 1):
            transport = self.transport()
            with self._channels:
                try:
                    channel = transport.open_session(timeout=self.options.connect_timeout)
                except paramiko.ChannelException as e:
                    raise SshError(f"{self} refused a new session ({e}): raise MaxSessions "
                                   f"(at least {MAX_CHANNELS + 2}) in the host's sshd_config"
                                   ) from None
                except (paramiko.SSHException, EOFError, OSError) as e:
                    # The command never reached the host: always safe to send again.
                    log.warning("%s: no session (%s); reconnecting", self, e)
                    self.drop(transport)
                    continue
                try:
                    return _exchange(channel, command, what, input, timeout)
                except _Dropped as e:
                    self.drop(transport)
                    if repeatable and attempt < MAX_ATTEMPTS:
                        log.warning("%s: the session dropped during %s (%s); running it "
                                    "again", self, subprocess.list2cmdline(what), e)
                        continue
                    raise SessionLost(
                        f"{self}: the SSH session dropped while "
                        f"`{subprocess.list2cmdline(what)}` ran ({e}): it may or may not have "
                        f"taken effect, so kchaos did not run it again") from None
                finally:
                    channel.close()
        raise SshError(f"{self}: no session could be opened in {MAX_ATTEMPTS} attempts to run "
                       f"`{subprocess.list2cmdline(what)}`; the connection keeps dropping")

    # -- SFTP --------------------------------------------------------------

    def sftp(self, operation: Callable[[paramiko.SFTPClient], _T], *,
             server_command: str | None) -> _T:
        """operation(sftp client), repeated on a new connection when the old
        one died under it (operations are whole-file reads and writes).
        server_command: an exec'd sftp-server (under sudo), else the sftp
        subsystem."""
        for _ in range(MAX_ATTEMPTS):
            transport = self.transport()
            with self._sftp_lock:
                try:
                    client = self._sftp_client(transport, server_command)
                except (paramiko.SSHException, EOFError, OSError):
                    if transport.is_active():
                        raise
                else:
                    try:
                        return operation(client)
                    except Exception:
                        # A missing file and the like: the session is fine.
                        if transport.is_active() and not client.get_channel().closed:
                            raise
                    self._sftp = None
            log.warning("%s: the session dropped during an SFTP transfer; trying again", self)
            if not transport.is_active():
                self.drop(transport)
        raise SshError(f"{self}: SFTP failed {MAX_ATTEMPTS} times; the connection keeps "
                       f"dropping")

    def _sftp_client(self, transport: paramiko.Transport,
                     server_command: str | None) -> paramiko.SFTPClient:
        if self._sftp is not None and self._sftp[0] is transport:
            return self._sftp[1]
        if server_command is None:
            client = paramiko.SFTPClient.from_transport(transport)
        else:
            channel = transport.open_session(timeout=self.options.connect_timeout)
            channel.exec_command(server_command)
            try:
                client = paramiko.SFTPClient(channel)
            except (paramiko.SSHException, EOFError) as e:
                channel.settimeout(2.0)
                try:
                    error = channel.recv_stderr(4096).decode(errors="replace").strip()
                except socket.timeout:
                    error = ""
                raise SshError(f"{self}: no SFTP server under sudo ({error or e}): allow "
                               f"`sudo -n` for {self.options.user}, and install "
                               f"openssh-sftp-server on the host") from None
        self._sftp = (transport, client)
        return client


class _Dropped(Exception):
    """The session ended before the command's exit status arrived."""


def _exchange(channel: paramiko.Channel, command: str, what: Sequence[str],
              input: bytes | None, timeout: float | None) -> tuple[int, bytes, bytes]:
    deadline = None if timeout is None else time.monotonic() + timeout
    out, err = bytearray(), bytearray()

    def left() -> float:
        # Wake at least every second: select does not see the transport die.
        if deadline is None:
            return 1.0
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise subprocess.TimeoutExpired(list(what), timeout, bytes(out), bytes(err))
        return min(remaining, 1.0)

    try:
        channel.exec_command(command)
        if input:
            channel.settimeout(None if deadline is None else max(0.1, left()))
            channel.sendall(input)
        channel.shutdown_write()      # EOF on the command's stdin
    except socket.timeout:
        raise subprocess.TimeoutExpired(list(what), timeout) from None
    except (paramiko.SSHException, EOFError, OSError) as e:
        raise _Dropped(f"{type(e).__name__}: {e}") from None
    ready = channel.fileno()          # readable when stdout or stderr has data, or at EOF
    while not (channel.eof_received or channel.closed):
        select.select([ready], [], [], left())
        _drain(channel, out, err)
    while not channel.status_event.wait(left()):   # the exit status follows EOF
        pass
    _drain(channel, out, err)
    if channel.exit_status == -1:     # closed without a status: the session died
        raise _Dropped("the channel closed without an exit status")
    return channel.exit_status, bytes(out), bytes(err)


def _drain(channel: paramiko.Channel, out: bytearray, err: bytearray) -> None:
    while channel.recv_ready():
        out += channel.recv(1 << 16)
    while channel.recv_stderr_ready():
        err += channel.recv_stderr(1 << 16)
