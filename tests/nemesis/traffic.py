"""Real traffic between network namespaces, to see what a network fault
cut: a TCP listener and a UDP receiver on every node, connections and
datagrams from the other nodes and from the root namespace (where clients
live). TCP needs both directions (a DROP on either side kills the
handshake), so TCP shows who is cut off from whom; UDP shows one-way cuts
and loss."""

from __future__ import annotations

import json
import random
import socket
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from tests.cluster.conftest import leftovers, make_backend, wait_until

PY = sys.executable
TCP, UDP = 7100, 7101
LISTEN = """
import socket, sys
s = socket.create_server(("0.0.0.0", int(sys.argv[1])), backlog=128)
while True:
    s.accept()[0].close()
"""
# Writes every datagram it receives as a line of its log.
RECEIVE = """
import os, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 22)
s.bind(("0.0.0.0", int(sys.argv[1])))
while True:
    os.write(1, s.recv(256) + b"\\n")
"""
# argv: {name: address} as JSON, port, timeout; prints {name: connected}.
PROBE = """
import json, socket, sys
from concurrent.futures import ThreadPoolExecutor
targets, port, timeout = json.loads(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
def connects(address):
    try:
        socket.create_connection((address, port), timeout=timeout).close()
        return True
    except OSError:
        return False
with ThreadPoolExecutor(len(targets)) as pool:
    print(json.dumps(dict(zip(targets, pool.map(connects, targets.values())))))
"""
# argv: address, port, tag, count; paced so no receive buffer overflows.
SEND = """
import socket, sys, time
address, port, tag, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for i in range(count):
    s.sendto(f"{tag} {i}".encode(), (address, port))
    if i % 50 == 49:
        time.sleep(0.002)
"""


def listening_namespaces(tmp_path_factory, n: int):
    """A backend of n namespaces whose nodes all listen (TCP) and receive
    (UDP) before it is handed out; torn down after, leaving nothing behind."""
    backend = make_backend("netns", tmp_path_factory.mktemp(f"net{n}"), n)
    backend.setup()
    try:
        for node in backend.nodes:
            node.start_daemon("listen", [PY, "-c", LISTEN, str(TCP)])
            node.start_daemon("udp", [PY, "-c", RECEIVE, str(UDP)])
        for node in backend.nodes:
            wait_until(lambda: client_reaches([node]) == {node.name}, f"{node.name} listens")
            wait_until(lambda: send_from_root(node, "ready", 1) or received(node, "ready", 1),
                       f"{node.name} receives UDP")
        yield backend
    finally:
        backend.teardown()
    assert leftovers(backend, backend.prefix) == []


def reaches(node, nodes) -> set[str]:
    """The nodes node can open a TCP connection to."""
    targets = {other.name: other.address for other in nodes if other is not node}
    out = node.run([PY, "-c", PROBE, json.dumps(targets), str(TCP), "0.5"]).stdout
    return {name for name, ok in json.loads(out).items() if ok}


def connectivity(nodes) -> dict[str, set[str]]:
    with ThreadPoolExecutor(len(nodes)) as pool:
        return dict(zip([n.name for n in nodes], pool.map(lambda n: reaches(n, nodes), nodes)))


def expected(grudge_: dict[str, list[str]], names: list[str]) -> dict[str, set[str]]:
    """TCP works between a and b when neither drops the other."""
    return {a: {b for b in names if b != a and b not in grudge_.get(a, [])
                and a not in grudge_.get(b, [])} for a in names}


def everyone(names: list[str]) -> dict[str, set[str]]:
    return expected({}, names)


def client_reaches(nodes) -> set[str]:
    """The nodes a client in the root namespace can connect to."""
    def connects(node):
        try:
            socket.create_connection((node.address, TCP), timeout=0.5).close()
            return True
        except OSError:
            return False
    with ThreadPoolExecutor(len(nodes)) as pool:
        return {node.name for node, ok in zip(nodes, pool.map(connects, nodes)) if ok}


def send(source, target, tag: str, count: int) -> None:
    source.run([PY, "-c", SEND, target.address, str(UDP), tag, str(count)])


def send_from_root(target, tag: str, count: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for i in range(count):
            s.sendto(f"{tag} {i}".encode(), (target.address, UDP))


def received(node, tag: str, most: int) -> int:
    """How many datagrams tagged tag node received, once that count stops
    growing (or reaches most)."""
    def count() -> int:
        lines = node.get("udp.log").splitlines()
        return sum(line.split(b" ")[0] == tag.encode() for line in lines)
    last, since = count(), time.monotonic()
    while last < most and time.monotonic() - since < 0.3:
        time.sleep(0.05)
        now = count()
        if now != last:
            last, since = now, time.monotonic()
    return last


def nonce(what: str) -> str:
    return f"{what}-{random.getrandbits(32):08x}"
