"""The `ssh` backend: nodes are the user's own hosts, reached with paramiko.

`SshBackend(hosts, SshOptions(...))` makes nodes n1..nN in host order.
Node i works in `<root_dir>/n<i>` on its host (so hosts that share a
filesystem do not collide), and its `address` is the
host's address as this machine resolves the name: clients and the brokers'
listeners use it. A host has its own network stack, so firewall rules run
there touch that host alone (`own_network`).

Every command is an argv list, quoted once (`shlex.join`) into the command
line the host's login shell reads, wrapped by a constant script that
enters the working directory and, for a timeout, by `timeout` (coreutils)
so that a command we stopped waiting for does not run on for ever; as a
user other than root, all of it under `sudo -n`. A command killed by a
signal exits with 128 + the signal's number, as in a shell.

Small files go over SFTP (an sftp-server run under sudo when not root);
directories (logs, data) come back with `fetch`: rsync, or scp where
either side lacks rsync, through `ssh` with the same user, port, key and
known_hosts. Host keys: cluster/ssh_host_keys.py; reconnecting and what is
repeated after a dropped session: cluster/ssh_connection.py (and
`repeatable` below); installing kchaos on the hosts: cluster/ssh_install.py;
daemons: cluster/remote.py; docs/ssh.md for users.
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path, PurePath, PurePosixPath

from cluster.node import CommandError, check_argv
from cluster.remote import RemoteDaemons
from cluster.ssh_connection import Connection
from cluster.ssh_install import InstallError, install_kchaos, installed_python
from cluster.ssh_options import HostKeyRejected, SessionLost, SshError, SshOptions

__all__ = ["SshBackend", "SshNode", "SshOptions", "SshError", "HostKeyRejected", "SessionLost",
           "FetchError", "InstallError", "install_kchaos", "clean_hosts"]

log = logging.getLogger("cluster")

# Files up to this size come over SFTP; larger ones (a broker's log after a
# long run) with rsync or scp, which do not pay paramiko's per-block cost.
SFTP_LIMIT = 1 << 20

# $1 the working directory, then the command. Not `exec`: the shell reports
# a command killed by a signal as 128 + N, where sshd would send a signal
# name that paramiko drops.
_IN_WORKDIR = 'cd -- "$1" || exit; shift; "$@"'
# Where distributions put sftp-server (Debian, Fedora, Arch, others).
_SFTP_SERVER = ('for p in /usr/lib/openssh/sftp-server /usr/libexec/openssh/sftp-server '
                '/usr/lib/ssh/sftp-server /usr/libexec/sftp-server /usr/lib/sftp-server; do '
                '[ -x "$p" ] && exec "$p"; done; echo "no sftp-server on this host" >&2; exit 127')
# Seconds a command may outlive its caller's timeout before `timeout` ends
# it on the host: the caller gives up first and never sees a status 124.
_GRACE = 1.0

# Programs that change nothing on the host: when the session drops while
# one runs, it is run again after reconnecting. Any other command may have
# taken effect before the drop, so SessionLost goes to the caller, who
# knows whether running it again is safe.
_WITHOUT_EFFECT = frozenset({"cat", "ls", "stat", "test", "pgrep", "mountpoint", "pwd", "true",
                             "id", "uname", "readlink", "sleep"})


def repeatable(argv: Sequence[str]) -> bool:
    """Whether argv may run again after a dropped session (no side effects)."""
    program, args = PurePosixPath(argv[0]).name, list(argv[1:])
    if program == "kill":
        return args[:1] == ["-0"]
    if program == "ss":
        return not {"-K", "--kill"} & set(args)
    if program in ("iptables", "ip6tables"):    # a listing, without zeroing the counters
        return bool({"-S", "-L", "--list", "--list-rules"} & set(args)) \
            and not {"-Z", "--zero"} & set(args)
    return program in _WITHOUT_EFFECT


class FetchError(RuntimeError):
    """Copying a directory from a host failed."""


class SshNode(RemoteDaemons):
    """A host reached over SSH; its daemons are those of cluster.remote."""

    own_network = True     # a host's firewall is its own

    def __init__(self, name: str, host: str, address: str, workdir: PurePosixPath,
                 options: SshOptions):
        self.name, self.host, self.address = name, host, address
        self.workdir = PurePosixPath(workdir)
        # Set by install_kchaos: the host's venv with kchaos in it.
        self.python: str | None = None
        self.options = options
        self.connection = Connection(name, host, address, options)

    def __repr__(self) -> str:
        return f"SshNode({self.name!r}, {self.options.user}@{self.host}:{self.options.port})"

    # -- commands ------------------------------------------------------------

    def command_line(self, argv: Sequence[str], *, cwd: PurePath | None = None,
                     timeout: float | None = None) -> str:
        """What the host's login shell is given for argv: sudo (unless
        root), the working directory (default the node's), the bound."""
        argv = check_argv(argv)
        bound = [] if timeout is None else ["timeout", "-k", "1", f"{timeout + _GRACE:.3f}"]
        return shlex.join([*self._sudo(), "sh", "-c", _IN_WORKDIR, "kchaos-run",
                           str(cwd or self.workdir), *bound, *argv])

    def _sudo(self) -> list[str]:
        return [] if self.options.as_root else ["sudo", "-n"]

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float | None = 60.0,
            input: bytes | None = None) -> subprocess.CompletedProcess:
        argv = check_argv(argv)
        return self._run(argv, self.command_line(argv, timeout=timeout), check=check,
                         timeout=timeout, input=input)

    def _run(self, argv: list[str], command: str, *, check: bool, timeout: float | None,
             input: bytes | None = None) -> subprocess.CompletedProcess:
        status, out, err = self.connection.execute(command, what=argv, input=input,
                                                   timeout=timeout,
                                                   repeatable=repeatable(argv))
        done = subprocess.CompletedProcess(argv, status, out.decode(errors="replace"),
                                           err.decode(errors="replace"))
        if check and status != 0:
            raise CommandError(self.name, status, argv, done.stdout, done.stderr)
        return done

    # -- files -----------------------------------------------------------------

    def _path(self, path: str | PurePath) -> str:
        return str(self.workdir / path)

    def _sftp_server(self) -> str | None:
        return None if self.options.as_root else shlex.join([*self._sudo(), "sh", "-c",
                                                         _SFTP_SERVER])

    def put(self, path: str | PurePath, data: bytes) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data={data!r:.60} ({type(data).__name__}): put takes bytes; "
                            f"encode text first, e.g. text.encode()")
        target = PurePosixPath(self._path(path))
        # A scratch name, then a rename: a reader never sees half a file, and
        # a write cut by a dropped session can simply be done again.
        scratch = str(target.with_name(f".{target.name}.{os.getpid()}.tmp"))

        def write(sftp) -> None:
            try:
                handle = sftp.open(scratch, "wb")
            except FileNotFoundError:
                self.run(["mkdir", "-p", str(target.parent)])
                handle = sftp.open(scratch, "wb")
            with handle:
                handle.set_pipelined(True)
                handle.write(bytes(data))
            sftp.posix_rename(scratch, str(target))

        self.connection.sftp(write, server_command=self._sftp_server())

    def get(self, path: str | PurePath) -> bytes:
        """Small files over SFTP; a larger one (a broker's log) with rsync
        or scp, which stream it faster than paramiko's SFTP."""
        source = self._path(path)

        def read(sftp) -> bytes | None:
            if sftp.stat(source).st_size > SFTP_LIMIT:
                return None
            with sftp.open(source, "rb") as handle:
                return handle.read()

        data = self.connection.sftp(read, server_command=self._sftp_server())
        if data is not None:
            return data
        with tempfile.TemporaryDirectory(prefix="kchaos-get-") as scratch:
            self._copy(source, Path(scratch), timeout=600.0)
            return (Path(scratch) / PurePosixPath(source).name).read_bytes()

    def fetch(self, remote_dir: str | PurePath, local_dir: str | Path, *,
              timeout: float | None = 600.0) -> None:
        """Copy the contents of remote_dir on the host (relative: to the
        workdir) into local_dir here, which is created: rsync when both
        sides have it (under sudo when not root), else scp (as the user:
        files only root may read are then missing)."""
        self._copy(self._path(remote_dir).rstrip("/") + "/", Path(local_dir), timeout=timeout)

    def _copy(self, source: str, dest: Path, *, timeout: float | None) -> None:
        """rsync (else scp) source on the host into the directory dest here:
        a directory's contents when source ends with "/", else the file."""
        contents = source.endswith("/")
        dest.mkdir(parents=True, exist_ok=True)
        login = f"{self.options.user}@{f'[{self.host}]' if ':' in self.host else self.host}"
        ssh = ["ssh", *self.options.openssh_options()]
        if shutil.which("rsync") and self.run(["rsync", "--version"], check=False,
                                               timeout=30.0).returncode == 0:
            argv = ["rsync", "-rlpt", "-e", shlex.join(ssh),
                    *(["--rsync-path", "sudo -n rsync"] if self._sudo() else []),
                    f"{login}:{source}", f"{dest}/"]
        else:
            argv = ["scp", "-r", "-p", "-q", *self.options.openssh_options(),
                    f"{login}:{source}." if contents else f"{login}:{source}", str(dest)]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            raise FetchError(f"{self.name}: neither rsync nor scp is installed here: "
                             f"apt-get install rsync openssh-client") from None
        if done.returncode != 0:
            raise FetchError(f"{self.name}: copying {source.rstrip('/') or '/'} from {login} "
                             f"with {argv[0]} "
                             f"exited with {done.returncode}: "
                             f"{(done.stderr or done.stdout).strip()}")

    # -- the connection --------------------------------------------------------

    def connect(self) -> None:
        """Connect (if not connected), make the working directory and check
        that sudo works without a password when the user is not root."""
        self.connection.transport()
        argv = ["mkdir", "-p", str(self.workdir)]
        done = self._run(argv, self.command_line(argv, cwd=PurePosixPath("/"), timeout=30.0),
                         check=False, timeout=30.0)
        if done.returncode != 0 and done.stderr.startswith("sudo:"):
            raise SshError(f"{self.connection}: `sudo -n` fails for {self.options.user} "
                           f"({done.stderr.strip()}): let the user run sudo without a "
                           f"password (NOPASSWD in /etc/sudoers.d/), or connect as root")
        if done.returncode != 0:
            raise CommandError(self.name, done.returncode, done.args, done.stdout, done.stderr)

    def close(self) -> None:
        self.connection.close()


class SshBackend:
    """Nodes n1..nN on the given hosts; `setup()` connects and makes their
    working directories (stopping a crashed run's daemons there) and, with
    install, installs kchaos there (node.python); `teardown()` stops their
    daemons and closes the connections, and is safe to call in any state."""

    def __init__(self, hosts: Sequence[str], options: SshOptions = SshOptions(), *,
                 install: bool = False):
        if isinstance(hosts, str) or not hosts or not all(
                isinstance(h, str) and h and not any(c.isspace() for c in h) for h in hosts):
            raise ValueError(f"hosts={hosts!r}: pass a list of host names or addresses, "
                             f"e.g. ['db1.example', '10.0.0.12']")
        if len(set(hosts)) != len(hosts):
            raise ValueError(f"hosts={list(hosts)!r}: a host is named twice")
        if options.key_file_problem():
            raise ValueError(f"key_file={options.key_file!r}: {options.key_file_problem()}")
        self.options = options
        self.root_dir = PurePosixPath(options.root_dir)
        self.install = install
        self.nodes = [SshNode(f"n{i}", host, _resolve(i - 1, host, options.port),
                              self.root_dir / f"n{i}", self.options)
                      for i, host in enumerate(hosts, start=1)]

    def __enter__(self) -> "SshBackend":
        self.setup()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    namespaced = False

    def collect_logs(self, dest_dir: Path) -> None:
        """Hosts have no log of their own for us: daemons' logs come with the DB."""

    def diagnose(self) -> str | None:
        return None

    def setup(self) -> None:
        def prepare(node: SshNode) -> None:
            node.connect()
            node.stop_all()

        for future in _on_each(self.nodes, prepare):
            future.result()     # the first failure, naming its node
        if self.install:
            install_kchaos(self.nodes)

    def reattach(self) -> list[SshNode]:
        """The nodes whose hosts answer now, for a process other than the
        run's (kchaos heal, clean), with node.python set where kchaos is
        installed; an unreachable one is logged and left out."""
        found = []
        for node in self.nodes:
            try:
                node.connection.transport()
                node.python = installed_python(node)
            except SshError as e:
                log.warning("%s", e)
                continue
            found.append(node)
        return found

    def teardown(self) -> None:
        def stop(node: SshNode) -> None:
            try:
                if node.connection.ever_connected:
                    node.stop_all()
            except (SshError, CommandError, subprocess.TimeoutExpired, RuntimeError) as e:
                log.warning("%s: daemons may still run there: %s", node.name, e)
            finally:
                node.close()

        for future in _on_each(self.nodes, stop):
            future.result()


def clean_hosts(backend: SshBackend) -> tuple[list[str], list[str]]:
    """(what was done, problems) stopping every daemon of ours on each
    host that answers (kchaos clean). Working directories stay: they hold
    the logs, the data and the installation."""
    done, problems = [], []
    found = backend.reattach()
    missing = [node.name for node in backend.nodes if node not in found]
    if missing:
        problems.append(f"{', '.join(missing)} cannot be reached: daemons of this run may "
                        f"still run there")
    for node in found:
        try:
            names = node.daemons()
            node.stop_all()
            done.append(f"{node.name}: {len(names)} daemon(s) stopped"
                        + (f" ({', '.join(names)})" if names else "")
                        + f"; {node.workdir} stays")
        except (SshError, CommandError, subprocess.TimeoutExpired, RuntimeError) as e:
            problems.append(f"{node.name}: stopping its daemons: {e}")
        finally:
            node.close()
    return done, problems


def _on_each(nodes: list[SshNode], work) -> list[Future]:
    """work(node) for every node at once (hosts answer slowly one by one):
    the finished futures, in node order."""
    with ThreadPoolExecutor(max_workers=len(nodes)) as pool:
        return [pool.submit(work, node) for node in nodes]


def _resolve(index: int, host: str, port: int) -> str:
    """host's address, IPv4 first (brokers listen on it, clients use it)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise ValueError(f"hosts[{index}]={host!r}: cannot resolve it ({e.strerror}): check "
                         f"the name, or pass the host's address") from None
    found.sort(key=lambda info: info[0] != socket.AF_INET)
    return found[0][4][0]
