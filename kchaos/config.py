"""One run's definition: `TestConfig`, written whole into `test.json`
(docs/architecture.md, conventions), with its parts as nested settings (the
queue workload and its client settings).

Every knob of a run lives here once, with its default and its help text
(settings/__init__.py): the command line (`kchaos run`), config files
(`--config-file test.toml`), the pytest plugin's keyword arguments and
`TestConfig.from_json` are derived from these fields (kchaos/options.py).
`validate` names the field, the value and how to fix it.
"""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass
from pathlib import Path

from checkers.result import ALLOWED_BY_DEFAULT, MAX_EXAMPLES, CheckOptions
from cluster.addressing import DEFAULT_SUBNET
from cluster.kafka.dist import DEFAULT_VERSION as KAFKA_VERSION
from cluster.ssh_options import SshOptions
from settings import setting
from nemesis.core import TARGETS
from nemesis.schedule import DEFAULT_MIX
from nemesis.scripts import DISK_SCRIPTS, SCRIPTS
from workloads.queue_config import QueueConfig

DBS = ("reference", "kafka", "command", "external")
BACKENDS = ("local", "docker", "ssh")


def parse_nodes(text: str) -> int | list[str]:
    """--nodes: a count of nodes kchaos makes, or the hosts (or containers)
    to use, comma-separated."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    return [item.strip() for item in text.split(",") if item.strip()]


@dataclass
class TestConfig:
    __test__ = False    # a run's definition, not a pytest test class
    name: str = setting("queue", "The test's name (the run directory's parent).")
    seed: int = setting(default_factory=lambda: secrets.randbelow(2 ** 31),
                        help="Seed of every random choice (recorded in test.json).",
                        default_text="random")
    time_limit: float = setting(60.0, "Seconds of the main phase.")
    # -- the nodes (cluster/) ------------------------------------------------
    backend: str | None = setting(
        None, "Where nodes come from: local (network namespaces as root, else loopback), "
        "docker (containers kchaos makes, or --docker-containers), ssh (--nodes HOSTS).",
        choices=BACKENDS, default_text="ssh when --nodes names hosts, docker with "
        "--docker-containers, else local")
    nodes: int | list[str] = setting(
        3, "Nodes to make (a count), or the SSH hosts to use (host1,host2,...).",
        metavar="N|HOST,...", parse=parse_nodes)
    controller_node: bool = setting(
        False, "Run the controllers on nodes of their own, after the brokers': the reference "
        "broker's controller on n<N+1> of N brokers, Kafka's quorum of three on n<N+1> to "
        "n<N+3> (with --nodes HOSTS, the last hosts), not beside the brokers: partitions and "
        "kills then take them apart from any broker.")
    use_namespaces: bool | None = setting(
        None, "Loopback addresses even as root (local backend; network faults need "
        "namespaces).", flag="--no-namespaces", flag_value=False,
        default_text="namespaces when root")
    subnet: str = setting(DEFAULT_SUBNET, "Subnet of the nodes' network (local and docker "
                          "backends); runs at the same time on one machine need different "
                          "subnets (it names the namespaces and the docker network too).")
    docker_image: str | None = setting(None, "The docker nodes' image.",
                                       default_text="the project's node image, built when "
                                       "missing")
    docker_containers: list[str] = setting(
        default_factory=list, comma=True, metavar="C1,C2,...",
        help="Running containers to use as the nodes (a cluster that is already running, "
             "e.g. a compose project), instead of containers kchaos makes.")
    ssh: SshOptions = setting(default_factory=SshOptions, prefix="ssh_")
    # -- the system under test (cluster/db.py) -------------------------------
    db: str = setting("reference", "reference: kchaos runs its reference broker on the "
                      "nodes; kafka: Apache Kafka (KRaft) at --kafka-version; command: kchaos "
                      "runs the system --system describes; external: a cluster already "
                      "running at --bootstrap.", choices=DBS)
    kafka_version: str = setting(KAFKA_VERSION, "The Apache Kafka release --db kafka runs (and "
                                 "a system spec with distribution = \"kafka\"): its jars come "
                                 "from Maven Central once, then from the cache.",
                                 metavar="VERSION")
    bootstrap: str | None = setting(None, "The external cluster's bootstrap servers "
                                    "(--db external).", metavar="HOST:PORT[,...]")
    system: str | None = setting(None, "A system spec (TOML) saying how to run a broker on a "
                                 "node (--db command); see examples/systems/.",
                                 metavar="FILE")
    broker_process: str | None = setting(
        None, "pgrep -f pattern of the broker process on each node of an external cluster "
        "(pause and kill faults); {address} and {node_name} are the node's.",
        metavar="PATTERN")
    broker_start: str | None = setting(
        None, "Command (run by sh on the node) that starts an external cluster's broker "
        "again after a kill; {address} and {node_name} are the node's.", metavar="CMD")
    broker_config: list[str] = setting(
        default_factory=list, flag="--config", metavar="KEY=VALUE", multiple=True,
        help="A broker setting (repeatable), e.g. min.insync.replicas=2: the reference "
             "broker's, or a line of Kafka's server.properties (a spec's {config}).")
    bugs: list[str] = setting(default_factory=list, flag="--bug", metavar="NAME",
                              multiple=True, help="A reference broker bug switch "
                              "(repeatable; kchaos broker --list-bugs).")
    # -- the workload (workloads/) -------------------------------------------
    workload: QueueConfig = setting(default_factory=QueueConfig)
    # -- faults (nemesis/): kinds on a seeded schedule, or a named script ----
    nemesis: list[str] = setting(
        default_factory=list, comma=True, metavar="FAULT[,FAULT...]",
        help=f"Faults on a seeded schedule: {', '.join(DEFAULT_MIX)}; power-loss (opt-in: "
             "unsynced writes lost on a majority or on every node at once).",
        default_text="none")
    nemesis_interval: float = setting(10.0, "Mean seconds between fault starts (and a fault's "
                                      "mean duration).", metavar="S")
    fault_targets: list[str] = setting(
        default_factory=lambda: list(TARGETS), comma=True, metavar="TARGET[,TARGET...]",
        help="Which nodes pause, kill, disk and packet-loss faults may hit.")
    nemesis_exclusive: bool = setting(False, "One fault at a time (otherwise faults of "
                                      "different kinds overlap).")
    nemesis_script: str | None = setting(
        None, "A nemesis script (nemesis/scripts/) instead of a schedule: faults timed on "
        "the cluster's state, as the validation recipes drive them.", choices=tuple(SCRIPTS),
        metavar="NAME")
    # -- the end of a run ------------------------------------------------------
    recovery_time: float = setting(5.0, "Seconds between healing and the final reads.")
    final_time_limit: float = setting(60.0, "Seconds the final reads may take.")
    store: Path = setting(Path("store"), "Where run directories go.")
    # -- how the run is judged: written to test.json, so that every later
    # `kchaos check` of the run judges it the same way ------------------------
    allow: list[str] = setting(
        default_factory=list, multiple=True, metavar="TYPE",
        help="An anomaly type expected in this run (repeatable): still counted and shown, "
             "no longer invalid. int-send-skip and resume-rewind are always allowed.")
    max_examples: int = setting(MAX_EXAMPLES,
                                "Cases kept per anomaly type in results.json.", metavar="N")

    # -- derived -------------------------------------------------------------

    def check_options(self) -> CheckOptions:
        """How this run is judged, whenever it is."""
        return CheckOptions(max_examples=self.max_examples,
                            allowed=ALLOWED_BY_DEFAULT | frozenset(self.allow))

    def node_backend(self) -> str:
        if self.backend is not None:
            return self.backend
        if self.docker_containers:
            return "docker"
        return "ssh" if isinstance(self.nodes, list) else "local"

    def system_spec(self):
        """The system spec kchaos runs (--db kafka: the one it ships; --db
        command: --system), None for the other DBs."""
        from cluster.system_spec import load_spec
        if self.db == "kafka":
            from cluster.kafka import spec_path
            return load_spec(spec_path(quorum=self.controller_node))
        return load_spec(self.system) if self.db == "command" else None

    def controller_count(self) -> int:
        """Nodes of their own that run controllers, after the brokers'."""
        if self.db in ("kafka", "command"):
            return self.system_spec().controllers
        return 1 if self.controller_node and self.db == "reference" else 0

    def node_count(self) -> int:
        """The nodes the backend gives: the brokers' and the controllers' own."""
        if self.docker_containers:
            return len(self.docker_containers)
        if isinstance(self.nodes, list):
            return len(self.nodes)
        return self.nodes + self.controller_count()

    def broker_count(self) -> int:
        return self.node_count() - self.controller_count()

    def has_nodes(self) -> bool:
        """Whether kchaos can reach the nodes (to run a DB or hurt one)."""
        return self.db != "external" or bool(self.docker_containers) \
            or isinstance(self.nodes, list)

    def disk_gate(self) -> bool:
        """Whether the brokers' data directories sit on disk gates
        (nemesis/disk): for disk faults, scheduled or scripted."""
        from nemesis.schedule import DISK_KINDS
        if DISK_KINDS & set(self.nemesis):
            return True
        return self.nemesis_script in DISK_SCRIPTS

    # -- files -------------------------------------------------------------------

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["store"] = str(self.store)
        return body

    @classmethod
    def from_json(cls, body: dict) -> "TestConfig":
        """From test.json's `config` or a config file's tables; an unknown
        key is a ValueError naming it."""
        from kchaos.options import build
        return build(cls, _ssh_as_a_part(body))

    @classmethod
    def build(cls, **flat) -> "TestConfig":
        """From flat keyword arguments, as the command line names them
        (`partitions=4`, `acks="1"`): each lands in its part."""
        from kchaos.options import from_flat
        return from_flat(cls, flat)


# test.json's schema_version 1 kept the ssh settings flat, under these
# names; a run recorded then is judged and healed with what it recorded.
_FLAT_SSH = {"ssh_user": "user", "ssh_port": "port", "ssh_key": "key_file",
             "ssh_known_hosts": "known_hosts", "ssh_root": "root_dir",
             "ssh_accept_new_host_keys": "accept_new_host_keys"}


def _ssh_as_a_part(body: dict) -> dict:
    if not isinstance(body, dict) or not _FLAT_SSH.keys() & body.keys():
        return body
    body = dict(body)
    body["ssh"] = {**{_FLAT_SSH[k]: body.pop(k) for k in list(body) if k in _FLAT_SSH},
                   **body.get("ssh", {})}
    return body
