"""The disk gate (nemesis/disk): passthrough against a plain directory,
stall, EIO, losing unsynced writes, and the disk faults on a real reference
broker. Root and /dev/fuse only; every gate is unmounted in `finally` and
the tests check that none is left, even after the gate was SIGKILLed.
"""

from __future__ import annotations

import errno
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting FUSE needs root"),
    pytest.mark.skipif(not os.path.exists("/dev/fuse"), reason="no /dev/fuse"),
]
pytest.importorskip("mfusepy", reason="the disk gate needs mfusepy and libfuse3")

from cluster.local import LocalNode  # noqa: E402
from cluster.node import process_state, until_frozen  # noqa: E402
from nemesis.core import Cluster, FaultError  # noqa: E402
from nemesis.disk.fault import (  # noqa: E402
    DiskFault, command, gate_mounts, heal, mount, unmount, unmount_all,
)
from tests.cluster.conftest import wait_until  # noqa: E402



def all_gate_mounts() -> list[str]:
    return [line for line in Path("/proc/self/mounts").read_text().splitlines()
            if " fuse.kchaos-disk " in line]


@pytest.fixture
def gated(tmp_path):
    """mount(delay) -> (node, mountpoint, backing): a gate on a local node
    of its own (the host's network and mounts)."""
    nodes = []

    def make(writeback_delay: float = 60.0):
        node = LocalNode(f"g{len(nodes) + 1}", "127.0.0.1", tmp_path / f"node{len(nodes) + 1}")
        node.workdir.mkdir(parents=True)
        nodes.append(node)
        mount(node, writeback_delay=writeback_delay)
        return node, node.workdir / "data", node.workdir / "data.backing"

    try:
        yield make
    finally:
        problems = unmount_all(nodes)
        for node in nodes:
            node.stop_all()
        assert problems == []
        assert not [m for m in all_gate_mounts() if str(tmp_path) in m]


# -- passthrough ---------------------------------------------------------------


def test_passthrough_reads_writes_and_names(gated):
    node, mnt, backing = gated()
    (mnt / "a.txt").write_bytes(b"hello")
    assert (mnt / "a.txt").read_bytes() == b"hello"
    with open(mnt / "b.log", "ab") as f:
        f.write(b"x" * 100_000)
        f.flush()
        os.fsync(f.fileno())
    assert (backing / "b.log").read_bytes() == b"x" * 100_000
    (mnt / "dir" / "sub").mkdir(parents=True)
    (mnt / "a.txt").rename(mnt / "dir" / "sub" / "c.txt")
    assert (backing / "dir" / "sub" / "c.txt").exists()      # names pass through at once
    assert sorted(os.listdir(mnt)) == ["b.log", "dir"]
    os.truncate(mnt / "b.log", 10)
    assert os.stat(mnt / "b.log").st_size == 10
    assert (mnt / "b.log").read_bytes() == b"x" * 10
    (mnt / "b.log").unlink()
    assert not (backing / "b.log").exists()
    (mnt / "dir" / "sub" / "c.txt").unlink()
    (mnt / "dir" / "sub").rmdir()
    assert os.listdir(backing) == ["dir"]
    assert command(node, "status")["dirty_files"] >= 0


def test_random_operations_match_a_plain_directory(gated, tmp_path):
    """Seeded random writes, appends, truncations, renames, unlinks and
    fsyncs through the gate and on a plain directory read the same; after
    `sync` the backing directory holds exactly the plain one."""
    node, mnt, backing = gated(writeback_delay=0.3)
    plain = tmp_path / "plain"
    plain.mkdir()
    rng = random.Random(7)
    names = [f"f{i}" for i in range(5)]

    def both(operation, name, *args):
        results = []
        for root in (mnt, plain):
            try:
                results.append(("ok", operation(root / name, *args)))
            except OSError as e:
                results.append(("error", e.errno))
        assert results[0] == results[1], (operation.__name__, name, args, results)

    def write_at(path, offset, data):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            return os.pwrite(fd, data, offset)
        finally:
            os.close(fd)

    def append(path, data):
        with open(path, "ab") as f:
            return f.write(data)

    def fsync(path):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    for step in range(300):
        name = rng.choice(names)
        kind = rng.random()
        if kind < 0.3:
            both(write_at, name, rng.randrange(0, 70_000),
                 rng.randbytes(rng.choice([1, 100, 5000, 70_000])))
        elif kind < 0.5:
            both(append, name, rng.randbytes(rng.randrange(1, 3000)))
        elif kind < 0.6:
            both(os.truncate, name, rng.randrange(0, 80_000))
        elif kind < 0.7:
            both(lambda path, to: os.rename(path, path.with_name(to)), name, rng.choice(names))
        elif kind < 0.75:
            both(os.unlink, name)
        elif kind < 0.85:
            both(fsync, name)
        else:
            both(Path.read_bytes, name)
        if step % 50 == 0:
            time.sleep(0.35)    # let the writeback run now and then
        for n in names:
            both(lambda p: (os.stat(p).st_size, p.read_bytes()), n)
    command(node, "sync")
    assert sorted(os.listdir(backing)) == sorted(os.listdir(plain))
    for n in os.listdir(plain):
        assert (backing / n).read_bytes() == (plain / n).read_bytes(), n


# -- stall and errors ----------------------------------------------------------


def test_stall_blocks_writes_until_unstalled_and_status_answers(gated):
    node, mnt, _ = gated()
    done = threading.Event()

    def writer():
        (mnt / "stalled.txt").write_bytes(b"late")
        done.set()

    command(node, "stall")
    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    try:
        assert not done.wait(0.7), "the write went through a stalled disk"
        status = wait_until(lambda: (s := command(node, "status"))["blocked_ops"] >= 1 and s,
                            "an operation waits at the gate", timeout=5)
        assert status["stalled"] is True
    finally:
        command(node, "unstall")
    assert done.wait(5), "the write did not finish after unstall"
    assert (mnt / "stalled.txt").read_bytes() == b"late"


def test_a_process_blocked_by_a_stall_dies_of_sigkill_and_waits_out_a_pause(gated):
    """A kill is a crash even while the disk hangs: the operation a
    SIGKILLed process waits in is answered (EINTR), rather than keeping it
    alive until the unstall. A pause (SIGSTOP, SIGCONT) is not a crash:
    the operation goes on waiting, and the pause counts as done although
    the process waits in the kernel (D), not stopped (T)."""
    node, mnt, _ = gated()
    command(node, "stall")
    writer = subprocess.Popen([sys.executable, "-c",
                               f"open({str(mnt / 'stalled.txt')!r}, 'wb').write(b'x')"])
    try:
        wait_until(lambda: command(node, "status")["blocked_ops"] >= 1, "the write waits",
                   timeout=5)
        writer.send_signal(signal.SIGSTOP)
        until_frozen(node, lambda: [writer.pid], True, "the writer", timeout=5)
        assert process_state(node, writer.pid) == "D"
        writer.send_signal(signal.SIGCONT)
        until_frozen(node, lambda: [writer.pid], False, "the writer", timeout=5)
        time.sleep(0.5)
        assert writer.poll() is None and command(node, "status")["blocked_ops"] >= 1
        writer.kill()
        assert writer.wait(timeout=5) == -signal.SIGKILL
        assert command(node, "status")["stalled"] is True    # the others still wait
    finally:
        writer.kill()
        command(node, "unstall")


def test_errors_fail_io_with_eio_until_stopped(gated):
    node, mnt, _ = gated()
    (mnt / "f").write_bytes(b"before")
    fd = os.open(mnt / "f", os.O_RDWR)
    try:
        command(node, "errors")
        for attempt in (lambda: os.write(fd, b"x"), lambda: os.fsync(fd),
                        lambda: os.pread(fd, 10, 0), lambda: os.open(mnt / "f", os.O_RDONLY),
                        lambda: os.open(mnt / "new", os.O_CREAT | os.O_WRONLY, 0o644)):
            with pytest.raises(OSError) as raised:
                attempt()
            assert raised.value.errno == errno.EIO
        assert os.stat(mnt / "f").st_size == 6     # looking still works
        command(node, "stop-errors")
        os.pwrite(fd, b"after", 6)
        os.fsync(fd)
        assert os.pread(fd, 20, 0) == b"beforeafter"
    finally:
        os.close(fd)


# -- losing what was not synced ------------------------------------------------


def test_drop_loses_what_was_not_fsynced(gated):
    node, mnt, backing = gated(writeback_delay=60)
    with open(mnt / "log", "ab") as f:
        f.write(b"A" * 1000)
        f.flush()
        os.fsync(f.fileno())
        f.write(b"B" * 500)
    (mnt / "cut").write_bytes(b"C" * 100)
    with open(mnt / "cut", "r+b") as f:
        os.fsync(f.fileno())
        f.truncate(10)              # a truncation is unsynced data too
    (mnt / "new").write_bytes(b"N" * 10)
    assert (mnt / "log").read_bytes() == b"A" * 1000 + b"B" * 500
    answer = command(node, "drop")
    assert answer["dropped_files"] == 3 and answer["dropped_bytes"] == 510
    expected = {"log": b"A" * 1000, "cut": b"C" * 100, "new": b""}
    for name, data in expected.items():
        assert (backing / name).read_bytes() == data
        assert (mnt / name).read_bytes() == data
    unmount(node)
    mount(node, writeback_delay=60)
    for name, data in expected.items():
        assert (mnt / name).read_bytes() == data


def test_random_writes_then_drop_leave_exactly_what_was_fsynced(gated):
    """Seeded writes, appends and truncations with an fsync now and then:
    after a drop every file holds what it held at its last fsync (empty if
    it never had one), in the backing directory and through the gate."""
    node, mnt, backing = gated(writeback_delay=60)
    rng = random.Random(11)
    visible: dict[str, bytearray] = {}
    durable: dict[str, bytes] = {}
    for _ in range(200):
        name = f"f{rng.randrange(4)}"
        content = visible.setdefault(name, bytearray())
        durable.setdefault(name, b"")
        with open(mnt / name, "r+b" if (mnt / name).exists() else "w+b") as f:
            kind = rng.random()
            if kind < 0.5:
                offset = rng.randrange(0, len(content) + 5000)
                data = rng.randbytes(rng.randrange(1, 20_000))
                f.seek(offset)
                f.write(data)
                content.extend(bytes(max(0, offset - len(content))))
                content[offset:offset + len(data)] = data
            elif kind < 0.7:
                length = rng.randrange(0, len(content) + 5000)
                f.truncate(length)
                del content[length:]
                content.extend(bytes(length - len(content)))
            else:
                f.flush()
                os.fsync(f.fileno())
                durable[name] = bytes(content)
        assert (mnt / name).read_bytes() == content
    command(node, "drop")
    for name, data in durable.items():
        assert (backing / name).read_bytes() == data, name
        assert (mnt / name).read_bytes() == data, name


def test_unmount_lets_a_stalled_operation_through(gated):
    node, mnt, backing = gated()
    done = threading.Event()
    thread = threading.Thread(target=lambda: ((mnt / "f").write_bytes(b"x"), done.set()),
                              daemon=True)
    command(node, "stall")
    thread.start()
    wait_until(lambda: command(node, "status")["blocked_ops"] >= 1, "a write waits", timeout=5)
    unmount(node)
    assert done.wait(5) and (backing / "f").read_bytes() == b"x"   # written back on the way
    assert gate_mounts(node) == []


def test_writeback_after_the_delay_survives_a_drop(gated):
    node, mnt, backing = gated(writeback_delay=0.5)
    with open(mnt / "log", "ab") as f:
        f.write(b"A" * 1000)
        os.fsync(f.fileno())
        f.write(b"B" * 500)
    wait_until(lambda: command(node, "status")["dirty_bytes"] == 0, "written back", timeout=5)
    assert command(node, "drop")["dropped_bytes"] == 0
    assert (backing / "log").read_bytes() == (mnt / "log").read_bytes() == b"A" * 1000 + b"B" * 500


def test_a_stalled_disk_writes_nothing_back_so_a_drop_loses_it_all(gated):
    """Stall, kill, drop is a power cut at the stall: data that ages past
    the writeback delay during the stall is still lost."""
    # The stall must reach the gate before the write ages past the delay:
    # 0.3 s was too short on a loaded machine (written back first, once).
    node, mnt, backing = gated(writeback_delay=2.0)
    with open(mnt / "log", "ab") as f:
        f.write(b"A" * 1000)
    command(node, "stall")
    time.sleep(3.0)     # past the writeback delay
    assert command(node, "status")["dirty_bytes"] == 1000
    assert command(node, "drop")["dropped_bytes"] == 1000
    command(node, "unstall")
    assert (backing / "log").read_bytes() == b""
    # Unstalled, the writeback runs again.
    with open(mnt / "log", "ab") as f:
        f.write(b"B" * 10)
    wait_until(lambda: command(node, "status")["dirty_bytes"] == 0, "written back", timeout=5)
    assert (backing / "log").read_bytes() == b"B" * 10


# -- a dead gate ---------------------------------------------------------------


def test_heal_and_unmount_all_after_the_gate_was_killed(gated):
    node, mnt, _ = gated()
    (mnt / "f").write_bytes(b"x")
    node.signal("disk", signal.SIGKILL)
    wait_until(lambda: not node.is_running("disk"), "the gate is dead")
    with pytest.raises(OSError) as raised:
        os.stat(mnt / "f")
    assert raised.value.errno == errno.ENOTCONN
    problems = heal(Cluster([node], db=None))
    assert len(problems) == 1 and "does not answer" in problems[0]
    assert unmount_all([node]) == []
    assert gate_mounts(node) == []
    assert unmount_all([node]) == []        # idempotent


def test_a_fault_on_a_node_without_a_gate_names_it(tmp_path):
    node = LocalNode("bare", "127.0.0.1", tmp_path)
    with pytest.raises(FaultError, match=r"bare: no disk gate is mounted .* need the gate"):
        DiskFault("stall", targets=["bare"]).start(Cluster([node], db=None), random.Random(1))
    assert heal(Cluster([node], db=None)) == []
    with pytest.raises(ValueError, match="mode='slow'"):
        DiskFault("slow")


def test_unmount_all_on_a_node_whose_workdir_was_never_made(tmp_path):
    """A run killed in setup leaves nodes whose directories do not exist yet;
    `kchaos clean` unmounts nothing there instead of failing on them."""
    node = LocalNode("unborn", "127.0.0.1", tmp_path / "scratch" / "n2")
    assert gate_mounts(node) == []
    assert unmount_all([node]) == []
