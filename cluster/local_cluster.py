"""A reference cluster as local processes on loopback ports: one controller
(`--process-roles controller`, node id 0) and N brokers (node ids 1..N)
that register with it. What the replication tests and the cluster
benchmark start; they stop, kill, pause and restart brokers by node id.

Ready means what a client needs: every broker is registered and unfenced
(Metadata lists them all) and every partition has a leader.
"""

from __future__ import annotations

import time
from pathlib import Path

from cluster.broker_process import BrokerProcess
from cluster.readiness import admin_client, metadata_problem

CONTROLLER_ID = 0


class LocalCluster:
    def __init__(self, root: Path, brokers: int = 3, *, config: list[str] = (),
                 bugs: list[str] = (), log_level: str = "INFO"):
        if brokers < 1:
            raise ValueError(f"brokers={brokers!r}: a cluster needs at least one broker")
        self.root = Path(root)
        self.controller = BrokerProcess(self.root / "controller", node_id=CONTROLLER_ID,
                                        config=config, log_level=log_level,
                                        process_roles="controller")
        self.brokers = {
            node_id: BrokerProcess(self.root / f"broker-{node_id}", node_id=node_id,
                                   config=config, bugs=bugs, log_level=log_level,
                                   controller=self.controller.bootstrap)
            for node_id in range(1, brokers + 1)}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self, timeout: float = 30.0) -> "LocalCluster":
        self.controller.start(timeout)
        for broker in self.brokers.values():
            broker.launch()
        for broker in self.brokers.values():
            broker.wait_ready(timeout)
        self.wait_ready(timeout)
        return self

    def close(self) -> None:
        for broker in self.brokers.values():
            broker.kill()
        self.controller.kill()

    def __enter__(self) -> "LocalCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one broker ------------------------------------------------------

    def stop(self, node_id: int) -> int | None:
        return self.brokers[node_id].stop()

    def kill(self, node_id: int) -> int | None:
        return self.brokers[node_id].kill()

    def pause(self, node_id: int) -> None:
        self.brokers[node_id].pause()

    def resume(self, node_id: int) -> None:
        self.brokers[node_id].resume()

    def restart(self, node_id: int, timeout: float = 30.0) -> None:
        """Start a stopped or killed broker again on its port and data."""
        broker = self.brokers[node_id]
        if broker.running():
            broker.stop()
        broker.start(timeout)

    def restart_controller(self, timeout: float = 30.0) -> None:
        """Stop the controller cleanly and start it again on its log."""
        self.controller.stop()
        self.controller.start(timeout)

    # -- what the cluster says -------------------------------------------

    def metadata(self, timeout: float = 5.0):
        """A real client's view (confluent-kafka's ClusterMetadata) of the
        live brokers."""
        bootstrap = ",".join(b.bootstrap for b in self.brokers.values() if b.running())
        with admin_client(bootstrap) as admin:
            return admin.list_topics(timeout=timeout)

    def wait_ready(self, timeout: float = 30.0, brokers: int | None = None) -> None:
        """Until Metadata lists `brokers` (default: every running one) and
        every partition has a leader."""
        running = [n for n, b in self.brokers.items() if b.running()]
        want = len(running) if brokers is None else brokers
        deadline = time.monotonic() + timeout
        problem = "no metadata yet"
        while time.monotonic() < deadline:
            bootstrap = ",".join(self.brokers[n].bootstrap for n in running)
            # The first `want` running brokers: a caller may wait for fewer.
            problem = metadata_problem(bootstrap, set(running[:want]),
                                       min(5.0, max(0.5, deadline - time.monotonic())))
            if problem is None:
                return
            time.sleep(0.2)
        tails = "\n".join(f"--- {p.log_path}\n{p.log_tail(15)}"
                          for p in [self.controller, *self.brokers.values()])
        raise TimeoutError(f"cluster not ready after {timeout} s: {problem}\n{tails}")

    def leader(self, topic: str, partition: int = 0) -> int:
        return self.metadata().topics[topic].partitions[partition].leader

    def isr(self, topic: str, partition: int = 0) -> list[int]:
        return list(self.metadata().topics[topic].partitions[partition].isrs)
