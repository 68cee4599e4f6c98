"""The Node protocol suite, run against the namespace and the loopback
backend alike, and what only namespaces give: isolation, and a teardown
that leaves no namespace, veth, bridge or process behind."""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess

import pytest

from cluster.broker_process import free_port
from cluster.local import LocalBackend, NetworkSetupError, _ip
from cluster.node import CommandError, Node, port_owner
from tests.cluster.conftest import IS_ROOT, free_subnet, leftovers, make_backend, wait_until

LOOP = "import time\nwhile True: time.sleep(0.05)"
# Answers each connection with the node's name: argv is host, port, name.
SERVER = """
import socket, sys
s = socket.create_server((sys.argv[1], int(sys.argv[2])))
while True:
    c, _ = s.accept()
    c.sendall(sys.argv[3].encode())
    c.close()
"""
CLIENT = """
import socket, sys
print(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5).recv(100).decode())
"""


def serve(node, host: str, port: int) -> None:
    node.start_daemon("server", [node.python, "-c", SERVER, host, str(port), node.name])


def ask(host: str, port: int, timeout: float = 10.0) -> str:
    def answer():
        try:
            with socket.create_connection((host, port), timeout=1) as s:
                return s.recv(100).decode()
        except OSError:
            return None
    return wait_until(answer, f"an answer from {host}:{port}", timeout)


# -- the protocol, on every backend ---------------------------------------

def test_nodes_are_nodes_with_own_addresses_and_dirs(backend):
    assert [n.name for n in backend.nodes] == ["n1", "n2"]
    assert all(isinstance(n, Node) for n in backend.nodes)
    assert len({n.address for n in backend.nodes}) == 2
    for node in backend.nodes:
        assert node.workdir == backend.root_dir / node.name and node.workdir.is_dir()
    if backend.namespaced:
        assert [n.address for n in backend.nodes] == [
            str(backend.subnet.network_address + 11), str(backend.subnet.network_address + 12)]
    else:
        assert [n.address for n in backend.nodes] == ["127.0.0.11", "127.0.0.12"]


def test_run_returns_output_and_exit_code(backend):
    node = backend.nodes[0]
    done = node.run(["sh", "-c", "echo out; echo err >&2; exit 3"], check=False)
    assert (done.returncode, done.stdout, done.stderr) == (3, "out\n", "err\n")
    assert done.args == ["sh", "-c", "echo out; echo err >&2; exit 3"]
    assert node.run(["pwd"]).stdout.strip() == str(node.workdir)
    assert node.run(["cat"], input=b"fed").stdout == "fed"
    with pytest.raises(CommandError) as failed:
        node.run(["sh", "-c", "echo no such thing >&2; exit 2"])
    assert failed.value.returncode == 2
    assert "on n1" in str(failed.value) and "no such thing" in str(failed.value)


def test_run_takes_argv_lists_only_and_is_bounded(backend):
    node = backend.nodes[0]
    with pytest.raises(TypeError, match="list of strings"):
        node.run("ls -l")
    with pytest.raises(subprocess.TimeoutExpired):
        node.run(["sleep", "5"], timeout=0.3)


def test_put_and_get(backend):
    node = backend.nodes[0]
    data = bytes(range(256)) * 3
    node.put("sub/dir/blob.bin", data)
    assert node.get("sub/dir/blob.bin") == data
    assert node.get(node.workdir / "sub/dir/blob.bin") == data
    assert node.run(["wc", "-c", "sub/dir/blob.bin"]).stdout.split()[0] == str(len(data))
    node.put("sub/dir/blob.bin", b"replaced")
    assert node.get("sub/dir/blob.bin") == b"replaced"
    with pytest.raises(FileNotFoundError):
        node.get("missing")
    with pytest.raises(TypeError, match="bytes"):
        node.put("text", "not bytes")


def test_daemon_is_signalled_and_logged(backend):
    node = backend.nodes[0]
    script = ("import pathlib, signal, time\n"
              "signal.signal(signal.SIGUSR1, lambda *_: pathlib.Path('usr1').write_text('got'))\n"
              "print('up', flush=True)\n" + LOOP)
    node.start_daemon("d", [node.python, "-c", script], env={"KCHAOS_TEST": "1"})
    assert node.is_running("d")
    wait_until(lambda: b"up" in node.get("d.log"), "the daemon's output in d.log")
    node.signal("d", signal.SIGUSR1)
    wait_until(lambda: (node.workdir / "usr1").exists(), "the daemon's SIGUSR1 handler")
    with pytest.raises(RuntimeError, match="already runs on n1"):
        node.start_daemon("d", [node.python, "-c", LOOP])
    node.signal("d", signal.SIGKILL)
    wait_until(lambda: not node.is_running("d"), "the daemon dead after SIGKILL")
    node.signal("d", signal.SIGKILL)  # not running: nothing happens
    assert node.stop_daemon("d") == -signal.SIGKILL
    assert node.stop_daemon("never-started") is None
    assert not node.is_running("never-started")


def test_stop_daemon_ends_a_paused_daemon_and_its_children(backend):
    node = backend.nodes[1]
    node.start_daemon("tree", ["sh", "-c", '"$0" -c "$1" & wait', node.python, LOOP],
                      log="logs/tree.log")
    wait_until(lambda: "python" in node.run(["pgrep", "-a", "-P", str(node.pid("tree"))],
                                            check=False).stdout, "the daemon's child")
    child = node.run(["pgrep", "-P", str(node.pid("tree"))]).stdout.split()[0]
    node.signal("tree", signal.SIGSTOP)
    assert node.is_running("tree")  # paused is still running
    assert node.stop_daemon("tree", timeout=5) == -signal.SIGTERM
    wait_until(lambda: node.run(["kill", "-0", child], check=False).returncode != 0,
               "the daemon's child gone with it")
    assert node.run(["test", "-f", "logs/tree.log"], check=False).returncode == 0


def test_node_address_is_reachable_from_here_and_from_other_nodes(backend):
    n1, n2 = backend.nodes
    port = free_port(n1.address) if not backend.namespaced else 7000
    serve(n1, n1.address, port)
    assert ask(n1.address, port) == "n1"
    answer = n2.run([n2.python, "-c", CLIENT, n1.address, str(port)], timeout=20).stdout
    assert answer.strip() == "n1"


def test_port_owner_names_the_listening_process(backend):
    node = backend.nodes[0]
    port = free_port(node.address) if not backend.namespaced else 7001
    assert port_owner(node, node.address, port) is None
    serve(node, node.address, port)
    ask(node.address, port)
    owner = port_owner(node, node.address, port)
    if not IS_ROOT:  # ss shows the owners of other users' sockets to root only
        assert owner is not None
        return
    assert owner.startswith(f"pid {node.pid('server')} ({node.python} -c ")
    assert owner.endswith(f" {node.address} {port} n1)")


def test_teardown_kills_daemons_and_is_idempotent(kind, tmp_path):
    backend = make_backend(kind, tmp_path / "nodes")
    marker = str(tmp_path)
    backend.setup()
    try:
        for node in backend.nodes:
            node.start_daemon("loop", [node.python, "-c", LOOP, marker])
            node.signal("loop", signal.SIGSTOP)
        assert leftovers(backend, marker)
    finally:
        backend.teardown()
    assert leftovers(backend, marker) == []
    backend.teardown()
    assert not any(n.is_running("loop") for n in backend.nodes)


# -- what only namespaces give ---------------------------------------------

needs_root = pytest.mark.skipif(not IS_ROOT, reason="network namespaces need root")


@pytest.mark.root
@needs_root
def test_namespace_wiring(tmp_path):
    with make_backend("netns", tmp_path / "nodes") as backend:
        n1 = backend.nodes[0]
        assert n1.netns == f"{backend.prefix}-n1"
        routes = n1.run(["ip", "route", "show", "default"]).stdout
        assert f"via {backend.bridge_address}" in routes
        assert "state UP" in n1.run(["ip", "link", "show", "eth0"]).stdout
        assert "LOOPBACK,UP" in n1.run(["ip", "link", "show", "lo"]).stdout
        bridge = _ip("-o", "link", "show", "master", backend.bridge)
        assert f"{backend.prefix}-v1" in bridge and f"{backend.prefix}-v2" in bridge
        # Loopback inside a namespace is its own: n1's 127.0.0.1 is not ours.
        port = free_port("127.0.0.1")
        serve(n1, "127.0.0.1", port)
        wait_until(lambda: "LISTEN" in n1.run(["ss", "-Hltn", "sport", "=", f":{port}"]).stdout,
                   "n1 listening on its own 127.0.0.1")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()


@pytest.mark.root
@needs_root
def test_setup_removes_leftovers_of_a_crashed_run(tmp_path):
    subnet, prefix, marker = free_subnet(), f"kct-{secrets.token_hex(3)}", str(tmp_path)
    crashed = LocalBackend(3, tmp_path / "a", subnet=subnet, use_namespaces=True, prefix=prefix)
    again = LocalBackend(2, tmp_path / "b", subnet=subnet, use_namespaces=True, prefix=prefix)
    try:
        crashed.setup()
        # A process the crashed run left in a namespace, not one of its daemons.
        crashed.nodes[0].run(["sh", "-c", '"$0" -c "$1" "$2" >/dev/null 2>&1 &',
                              crashed.nodes[0].python, LOOP, marker])
        wait_until(lambda: leftovers(crashed, marker), "the stray process")
        again.setup()
        left = leftovers(again, marker)
        assert not [line for line in left if "pid" in line or f"{prefix}-n3" in line
                    or f"{prefix}-v3" in line]
        assert again.nodes[1].run(["ip", "-br", "addr", "show", "eth0"]).stdout.count(
            again.nodes[1].address) == 1
    finally:
        again.teardown()
    assert leftovers(again, marker) == []


@pytest.mark.root
@needs_root
def test_a_subnet_in_use_is_refused_and_nothing_is_left(tmp_path):
    with make_backend("netns", tmp_path / "a") as first:
        clash = LocalBackend(1, tmp_path / "b", subnet=str(first.subnet), use_namespaces=True,
                             prefix=f"kct-{secrets.token_hex(3)}")
        with pytest.raises(NetworkSetupError, match=f"overlaps .* on interface {first.bridge}"):
            clash.setup()
        assert leftovers(clash, marker=str(tmp_path / "b")) == []


def test_a_failing_or_missing_ip_command_is_named(monkeypatch, tmp_path):
    if IS_ROOT:
        with pytest.raises(NetworkSetupError, match="ip link show kct-nope-x exited with 1: "
                                                    ".*does not exist"):
            _ip("link", "show", "kct-nope-x")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(NetworkSetupError, match=r"`ip` command \(iproute2\) is not installed"):
        _ip("link", "show")


def test_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="prefix='much-too-long-prefix'"):
        LocalBackend(2, tmp_path, use_namespaces=False, prefix="much-too-long-prefix")
    with pytest.raises(ValueError, match="subnet='198.18.0.0/29' holds no 2 node"):
        LocalBackend(2, tmp_path, subnet="198.18.0.0/29", use_namespaces=False)
    with pytest.raises(ValueError, match="subnet='nonsense'"):
        LocalBackend(2, tmp_path, subnet="nonsense", use_namespaces=False)
    with pytest.raises(ValueError, match="node_count=0"):
        LocalBackend(0, tmp_path, use_namespaces=False)


def test_loopback_fallback_says_why(tmp_path, caplog, monkeypatch):
    with caplog.at_level("INFO", logger="cluster"):
        LocalBackend(1, tmp_path, use_namespaces=False)
    assert "nodes share the host network on 127.0.0.x; network faults need root" in caplog.text
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    caplog.clear()
    with caplog.at_level("INFO", logger="cluster"):
        backend = LocalBackend(2, tmp_path)
    assert not backend.namespaced
    assert [n.address for n in backend.nodes] == ["127.0.0.11", "127.0.0.12"]
    assert caplog.messages == ["not root: nodes share the host network on 127.0.0.x; "
                               "network faults need root"]
    with pytest.raises(PermissionError, match="use_namespaces=True needs root"):
        LocalBackend(2, tmp_path, use_namespaces=True)


def test_a_relative_workdir_is_made_absolute(tmp_path, monkeypatch):
    # Commands run with the workdir as cwd: a path built from a relative
    # workdir would point below itself (a disk gate's mount point did).
    monkeypatch.chdir(tmp_path)
    backend = LocalBackend(1, "scratch", use_namespaces=False)
    [node] = backend.nodes
    assert node.workdir.is_absolute() and node.workdir.parent == tmp_path / "scratch"


@pytest.mark.root
@pytest.mark.skipif(not IS_ROOT, reason="network namespaces need root (ip netns add)")
def test_nodes_reach_each_other_when_the_forward_policy_drops(tmp_path):
    """dockerd sets the FORWARD policy to DROP: the local backend's own
    rule keeps its bridge forwarding, and without it readiness says why."""
    policy = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True, text=True,
                            check=True).stdout.splitlines()[0].split()[-1]
    subprocess.run(["iptables", "-P", "FORWARD", "DROP"], check=True)
    try:
        with make_backend("netns", tmp_path / "nodes") as backend:
            n1, n2 = backend.nodes
            assert backend.diagnose() is None
            serve(n1, n1.address, 7002)
            assert ask(n1.address, 7002) == "n1"
            answer = n2.run([n2.python, "-c", CLIENT, n1.address, "7002"], timeout=20).stdout
            assert answer.strip() == "n1"
            subprocess.run(["iptables", "-D", "FORWARD", "-i", backend.bridge, "-o",
                            backend.bridge, "-m", "comment", "--comment",
                            f"kchaos:{backend.bridge}", "-j", "ACCEPT"], check=True)
            assert n2.run([n2.python, "-c", CLIENT, n1.address, "7002"], check=False,
                          timeout=20).returncode != 0
            assert "FORWARD policy is DROP" in backend.diagnose()
        rules = subprocess.run(["iptables", "-S", "FORWARD"], capture_output=True,
                               text=True).stdout
        assert f"kchaos:{backend.bridge}" not in rules
    finally:
        subprocess.run(["iptables", "-P", "FORWARD", policy], check=True)
