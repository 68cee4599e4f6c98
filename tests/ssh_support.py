"""Hosts for the ssh backend's tests: the project's own network namespaces
(cluster.local as root), each running a real `/usr/sbin/sshd -D` that the
tests start with a generated host key, a config of their own (port,
ListenAddress the namespace's address, AuthorizedKeysFile a generated
client key, pid file and log under the test's directory) and a
known_hosts file written for them. Root's sessions get a HOME of their
own: this machine's ~/.bashrc (which bash reads for commands from sshd)
is not the hosts' concern, and a session cut while it runs could leave its
tools' locks behind.

Namespaces share this machine's filesystem, so every backend made here
gets a root directory of its own (nodes work in `<root>/n<i>`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from cluster.local import LocalBackend
from cluster.ssh import SshBackend, SshOptions
from cluster.ssh_host_keys import known_hosts_name

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"
TOOLS = (SSHD, SFTP_SERVER, "ssh", "ssh-keygen", "ssh-keyscan", "rsync")
MARKER = "ssh: needs root and openssh-server (hosts are namespaces running a real sshd)"
_CONFIG = """\
Port {port}
ListenAddress {address}
HostKey {dir}/host_ed25519
PidFile {dir}/sshd.pid
AuthorizedKeysFile {authorized} {user_home}/authorized_keys
PermitRootLogin prohibit-password
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
StrictModes no
Subsystem sftp {sftp}
LogLevel VERBOSE
SetEnv HOME={dir}
"""
# A sudo_user's home, where sshd finds its authorized_keys.
_USER_HOME = "/tmp/kchaos-test-{user}"


def ssh_unavailable() -> str | None:
    """Why the ssh tests cannot run here (one line), or None."""
    if os.geteuid() != 0:
        return "the ssh tests need root (their hosts are network namespaces)"
    missing = [tool for tool in TOOLS if shutil.which(tool) is None and not Path(tool).exists()]
    if missing:
        return (f"the ssh tests need {', '.join(missing)}: "
                f"apt-get install openssh-server openssh-client rsync")
    return None


SSH_MARKS = [pytest.mark.ssh, pytest.mark.root,
             pytest.mark.skipif(ssh_unavailable() is not None,
                                reason=ssh_unavailable() or "the ssh tests can run")]


def keygen(path: Path, comment: str) -> str:
    """A new ed25519 key pair at path (and path.pub); the public key line."""
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment,
                    "-f", str(path)], check=True, capture_output=True)
    return path.with_name(path.name + ".pub").read_text().strip()


class SshHosts:
    """`count` namespaces (`local`, a LocalBackend with a prefix and subnet
    of its own) with an sshd each on `port`; `key_file` logs in as root
    (and as a `sudo_user`), `known_hosts` lists every host's key."""

    def __init__(self, directory: Path, count: int, *, port: int = 2222):
        from tests.cluster.conftest import make_backend  # it imports this module
        self.dir, self.port = Path(directory), port
        self.local: LocalBackend = make_backend("netns", self.dir / "namespaces", count)
        self.key_file = self.dir / "client_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.authorized = self.dir / "authorized_keys"

    @property
    def addresses(self) -> list[str]:
        return [node.address for node in self.local.nodes]

    def setup(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.authorized.write_text(keygen(self.key_file, "kchaos-test-client") + "\n")
        # sshd refuses to start without its privilege separation directory.
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.local.setup()
        try:
            lines = [self._start_sshd(node) for node in self.local.nodes]
            self.known_hosts.write_text("".join(f"{line}\n" for line in lines))
            for node in self.local.nodes:
                self._wait_listening(node)
        except BaseException:
            self.teardown()
            raise

    def _start_sshd(self, node) -> str:
        """Start node's sshd; its known_hosts line."""
        here = self.dir / node.name
        here.mkdir(exist_ok=True)
        public = keygen(here / "host_ed25519", f"kchaos-test-{node.name}")
        config = here / "sshd_config"
        config.write_text(_CONFIG.format(port=self.port, address=node.address, dir=here,
                                         authorized=self.authorized, sftp=SFTP_SERVER,
                                         user_home=_USER_HOME.format(user="%u")))
        checked = subprocess.run([SSHD, "-t", "-f", str(config)], capture_output=True, text=True)
        if checked.returncode != 0:
            raise RuntimeError(f"sshd -t -f {config}: {checked.stderr.strip()}")
        node.start_daemon("sshd", [SSHD, "-D", "-f", str(config), "-E", str(here / "sshd.log")])
        key_type, key = public.split()[:2]
        return f"{known_hosts_name(node.address, self.port)} {key_type} {key}"

    def _wait_listening(self, node, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not node.is_running("sshd"):
                break
            try:
                socket.create_connection((node.address, self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        log = self.dir / node.name / "sshd.log"
        tail = log.read_text()[-2000:] if log.exists() else "(no log)"
        raise RuntimeError(f"sshd of {node.name} does not listen on {node.address}:{self.port}"
                           f" within {timeout} s:\n{tail}")

    def teardown(self) -> None:
        self.local.teardown()     # kills the sshds and every session with the namespaces

    def backend(self, root_dir: Path, count: int | None = None, **options) -> SshBackend:
        """An SshBackend (not set up) on the first count hosts, as root with
        the client key and the hosts' known_hosts unless options say else."""
        install = options.pop("install", False)
        options = {"port": self.port, "key_file": str(self.key_file),
                   "known_hosts": str(self.known_hosts), "root_dir": str(root_dir), **options}
        backend = SshBackend(self.addresses[:count], SshOptions(**options), install=install)
        # The hosts are namespaces of this machine, so its Python is theirs
        # too (as a local node's); install_kchaos is tested on its own.
        for node in backend.nodes:
            node.python = sys.executable
        return backend

    def sshd_pid(self, index: int) -> int:
        return self.local.nodes[index].pid("sshd")

    def cut_sessions(self, index: int) -> list[int]:
        """SIGKILL every process below host index's sshd (its sessions, and
        what they run): the connections to it die at once."""
        below = _descendants(self.sshd_pid(index))
        for pid in below:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return below

    def sessions(self, index: int) -> list[int]:
        """The processes serving connections to host index (sshd's children)."""
        return _children(self.sshd_pid(index))

    @contextmanager
    def sudo_user(self):
        """A user for the duration (not root, `sudo -n` for everything), who
        logs in with the client key; yields its name. Removed afterwards,
        with its sudoers file."""
        name = f"kct{secrets.token_hex(3)}"
        sudoers = Path(f"/etc/sudoers.d/kchaos-test-{name}")
        # sshd reads the user's keys as the user: not from our root-only tmp.
        home = Path(_USER_HOME.format(user=name))
        home.mkdir(mode=0o700)
        shutil.copy(self.authorized, home / "authorized_keys")
        # "*": no password, yet not locked ("!"), which sshd without PAM refuses.
        subprocess.run(["useradd", "--no-create-home", "--home-dir", str(home),
                        "--shell", "/bin/sh", "--password", "*", name],
                       check=True, capture_output=True)
        try:
            shutil.chown(home, name)
            shutil.chown(home / "authorized_keys", name)
            sudoers.write_text(f"{name} ALL=(ALL) NOPASSWD: ALL\n")
            sudoers.chmod(0o440)
            subprocess.run(["visudo", "-cqf", str(sudoers)], check=True, capture_output=True)
            yield name
        finally:
            sudoers.unlink(missing_ok=True)
            # -f: its last sessions may still be closing.
            subprocess.run(["userdel", "-f", name], capture_output=True)
            shutil.rmtree(home, ignore_errors=True)


def _children(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(") ")[2].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        children = _children(todo.pop())
        found += children
        todo += children
    return found


class SshCluster:
    """An SshBackend on SshHosts, shaped as the cluster tests expect of a
    backend (`nodes`, `root_dir`, `namespaced`, `prefix`, `subnet`). With
    hosts given they are shared and stay up; else it makes its own."""

    namespaced = True        # every host is a namespace of its own

    def __init__(self, root_dir: Path, node_count: int = 2, *, hosts: SshHosts | None = None,
                 **options):
        self.root_dir = Path(root_dir)
        self.owns_hosts = hosts is None
        self.hosts = hosts or SshHosts(self.root_dir.parent / "ssh-hosts", node_count)
        self.node_count, self.options = node_count, options
        self.ssh: SshBackend | None = None     # made once the hosts have keys
        self.nodes = []

    @property
    def prefix(self) -> str:
        return self.hosts.local.prefix

    @property
    def subnet(self):
        return self.hosts.local.subnet

    def __enter__(self) -> "SshCluster":
        self.setup()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def setup(self) -> None:
        if self.owns_hosts:
            self.hosts.setup()
        self.ssh = self.hosts.backend(self.root_dir, self.node_count, **self.options)
        self.nodes = self.ssh.nodes
        self.ssh.setup()

    def teardown(self) -> None:
        if self.ssh is not None:
            self.ssh.teardown()
        if self.owns_hosts:
            self.hosts.teardown()
