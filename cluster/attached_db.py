"""`--db external` with the cluster's nodes named: a cluster kchaos did not
start (a user's compose project, their own hosts), hurt where it runs.

Partitions are iptables in each node's own network (the container's, the
host's), as on any node. Process faults hit the broker:

- with `--broker-process PATTERN`: the processes `pgrep -f PATTERN` finds on
  the node get SIGSTOP / SIGCONT / SIGKILL, and `--broker-start CMD` (run by
  `sh -c` on the node, detached, in its working directory) starts it again;
  both may name the node's `{address}` and `{node_name}`;
- on a container without a pattern: the container's main process is the
  broker (a compose service): pause is `docker pause`, kill `docker kill`
  (which reaches a PID 1 that a signal from inside the container cannot)
  and start `docker start`.

Nothing is set up or torn down: the cluster is the user's. heal-all resumes
paused brokers and starts killed ones.
"""

from __future__ import annotations

import signal
import time
from typing import Protocol, runtime_checkable

from cluster.db import ExternalDB
from cluster.node import Node, until_frozen
from cluster.readiness import (broker_hosts, group_coordinator_id, metadata_problem,
                               partition_state, same_host)

# $0 is --broker-start's command line, run by sh with its output appended
# to broker-start.log in the node's working directory.
_START = 'exec sh -c "$0" >> broker-start.log 2>&1 < /dev/null'


@runtime_checkable
class Container(Protocol):
    """A node that is a container the engine pauses, kills and starts
    (cluster/docker_attach.py)."""

    def pause_container(self) -> None: ...

    def unpause_container(self) -> None: ...

    def kill_container(self) -> None: ...

    def start_container(self) -> None: ...

    def container_running(self) -> bool: ...


def per_node(text: str, node: Node) -> str:
    """--broker-process and --broker-start with `{address}` and `{node_name}`
    filled in: hosts that share a process table (or run several brokers)
    tell their broker apart by its address. Plain replacement, so a
    pattern's own braces (`[0-9]{2}`) stay as they are."""
    return text.replace("{address}", node.address).replace("{node_name}", node.name)


class AttachedDB(ExternalDB):
    def __init__(self, bootstrap: str, nodes: list[Node], *, broker_process: str | None = None,
                 broker_start: str | None = None):
        super().__init__(bootstrap)
        self.nodes = list(nodes)
        self.broker_process = broker_process
        self.broker_start = broker_start
        for node in self.nodes:
            if broker_process is None and not isinstance(node, Container):
                raise ValueError(f"{node.name}: pause and kill need --broker-process PATTERN "
                                 f"on a node that is not a container")

    # -- process faults ------------------------------------------------------

    def pause(self, node: Node) -> None:
        self._signal(node, signal.SIGSTOP)
        if self.broker_process is not None:
            until_frozen(node, lambda: self._pids(node), True, "the broker's processes")

    def resume(self, node: Node) -> None:
        if self.broker_process is not None and not self._pids(node):
            return      # heal-all resumes every node: one whose broker is not running is fine
        self._signal(node, signal.SIGCONT)
        if self.broker_process is not None:
            until_frozen(node, lambda: self._pids(node), False, "the broker's processes")

    def kill(self, node: Node) -> None:
        self._signal(node, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while self.alive(node):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{node.name}: the broker survives SIGKILL after 30 s")
            time.sleep(0.1)

    def alive(self, node: Node) -> bool:
        if self.broker_process is not None:
            return bool(self._pids(node))
        return node.container_running()

    def start(self, node: Node) -> None:
        if self.alive(node):
            return
        if self.broker_process is not None:
            if not self.broker_start:
                raise RuntimeError(f"{node.name}: the broker is not running and there is no "
                                   f"--broker-start CMD to start it")
            # Detached and not one of kchaos's daemons: the broker it starts
            # is the user's and outlives the run (a teardown stops ours).
            node.run(["setsid", "-f", "sh", "-c", _START, per_node(self.broker_start, node)])
        else:
            node.start_container()

    def _signal(self, node: Node, sig: int) -> None:
        if self.broker_process is not None:
            pids = self._pids(node)
            if not pids:
                raise RuntimeError(f"{node.name}: no process matches --broker-process "
                                   f"{per_node(self.broker_process, node)!r}: nothing to "
                                   f"signal (is the broker running? does the pattern match "
                                   f"its command line, as pgrep -f reads it?)")
            done = node.run(["kill", f"-{int(sig)}", *map(str, pids)], check=False)
            # A process that exited between pgrep and kill is not a failure;
            # a signal nobody could receive is.
            if done.returncode != 0 and len(self._pids(node)) == len(pids):
                raise RuntimeError(f"{node.name}: kill -{int(sig)} {' '.join(map(str, pids))} "
                                   f"failed: {done.stderr.strip() or done.returncode}")
        elif sig == signal.SIGSTOP:
            node.pause_container()
        elif sig == signal.SIGCONT:
            node.unpause_container()
        else:
            node.kill_container()

    def _pids(self, node: Node) -> list[int]:
        done = node.run(["pgrep", "-f", per_node(self.broker_process, node)], check=False)
        # pgrep never lists itself, but the sh -c of --broker-start matches
        # the pattern too: its children are the broker, and it is signalled
        # with them, which is what a kill of the broker means.
        return [int(p) for p in done.stdout.split()]

    # -- the cluster as clients see it -----------------------------------------

    def deaths(self) -> list[tuple[str, str, float]]:
        return []       # a cluster kchaos did not start: nothing is expected of it

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        problem = "no answer"
        while time.monotonic() < deadline:
            problem = metadata_problem(self.bootstrap, set(), min(5.0, max(
                0.5, deadline - time.monotonic())))
            if problem is None:
                return
            time.sleep(0.5)
        raise TimeoutError(f"the cluster at {self.bootstrap} is not ready after {timeout} s: "
                           f"Metadata: {problem}")

    def primary(self, topic: str, partition: int) -> Node | None:
        state = partition_state(self.bootstrap, topic, partition)
        return None if state is None or state[0] is None else self._node_by_id(state[0])

    def in_sync(self, topic: str, partition: int) -> list[Node] | None:
        state = partition_state(self.bootstrap, topic, partition)
        return None if state is None else [n for n in map(self._node_by_id, state[1]) if n]

    def controller_node(self) -> Node | None:
        """A cluster kchaos did not start: where its controller runs is not known."""
        return None

    def group_coordinator(self, group: str) -> Node | None:
        found = group_coordinator_id(self.bootstrap, group)
        return None if found is None else self._node_by_id(found)

    def _node_by_id(self, node_id: int) -> Node | None:
        """The node at the address the broker advertises (Metadata); else,
        when its address is none of the nodes' (a name only the cluster's
        own network resolves), the node named in node-id order
        (--docker-containers c1,c2,... or --nodes h1,h2,... for ids 1, 2, ...)."""
        host = (broker_hosts(self.bootstrap) or {}).get(node_id)
        found = next((n for n in self.nodes if host and same_host(n.address, host)), None)
        if found is not None:
            return found
        return self.nodes[node_id - 1] if 1 <= node_id <= len(self.nodes) else None
