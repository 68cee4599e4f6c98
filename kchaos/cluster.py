"""A run's cluster: the nodes its backend gives (local, docker, ssh) and
the DB adapter that runs — or attaches to — the system under test.

    backend (config.node_backend())   db (config.db)
    local: namespaces / loopback      reference: the reference broker
    docker: containers kchaos makes   command: a system spec's broker
            or --docker-containers    external: --bootstrap, faults only
    ssh: --nodes host1,host2,...                through the named nodes

`make_backend` is the one place a backend is built from a config: the run,
`kchaos heal` and `kchaos clean` use it, so they find the same nodes.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

from history_analysis.run_dir import NODES_DIR
from kchaos.config import TestConfig

log = logging.getLogger("kchaos.run")
SCRATCH = "scratch"     # the local nodes' workdirs, under the run directory


def make_backend(config: TestConfig, run_dir: Path):
    """The backend config names, not set up yet (None: no nodes)."""
    if not config.has_nodes():
        return None
    kind = config.node_backend()
    if kind == "local":
        from cluster.addressing import prefix_for
        from cluster.local import LocalBackend
        return LocalBackend(config.node_count(), run_dir / SCRATCH, subnet=config.subnet,
                            use_namespaces=config.use_namespaces,
                            prefix=prefix_for(config.subnet))
    if kind == "docker":
        if config.docker_containers:
            from cluster.docker_attach import AttachedContainers
            return AttachedContainers(list(config.docker_containers))
        from cluster.docker import DockerBackend
        return DockerBackend(config.node_count(), run_dir / SCRATCH, subnet=config.subnet,
                             image=config.docker_image)
    from cluster.ssh import SshBackend
    return SshBackend(list(config.nodes), config.ssh,
                      install=config.db in ("reference", "kafka", "command"))


def make_db(config: TestConfig, nodes: list):
    from cluster.db import ExternalDB, ReferenceDB
    if config.db == "reference":
        return ReferenceDB(bugs=list(config.bugs), config=list(config.broker_config),
                           controller_node=config.controller_node)
    if config.db in ("kafka", "command"):
        from cluster.command_db import CommandDB
        return CommandDB(config.system_spec(), config=list(config.broker_config),
                         kafka_version=config.kafka_version)
    if nodes:
        from cluster.attached_db import AttachedDB
        return AttachedDB(config.bootstrap, nodes, broker_process=config.broker_process,
                          broker_start=config.broker_start)
    return ExternalDB(config.bootstrap)


class SystemUnderTest:
    """The nodes and the system under test, whichever backend and DB."""

    def __init__(self, config: TestConfig, run_dir: Path):
        self.config = config
        self.run_dir = run_dir
        self.backend = None
        self.nodes: list = []
        self.db = None

    def start(self) -> str:
        """Set the nodes up, start (or find) the system; its bootstrap."""
        config = self.config
        self.backend = make_backend(config, self.run_dir)
        if self.backend is not None:
            self.backend.setup()
            self.nodes = list(self.backend.nodes)
        self.db = make_db(config, self.nodes)
        if config.db == "external":
            return self.db.bootstrap_servers()
        if config.disk_gate():
            from nemesis.disk.fault import mount
            for node in self.nodes:         # under the data directory, before the broker
                mount(node, directory=self.db.data_dirs(node)[0])
        try:
            self.db.start_all(self.nodes)
        except TimeoutError as e:
            diagnosis = self.backend.diagnose()
            if diagnosis:
                raise TimeoutError(f"{e}\nlikely cause: {diagnosis}") from None
            raise
        return self.db.bootstrap_servers()

    def view(self, topics: list[str], groups: list[str] = ()):
        """What the nemesis acts on."""
        from nemesis.core import Cluster as Target
        return Target(self.nodes, self.db, self.db.bootstrap_servers(), topics,
                      self.config.workload.partitions, list(groups))

    def deaths(self) -> list[tuple[str, str, float]]:
        """Daemons that died unasked since the last call — crashed, or killed
        by someone other than the nemesis, whose kills the DB adapter
        expects: (node, daemon, time.monotonic() seen)."""
        return self.db.deaths() if self.db is not None and self.nodes else []

    def logs(self, name: str) -> str:
        """The text of node name's DB logs as they are now ("" if none)."""
        from cluster.db import LogFiles
        if not isinstance(self.db, LogFiles):
            return ""
        node = next((n for n in self.nodes if n.name == name), None)
        texts = []
        for path in self.db.log_files(node) if node is not None else []:
            try:
                texts.append(node.get(path).decode(errors="replace"))
            except OSError:
                continue
        return "\n".join(texts)

    def teardown(self) -> None:
        """Collect every node's logs into nodes/<name>/, then stop what kchaos
        started and remove what it made (an attached cluster keeps running)."""
        if self.db is not None:
            for node in self.nodes:
                try:
                    self.db.collect(node, self.run_dir / NODES_DIR / node.name)
                except Exception:  # noqa: BLE001 — never lose the teardown to a copy error
                    log.exception("collecting the logs of %s", node.name)
            for node in self.nodes:
                try:
                    self.db.teardown(node)
                except Exception:  # noqa: BLE001
                    log.exception("tearing down %s", node.name)
        if self.backend is not None:
            if self.config.disk_gate():
                from nemesis.disk.fault import unmount_all
                for problem in unmount_all(self.nodes):
                    log.warning("unmounting a disk gate: %s", problem)
            try:
                self.backend.collect_logs(self.run_dir / NODES_DIR)
            except Exception:  # noqa: BLE001
                log.exception("collecting the nodes' own logs")
            self.backend.teardown()
            # The nodes' data: its listing and logs are in nodes/<name>/.
            shutil.rmtree(self.run_dir / SCRATCH, ignore_errors=True)
