"""The ssh backend against real sshds (tests/ssh_support.py: namespaces as
hosts): the Node protocol suite, host-key policy, clear connection errors,
sudo for a user other than root, reconnecting after a cut session or a
partition from the harness, fetching directories, and kchaos installed
onto the hosts running a reference cluster that a real client uses.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path, PurePosixPath

import pytest

from cluster.db import ReferenceDB
from cluster.node import Node
from cluster.ssh import (SFTP_LIMIT, FetchError, HostKeyRejected, SessionLost, SshBackend,
                         SshOptions,
                         SshError, clean_hosts, install_kchaos)
from cluster.ssh_install import INSTALL, MARKER
from tests.cluster.conftest import SSH_KIND, leftovers, wait_until
from tests.cluster.test_db import SETTINGS, TIMEOUT, create_topic, round_trip
from tests.cluster.test_local import LOOP
# The protocol suite's tests that read nothing of a node as a local path,
# collected here too: they take `backend`, which `kind` below makes ssh.
from tests.cluster.test_local import (  # noqa: F401
    test_node_address_is_reachable_from_here_and_from_other_nodes,
    test_port_owner_names_the_listening_process, test_put_and_get,
    test_run_returns_output_and_exit_code, test_run_takes_argv_lists_only_and_is_bounded,
    test_stop_daemon_ends_a_paused_daemon_and_its_children)
from tests.ssh_support import SSH_MARKS, SshHosts, keygen

# One worker under xdist (tests/conftest.py's GROUPS): one set of hosts.
pytestmark = SSH_MARKS


@pytest.fixture(params=[SSH_KIND])
def kind(request) -> str:
    return request.param


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    made = SshHosts(tmp_path_factory.mktemp("ssh-hosts"), 3, port=2222)
    made.setup()
    yield made
    made.teardown()


@pytest.fixture
def ssh(hosts, tmp_path):
    """Two nodes on the shared hosts, in a root directory of this test's."""
    with hosts.backend(tmp_path / "nodes", 2) as backend:
        yield backend


def exists(node, path: str) -> bool:
    return node.run(["test", "-e", path], check=False).returncode == 0


# -- the protocol, as only remote nodes have it -----------------------------------

def test_nodes_are_ssh_nodes_working_in_their_own_directories(ssh, hosts, tmp_path):
    assert [n.name for n in ssh.nodes] == ["n1", "n2"]
    assert all(isinstance(n, Node) for n in ssh.nodes)
    assert [n.address for n in ssh.nodes] == hosts.addresses[:2]
    for node in ssh.nodes:
        assert node.workdir == PurePosixPath(tmp_path / "nodes" / node.name)
        assert exists(node, str(node.workdir))
        assert node.own_network is True
    assert repr(ssh.nodes[0]) == f"SshNode('n1', root@{hosts.addresses[0]}:2222)"
    # No Python with kchaos on a host until install_kchaos puts one there.
    assert SshBackend(hosts.addresses[:1], SshOptions(port=2222)).nodes[0].python is None


def test_argv_is_quoted_once_and_sudo_prefixed_for_other_users(ssh, hosts):
    node = ssh.nodes[0]
    tricky = ["a b", "$HOME", "'quoted'", "; touch /tmp/kchaos-pwned", "`id`", "*"]
    assert node.run(["printf", "%s\\n", *tricky]).stdout.splitlines() == tricky
    assert not os.path.exists("/tmp/kchaos-pwned")
    assert node.command_line(["id"]).startswith("sh -c ")
    other = SshBackend(hosts.addresses[:1], SshOptions(user="alice", port=2222)).nodes[0]
    line = other.command_line(["id", "-u"], timeout=5)
    assert line.startswith("sudo -n sh -c ") and line.endswith(" timeout -k 1 6.000 id -u")


def test_daemons_live_in_pid_files_with_their_start_time(ssh, hosts):
    node = ssh.nodes[0]
    script = ("import os, pathlib, signal, time\n"
              "signal.signal(signal.SIGUSR1, lambda *_: pathlib.Path('usr1').write_text("
              "os.environ['KCHAOS_TEST']))\n"
              "print('up', flush=True)\n" + LOOP)
    node.start_daemon("d", [node.python, "-c", script], env={"KCHAOS_TEST": "env works"})
    assert node.is_running("d")
    wait_until(lambda: b"up" in node.get("d.log"), "the daemon's output in d.log")
    node.signal("d", signal.SIGUSR1)
    wait_until(lambda: exists(node, "usr1"), "the daemon's SIGUSR1 handler")
    assert node.get("usr1") == b"env works"
    with pytest.raises(RuntimeError, match="already runs on n1"):
        node.start_daemon("d", [node.python, "-c", LOOP])
    node.signal("d", signal.SIGKILL)
    wait_until(lambda: not node.is_running("d"), "the daemon dead after SIGKILL")
    node.signal("d", signal.SIGKILL)  # not running: nothing happens
    assert node.stop_daemon("d") == -signal.SIGKILL     # how it ended, as its supervisor saw
    assert node.stop_daemon("never-started") is None
    # A pid file whose pid another process holds now (a reused pid): not ours.
    sshd = hosts.sshd_pid(0)
    node.put(".daemons/reused.pid", f"{sshd} 1\n".encode())
    assert node.pid("reused") == sshd and not node.is_running("reused")
    node.signal("reused", signal.SIGKILL)
    node.stop_daemon("reused", timeout=1)
    assert hosts.local.nodes[0].is_running("sshd")


def test_setup_stops_a_crashed_runs_daemons_and_teardown_is_idempotent(hosts, tmp_path):
    marker = str(tmp_path)
    crashed = hosts.backend(tmp_path / "nodes", 2)
    crashed.setup()
    for node in crashed.nodes:
        node.start_daemon("loop", [node.python, "-c", LOOP, marker])
        node.signal("loop", signal.SIGSTOP)
    for node in crashed.nodes:      # the harness dies: connections go, daemons stay
        node.close()
    again = hosts.backend(tmp_path / "nodes", 2)
    assert again.nodes[0].is_running("loop")    # state lives on the host
    again.setup()
    assert not any(line.startswith("pid") for line in leftovers(hosts.local, marker))
    again.nodes[1].start_daemon("loop", [again.nodes[1].python, "-c", LOOP, marker])
    again.teardown()
    assert not any(line.startswith("pid") for line in leftovers(hosts.local, marker))
    again.teardown()
    hosts.backend(tmp_path / "never", 2).teardown()   # never set up: nothing to do


def test_clean_hosts_stops_a_dead_runs_daemons_from_another_process(hosts, tmp_path):
    marker = str(tmp_path)
    with hosts.backend(tmp_path / "nodes", 2) as run:
        run.nodes[1].start_daemon("loop", [run.nodes[1].python, "-c", LOOP, marker])
        run.nodes[1].close()            # the run's process is gone; its daemon is not
        absent = str(hosts.local.subnet.network_address + 99)     # no host there
        later = SshBackend([*hosts.addresses[:2], absent], SshOptions(
            port=2222, key_file=str(hosts.key_file), known_hosts=str(hosts.known_hosts),
            root_dir=str(tmp_path / "nodes"), connect_timeout=1.0))
        done, problems = clean_hosts(later)
    assert done == [f"n1: 0 daemon(s) stopped; {tmp_path}/nodes/n1 stays",
                    f"n2: 1 daemon(s) stopped (loop); {tmp_path}/nodes/n2 stays"]
    assert problems == ["n3 cannot be reached: daemons of this run may still run there"]
    assert not any(line.startswith("pid") for line in leftovers(hosts.local, marker))


# -- host keys and connection errors ---------------------------------------------

def test_an_unknown_host_key_is_refused_with_the_command_that_adds_it(hosts, tmp_path):
    known = tmp_path / "known_hosts"
    known.write_text("")
    address = hosts.addresses[0]
    backend = hosts.backend(tmp_path / "nodes", 1, known_hosts=str(known))
    with pytest.raises(HostKeyRejected) as refused:
        backend.setup()
    message = str(refused.value)
    keyscan = f"ssh-keyscan -p 2222 {address} >> {known}"
    assert f"[{address}]:2222" in message and keyscan in message
    assert "--ssh-accept-new-host-keys" in message and "\n" not in message
    assert known.read_text() == ""
    # The advice works as given.
    scanned = subprocess.run(keyscan.split(">>")[0].split(), capture_output=True, text=True,
                             check=True).stdout
    known.write_text(scanned)
    with hosts.backend(tmp_path / "nodes", 1, known_hosts=str(known)) as backend:
        assert backend.nodes[0].run(["true"]).returncode == 0


def test_accept_new_host_keys_records_an_unknown_key_as_openssh_reads_it(hosts, tmp_path):
    known = tmp_path / "fresh" / "known_hosts"   # neither the file nor its directory exist
    with hosts.backend(tmp_path / "nodes", 2, known_hosts=str(known),
                       accept_new_host_keys=True) as backend:
        backend.nodes[0].put("logs/x.log", b"x")
    expected = hosts.known_hosts.read_text().splitlines()[:2]
    assert sorted(known.read_text().splitlines()) == sorted(expected)   # set up in parallel
    assert oct(known.stat().st_mode & 0o777) == "0o600"
    with hosts.backend(tmp_path / "nodes", 2, known_hosts=str(known)) as backend:
        backend.nodes[0].fetch("logs", tmp_path / "fetched")   # OpenSSH's ssh, strict
    assert (tmp_path / "fetched" / "x.log").read_bytes() == b"x"


@pytest.mark.parametrize("accept_new", [False, True])
def test_a_changed_host_key_is_always_refused(hosts, tmp_path, accept_new):
    address = hosts.addresses[0]
    impostor = keygen(tmp_path / "other_host_key", "impostor").split()
    known = tmp_path / "known_hosts"
    known.write_text(f"[{address}]:2222 {impostor[0]} {impostor[1]}\n")
    before = known.read_text()
    backend = hosts.backend(tmp_path / "nodes", 1, known_hosts=str(known),
                            accept_new_host_keys=accept_new)
    with pytest.raises(HostKeyRejected) as refused:
        backend.setup()
    message = str(refused.value)
    assert f"the host key of [{address}]:2222 HAS CHANGED" in message
    assert f"ssh-keygen -f {known} -R '[{address}]:2222'" in message
    assert "never accepts a changed key" in message and "\n" not in message
    assert known.read_text() == before


def test_unreachable_hosts_and_refused_keys_get_one_line_errors(hosts, tmp_path):
    address = hosts.addresses[0]
    closed = hosts.backend(tmp_path / "a", 1, port=2299)
    with pytest.raises(SshError) as unreachable:
        closed.setup()
    message = str(unreachable.value)
    assert message.startswith(f"cannot reach n1 (root@{address}:2299)")
    assert "sshd listens on port 2299" in message and "\n" not in message
    stranger = tmp_path / "stranger_key"
    keygen(stranger, "stranger")
    with pytest.raises(SshError) as refused:
        hosts.backend(tmp_path / "b", 1, key_file=str(stranger)).setup()
    message = str(refused.value)
    assert f"n1 (root@{address}:2222) refused authentication" in message
    assert f"public key of {stranger} is in ~root/.ssh/authorized_keys" in message
    assert "\n" not in message


def test_arguments_are_checked(tmp_path):
    with pytest.raises(ValueError, match="hosts='a,b': pass a list"):
        SshBackend("a,b")
    with pytest.raises(ValueError, match="a host is named twice"):
        SshBackend(["198.18.0.11", "198.18.0.11"])
    with pytest.raises(ValueError, match="root_dir='kchaos': an absolute path"):
        SshOptions(root_dir="kchaos")
    with pytest.raises(ValueError, match="port=0"):
        SshOptions(port=0)
    with pytest.raises(ValueError, match="key_file='/nonexistent/key': no such file"):
        SshBackend(["198.18.0.11"], SshOptions(key_file="/nonexistent/key"))


# -- reconnecting ---------------------------------------------------------------------

def test_a_cut_session_reconnects_and_only_repeatable_commands_run_again(hosts, tmp_path):
    with hosts.backend(tmp_path / "nodes", 1) as backend:
        node = backend.nodes[0]
        node.put("before", b"1")
        results = {}

        def run(key, argv):
            try:
                results[key] = node.run(argv, timeout=30).returncode
            except Exception as e:
                results[key] = e

        threads = [threading.Thread(target=run, args=("sleep", ["sleep", "1.5"])),
                   threading.Thread(target=run, args=("shell", ["sh", "-c", "sleep 1.5"]))]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(node.run(["pgrep", "-x", "sleep"], check=False).stdout.split())
                   >= 2, "both commands running")
        assert hosts.cut_sessions(0)
        for thread in threads:
            thread.join(30)
        assert results["sleep"] == 0                 # no side effect: run again
        assert isinstance(results["shell"], SessionLost)
        assert "may or may not have taken effect" in str(results["shell"])
        assert node.get("before") == b"1"            # SFTP on the new connection
        node.put("after", b"2")
        assert node.run(["cat", "after"]).stdout == "2"


def test_a_partition_from_the_harness_is_outlasted(hosts, tmp_path):
    host = hosts.local.nodes[0]
    drop = ["INPUT", "-s", hosts.local.bridge_address, "-p", "tcp", "--dport", "2222",
            "-j", "DROP"]
    with hosts.backend(tmp_path / "nodes", 1, dead_after=2.0, connect_timeout=1.0,
                       reconnect_for=30.0) as backend:
        node = backend.nodes[0]
        before = node.connection.transport()
        host.run(["iptables", "-I", *drop])
        heal = threading.Timer(4.0, lambda: host.run(["iptables", "-D", *drop]))
        heal.start()
        try:
            started = time.monotonic()
            assert node.run(["cat", "/proc/uptime"], timeout=30).stdout
            took = time.monotonic() - started
        finally:
            heal.join()
            host.run(["iptables", "-D", *drop], check=False)
        assert 3.5 < took < 30
        assert node.connection.transport() is not before


# -- sudo, fetch ------------------------------------------------------------------------

@pytest.mark.skipif(shutil.which("sudo") is None, reason="needs sudo: apt-get install sudo")
def test_sudo_runs_everything_as_root_for_another_user(hosts, tmp_path):
    with hosts.sudo_user() as user:
        with hosts.backend(tmp_path / "nodes", 1, user=user) as backend:
            node = backend.nodes[0]
            assert node.command_line(["id"]).startswith("sudo -n sh -c ")
            assert node.run(["id", "-u"]).stdout.strip() == "0"
            node.put("secret/only-root", b"s3cret")   # under a root-owned workdir
            node.run(["chmod", "600", "secret/only-root"])
            assert node.run(["stat", "-c", "%U", "secret/only-root"]).stdout.strip() == "root"
            assert node.get("secret/only-root") == b"s3cret"
            node.fetch("secret", tmp_path / "fetched")    # rsync under sudo
            assert (tmp_path / "fetched" / "only-root").read_bytes() == b"s3cret"
            node.start_daemon("loop", [node.python, "-c", LOOP])
            assert node.is_running("loop")
            assert node.stop_daemon("loop") == -signal.SIGTERM
        Path(f"/etc/sudoers.d/kchaos-test-{user}").unlink()
        with pytest.raises(SshError, match=rf"`sudo -n` fails for {user} .*NOPASSWD"):
            hosts.backend(tmp_path / "nodes", 1, user=user).setup()


def test_fetch_and_large_gets_copy_with_rsync_or_else_scp(ssh, tmp_path, monkeypatch):
    """fetch copies directories, and get a file larger than SFTP_LIMIT (a
    broker's log), with rsync, or scp where there is no rsync."""
    node = ssh.nodes[0]
    files = {"a.log": b"a" * 10, "sub/b.log": b"b" * 70000}
    for name, data in files.items():
        node.put(f"logs/{name}", data)
    large = os.urandom(SFTP_LIMIT + 4096)
    node.put("broker.log", large)
    assert node.get("broker.log") == large

    def copied(directory: Path) -> dict[str, bytes]:
        return {str(p.relative_to(directory)): p.read_bytes()
                for p in directory.rglob("*") if p.is_file()}

    node.fetch("logs", tmp_path / "rsync")
    assert copied(tmp_path / "rsync") == files
    bin_dir = tmp_path / "bin"          # ssh and scp, no rsync
    bin_dir.mkdir()
    for tool in ("ssh", "scp"):
        (bin_dir / tool).symlink_to(shutil.which(tool))
    monkeypatch.setenv("PATH", str(bin_dir))
    node.fetch("logs", tmp_path / "scp")
    assert copied(tmp_path / "scp") == files
    assert node.get("broker.log") == large
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))   # SFTP only: small files come,
    assert node.get("logs/a.log") == files["a.log"]
    with pytest.raises(FetchError, match="neither rsync nor scp"):     # a large one does not
        node.get("broker.log")
    monkeypatch.undo()
    with pytest.raises(FetchError, match=rf"n1: copying {node.workdir}/missing from root@"):
        node.fetch("missing", tmp_path / "none")


# -- kchaos on the hosts -------------------------------------------------------------

@pytest.fixture(scope="module")
def installed(hosts, tmp_path_factory):
    """Three nodes with kchaos installed."""
    backend = hosts.backend(tmp_path_factory.mktemp("installed") / "nodes", 3, install=True)
    try:
        backend.setup()
        yield backend
    finally:
        backend.teardown()


def test_install_kchaos_puts_only_the_nodes_needs_in_a_venv(installed, hosts, caplog):
    backend = installed
    for node in backend.nodes:
        assert node.python == str(node.workdir / INSTALL / "venv" / "bin" / "python")
        node.run([node.python, "-c", "import reference_broker.main, nemesis.disk.gate"])
        assert node.run([node.python, "-c", "import pyspark"], check=False).returncode != 0
    def markers() -> list[bytes]:
        return [node.get(f"{INSTALL}/{MARKER}") for node in backend.nodes]

    before = markers()
    with caplog.at_level("INFO", logger="cluster"):
        install_kchaos(backend.nodes)
    # The same wheels: nothing to do (unless someone edited the sources meanwhile).
    if markers() == before:
        assert caplog.text.count("is already installed") == 3
    # Another process (kchaos heal, clean) finds the installation.
    again = hosts.backend(PurePosixPath(backend.root_dir), 3)
    try:
        assert [n.python for n in again.reattach()] == [n.python for n in backend.nodes]
    finally:
        again.teardown()


def test_a_reference_cluster_on_ssh_hosts_serves_a_real_client(installed, tmp_path):
    backend = installed
    db = ReferenceDB(config=SETTINGS)
    try:
        db.start_all(backend.nodes, timeout=TIMEOUT)
        create_topic(db, "over-ssh")
        round_trip(db.bootstrap_servers(), "over-ssh")
        backend.nodes[0].fetch("data", tmp_path / "data")
        assert (tmp_path / "data" / "over-ssh-0").is_dir()
        db.collect(backend.nodes[0], tmp_path / "collected")
        assert "node 1 registered" in (tmp_path / "collected" / "broker.log").read_text()
    finally:
        for node in backend.nodes:
            db.teardown(node)
    assert not any(n.is_running("broker") or n.is_running("controller") for n in backend.nodes)
