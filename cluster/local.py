"""The `local` backend: nodes are processes on this machine.

As root, each node is a network namespace of its own (`<prefix>-n1`, ...)
whose `eth0` is one end of a veth pair; the other end (`<prefix>-v1`, ...)
is a port of a bridge (`<prefix>-br0`) in the root namespace that holds the
subnet's first address. Nodes get the subnet's .11, .12, ... and a default
route via the bridge; the test process stays in the root namespace and
reaches them through the bridge, so a nemesis can cut one node off from
another with iptables inside a namespace (`node.run`) and clients still see
the real addresses. Without root, nodes share the host network on
127.0.0.11, .12, ... and network faults are not possible.

Every node has a working directory `<root_dir>/<name>/`; its commands and
daemons run there (inside its namespace when it has one).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import signal as signals
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePath

from cluster.addressing import (DEFAULT_SUBNET, check_prefix, node_address, node_subnet,
                                overlapping)
from cluster.node import CommandError, SetupError, check_argv

log = logging.getLogger("cluster")



class NetworkSetupError(SetupError, RuntimeError):
    """Creating or removing namespaces, veths or the bridge failed."""


class LocalNode:
    """A node whose commands run here, inside network namespace `netns` when
    it has one."""

    def __init__(self, name: str, address: str, workdir: Path, netns: str | None = None):
        self.name = name
        self.address = address
        # Absolute: commands run with the workdir as their cwd, so a path
        # built from a relative one would be resolved twice.
        self.workdir = Path(workdir).absolute()
        self.netns = netns
        self.python = sys.executable        # nodes share this machine's Python
        # Whether firewall rules run on this node touch only this node: a
        # node on the host network shares the host's firewall.
        self.own_network = netns is not None
        self._daemons: dict[str, subprocess.Popen] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        where = f"netns {self.netns}" if self.netns else "host network"
        return f"LocalNode({self.name!r}, {self.address}, {where})"

    def _argv(self, argv: Sequence[str]) -> list[str]:
        argv = check_argv(argv)
        # `ip netns exec` joins the namespace and execs argv without forking,
        # so the pid we hold is the command's own.
        return ["ip", "netns", "exec", self.netns, *argv] if self.netns else argv

    def _path(self, path: str | PurePath) -> Path:
        return self.workdir / path

    def run(self, argv: Sequence[str], *, check: bool = True, timeout: float | None = 60.0,
            input: bytes | None = None) -> subprocess.CompletedProcess:
        argv = check_argv(argv)
        done = subprocess.run(self._argv(argv), input=input, capture_output=True,
                              timeout=timeout, cwd=self.workdir)
        out = done.stdout.decode(errors="replace")
        err = done.stderr.decode(errors="replace")
        if check and done.returncode != 0:
            raise CommandError(self.name, done.returncode, argv, out, err)
        return subprocess.CompletedProcess(argv, done.returncode, out, err)

    def put(self, path: str | PurePath, data: bytes) -> None:
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data={data!r:.60} ({type(data).__name__}): put takes bytes; "
                            f"encode text first, e.g. text.encode()")
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        scratch = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        scratch.write_bytes(data)
        scratch.replace(target)

    def get(self, path: str | PurePath) -> bytes:
        return self._path(path).read_bytes()

    def start_daemon(self, name: str, argv: Sequence[str], *,
                     env: Mapping[str, str] | None = None,
                     log: str | PurePath | None = None) -> None:
        full_argv = self._argv(argv)
        log_path = self._path(log if log is not None else f"{name}.log")
        log_path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            old = self._daemons.get(name)
            if old is not None and old.poll() is None:
                raise RuntimeError(f"daemon {name!r} already runs on {self.name} "
                                   f"(pid {old.pid}): stop_daemon({name!r}) first")
            with open(log_path, "ab") as out:
                # A session of its own: signals reach the daemon's children
                # too, and a Ctrl-C at the terminal does not.
                self._daemons[name] = subprocess.Popen(
                    full_argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                    cwd=self.workdir, env={**os.environ, **env} if env else None,
                    start_new_session=True)

    def signal(self, name: str, sig: int) -> None:
        with self._lock:
            process = self._daemons.get(name)
            if process is None or process.poll() is not None:
                return
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                pass

    def is_running(self, name: str) -> bool:
        with self._lock:
            process = self._daemons.get(name)
            return process is not None and process.poll() is None

    def pid(self, name: str) -> int | None:
        """The daemon's process id (also its process group's), None if it
        was never started."""
        process = self._daemons.get(name)
        return None if process is None else process.pid

    def stop_daemon(self, name: str, *, sig: int = signals.SIGTERM,
                    timeout: float = 10.0) -> int | None:
        process = self._daemons.get(name)
        if process is None:
            return None
        self.signal(name, signals.SIGCONT)  # a paused process cannot act on SIGTERM
        self.signal(name, sig)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.signal(name, signals.SIGKILL)
            return process.wait(timeout)

    def stop_all(self) -> None:
        """SIGKILL every daemon (teardown)."""
        for name in list(self._daemons):
            self.stop_daemon(name, sig=signals.SIGKILL)


class LocalBackend:
    """N local nodes n1..nN; `setup()` creates them, `teardown()` removes
    them, leftovers included, and is safe to call in any state."""

    def __init__(self, node_count: int, root_dir: str | Path, subnet: str = DEFAULT_SUBNET,
                 use_namespaces: bool | None = None, *, prefix: str = "kchaos"):
        self.subnet = node_subnet(subnet, node_count)
        check_prefix(prefix, f"-v{node_count}", "the namespaces and interfaces")
        is_root = os.geteuid() == 0
        if use_namespaces and not is_root:
            raise PermissionError("use_namespaces=True needs root (ip netns add); run as root "
                                  "or pass use_namespaces=False")
        self.namespaced = is_root if use_namespaces is None else use_namespaces
        if not self.namespaced:
            # A notice when the caller chose it, a warning when root is missing.
            level, why = ((logging.INFO, "use_namespaces=False") if is_root
                          else (logging.WARNING, "not root"))
            log.log(level, "%s: nodes share the host network on 127.0.0.x; network faults "
                    "need root", why)
        self.root_dir = Path(root_dir)
        self.prefix = prefix
        self.bridge = f"{prefix}-br0"
        self.bridge_address = str(self.subnet.network_address + 1)
        self.nodes = [self._node(i) for i in range(1, node_count + 1)]

    def _node(self, i: int) -> LocalNode:
        name = f"n{i}"
        if self.namespaced:
            return LocalNode(name, node_address(self.subnet, i),
                             self.root_dir / name, netns=f"{self.prefix}-{name}")
        return LocalNode(name, f"127.0.0.{10 + i}", self.root_dir / name)

    def __enter__(self) -> "LocalBackend":
        self.setup()
        return self

    def __exit__(self, *exc) -> None:
        self.teardown()

    def setup(self) -> None:
        for node in self.nodes:
            node.workdir.mkdir(parents=True, exist_ok=True)
        if not self.namespaced:
            return
        self._remove_network()
        try:
            self._check_subnet_free()
            self._create_network()
        except BaseException:
            self._remove_network()
            raise

    def teardown(self) -> None:
        for node in self.nodes:
            node.stop_all()
        if self.namespaced:
            self._remove_network()

    # -- the network -----------------------------------------------------

    def _create_network(self) -> None:
        plen = self.subnet.prefixlen
        _ip("link", "add", self.bridge, "type", "bridge")
        allow_forwarding(self.bridge)
        _ip("addr", "add", f"{self.bridge_address}/{plen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        for i, node in enumerate(self.nodes, start=1):
            veth = f"{self.prefix}-v{i}"
            _ip("netns", "add", node.netns)
            # The peer is born inside the namespace, so `eth0` never collides
            # with the host's own.
            _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", node.netns)
            _ip("link", "set", veth, "master", self.bridge)
            _ip("link", "set", veth, "up")
            _ip("-n", node.netns, "link", "set", "lo", "up")
            _ip("-n", node.netns, "addr", "add", f"{node.address}/{plen}", "dev", "eth0")
            _ip("-n", node.netns, "link", "set", "eth0", "up")
            _ip("-n", node.netns, "route", "add", "default", "via", self.bridge_address)

    def _check_subnet_free(self) -> None:
        clash = overlapping(self.subnet)
        if clash:
            raise NetworkSetupError(f"subnet={str(self.subnet)!r} overlaps {clash}: pass "
                                    f"another subnet (e.g. '198.18.1.0/24') or remove it")

    def _remove_network(self) -> None:
        """Our namespaces (and their processes), veths and bridge, whatever
        exists of them, from this run or a previous one with this prefix."""
        netns_name = re.compile(rf"{re.escape(self.prefix)}-n\d+")
        link_name = re.compile(rf"{re.escape(self.prefix)}-(v\d+|br0)")
        ours = [netns for netns in namespaces() if netns_name.fullmatch(netns)]
        for netns in ours:
            _kill_namespace_processes(netns)
        links = [match.group(1) for match in re.finditer(r"^\d+: ([^:@\s]+)",
                                                         _ip("-o", "link", "show"), re.M)]
        # Veths first: deleting one end deletes the pair at once, while a
        # deleted namespace frees its end asynchronously.
        for link in sorted(links, key=lambda name: name.endswith("-br0")):
            if link_name.fullmatch(link):
                _ip("link", "del", link, ok_if="Cannot find device")
        for netns in ours:
            _ip("netns", "del", netns, ok_if="No such file")
        disallow_forwarding(self.bridge)

    def collect_logs(self, dest_dir: Path) -> None:
        """Nodes are this host's processes: their logs come with the DB."""

    def diagnose(self) -> str | None:
        """Why nodes may not reach each other, when the host's firewall
        says so; None when it does not."""
        return forwarding_problem(self.bridge) if self.namespaced else None


# Once dockerd has run, the host's FORWARD policy is DROP (it turns bridge
# netfilter on), and frames between two ports of our bridge pass FORWARD
# too: without a rule of our own, nodes cannot reach each other. The rule
# is tagged with the bridge's name, inserted first (before DOCKER-USER and
# whatever else), and removed with the bridge; nothing else is touched.
def _forward_rule(bridge: str) -> list[str]:
    return ["FORWARD", "-i", bridge, "-o", bridge, "-m", "comment", "--comment",
            f"kchaos:{bridge}", "-j", "ACCEPT"]


def _iptables(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["iptables", "-w", "10", *args], capture_output=True, text=True,
                          timeout=30)


def allow_forwarding(bridge: str) -> None:
    if shutil.which("iptables") is None:
        return          # no firewall to pass (a host without iptables forwards)
    chain, *rule = _forward_rule(bridge)
    done = _iptables("-I", chain, "1", *rule)
    if done.returncode != 0:
        raise NetworkSetupError(f"cannot let {bridge}'s nodes reach each other through the "
                                f"host's FORWARD chain: {done.stderr.strip()}")


def disallow_forwarding(bridge: str) -> None:
    if shutil.which("iptables") is None:
        return
    while _iptables("-D", *_forward_rule(bridge)).returncode == 0:
        pass            # every copy (a crashed run's too)


def forwarding_problem(bridge: str) -> str | None:
    """A sentence naming the FORWARD policy when it drops what our bridge
    forwards, else None."""
    if shutil.which("iptables") is None:
        return None
    listing = _iptables("-S", "FORWARD").stdout.splitlines()
    policy_drop = "-P FORWARD DROP" in listing
    ours = any(f"kchaos:{bridge}" in line for line in listing)
    if policy_drop and not ours:
        return (f"the host's iptables FORWARD policy is DROP (dockerd sets it) and no rule "
                f"lets {bridge}'s nodes reach each other: kchaos adds one when it makes the "
                f"bridge; if something removed it, run `iptables -I FORWARD 1 -i {bridge} "
                f"-o {bridge} -j ACCEPT`")
    return None


def namespaces() -> list[str]:
    """Names of the network namespaces that exist here."""
    return [line.split()[0] for line in _ip("netns", "list").splitlines() if line.strip()]


def _ip(*args: str, ok_if: str | None = None) -> str:
    """Run `ip args`; its stdout. A failure names the command and its
    stderr, unless the stderr contains ok_if."""
    argv = ["ip", *args]
    if shutil.which("ip") is None:
        raise NetworkSetupError("the `ip` command (iproute2) is not installed: "
                                "apt-get install iproute2, or pass use_namespaces=False")
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    if done.returncode != 0 and not (ok_if and ok_if in done.stderr):
        raise NetworkSetupError(f"{subprocess.list2cmdline(argv)} exited with "
                                f"{done.returncode}: {done.stderr.strip()}")
    return done.stdout


def _kill_namespace_processes(netns: str, timeout: float = 10.0) -> None:
    """SIGKILL every process in netns and wait until none is left (a
    namespace with a live process outlives `ip netns del`, veth included)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = [int(p) for p in _ip("netns", "pids", netns, ok_if="No such file").split()]
        if not pids:
            return
        if time.monotonic() > deadline:
            raise NetworkSetupError(f"processes {pids} in namespace {netns} survive SIGKILL "
                                    f"after {timeout} s (uninterruptible I/O?)")
        for pid in pids:
            for sig in (signals.SIGCONT, signals.SIGKILL):
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        time.sleep(0.05)
