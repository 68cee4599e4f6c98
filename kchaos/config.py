"""One run's definition: a single dataclass, built from CLI flags or Python,
written whole into `test.json` (ARCHITECTURE.md's conventions).

Every knob of a run lives here with its default — the cluster, the
workload, the client settings, the phases' durations and the seed — so a
run directory says exactly what was run and `TestConfig.from_json` can run
it again. `validate` names the field, the value and how to fix it.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
from dataclasses import dataclass, field
from pathlib import Path

from nemesis.core import TARGETS
from workloads.clients import LIBRARIES, ClientSettings

DBS = ("reference", "external")
CONSUMER_MODES = ("assign", "subscribe", "mixed")


@dataclass
class TestConfig:
    __test__ = False    # a run's definition, not a pytest test class
    name: str = "queue"
    seed: int = field(default_factory=lambda: secrets.randbelow(2 ** 31))
    time_limit: float = 60.0            # seconds of the main phase
    # The cluster.
    db: str = "reference"               # reference | external
    nodes: int = 3                      # reference brokers (one local node each)
    bootstrap: str | None = None        # the external cluster's bootstrap servers
    use_namespaces: bool | None = None  # None: when root; False: loopback addresses
    subnet: str = "198.18.0.0/24"
    broker_config: list[str] = field(default_factory=list)   # --config KEY=VALUE per broker
    bugs: list[str] = field(default_factory=list)            # reference broker bug switches
    # The queue workload.
    client: str = "confluent-kafka"
    topics: int = 1
    partitions: int = 4
    replication_factor: int = 3
    concurrency: int = 6                # worker threads: about half producers, half consumers
    rate: float = 200.0                 # operations per second, all workers together
    records_per_send: int = 1           # values per send operation, to one partition
    consumer_mode: str = "mixed"        # assign | subscribe | mixed
    groups: int = 1                     # consumer groups of the subscribe-mode consumers
    crash_clients_every: float | None = None   # mean seconds between client crashes per worker
    stall_consumers_every: float | None = None  # mean seconds between slow-processing stalls
    client_settings: ClientSettings = field(default_factory=ClientSettings)
    # Faults (nemesis/): kinds on a seeded schedule, or a named script.
    nemesis: list[str] = field(default_factory=list)      # partition, pause, kill, disk, ...
    nemesis_interval: float = 10.0      # mean seconds between fault starts
    fault_targets: list[str] = field(default_factory=lambda: list(TARGETS))
    nemesis_exclusive: bool = False     # one fault at a time
    nemesis_script: str | None = None   # a recipe's script (kchaos/recipes/) instead
    # The end of a run.
    recovery_time: float = 5.0          # seconds between healing and the final reads
    final_time_limit: float = 60.0      # seconds the final reads may take
    store: Path = Path("store")

    def topic_names(self) -> list[str]:
        return [f"kchaos-t{n}" for n in range(self.topics)]

    def group_names(self) -> list[str]:
        return [f"kchaos-g{n}" for n in range(self.groups)]

    def disk_gate(self) -> bool:
        """Whether the brokers' data directories sit on disk gates
        (nemesis/disk): for disk faults, scheduled or scripted."""
        if "disk" in self.nemesis:
            return True
        from kchaos.recipes import DISK_SCRIPTS
        return self.nemesis_script in DISK_SCRIPTS

    def validate(self) -> None:
        def bad(name: str, why: str) -> None:
            raise ValueError(f"{name}={getattr(self, name)!r}: {why}")
        if self.db not in DBS:
            bad("db", f"choose one of {', '.join(DBS)}")
        if self.db == "external" and not self.bootstrap:
            bad("bootstrap", "--db external needs --bootstrap HOST:PORT[,HOST:PORT...]")
        if self.db == "reference" and self.bootstrap:
            bad("bootstrap", "kchaos starts the reference cluster itself; "
                "use --db external to test a cluster at --bootstrap")
        if self.client not in LIBRARIES:
            bad("client", f"choose one of {', '.join(LIBRARIES)}")
        if self.consumer_mode not in CONSUMER_MODES:
            bad("consumer_mode", f"choose one of {', '.join(CONSUMER_MODES)}")
        for name in ("nodes", "topics", "partitions", "replication_factor", "groups",
                     "records_per_send"):
            if getattr(self, name) < 1:
                bad(name, "must be at least 1")
        if self.concurrency < 2:
            bad("concurrency", "must be at least 2: a producer and a consumer")
        if self.db == "reference" and self.replication_factor > self.nodes:
            bad("replication_factor", f"more than the {self.nodes} nodes; lower it or "
                "raise --nodes")
        for name in ("time_limit", "rate", "final_time_limit"):
            if not getattr(self, name) > 0:
                bad(name, "must be positive")
        if self.recovery_time < 0:
            bad("recovery_time", "must not be negative")
        for name in ("crash_clients_every", "stall_consumers_every"):
            if getattr(self, name) is not None and not getattr(self, name) > 0:
                bad(name, "must be positive seconds (or left out: never)")
        self._validate_nemesis(bad)

    def _validate_nemesis(self, bad) -> None:
        from nemesis.schedule import check
        check(self.nemesis, self.fault_targets, self.nemesis_interval)
        if self.nemesis and self.nemesis_script:
            bad("nemesis_script", "a script replaces the --nemesis schedule; pass one of them")
        if self.nemesis_script is not None:
            from kchaos.recipes import SCRIPTS
            if self.nemesis_script not in SCRIPTS:
                bad("nemesis_script", f"choose one of {', '.join(sorted(SCRIPTS))}")
        if self.nemesis and self.db == "external":
            bad("nemesis", "kchaos cannot hurt a cluster it does not run; drop --nemesis "
                "or use --db reference")
        network = {"partition", "packet-loss"} & set(self.nemesis)
        if network and (self.use_namespaces is False or
                        (self.use_namespaces is None and os.geteuid() != 0)):
            bad("nemesis", f"{', '.join(sorted(network))} need each node in a network "
                "namespace of its own: run as root, without --no-namespaces")
        if self.disk_gate() and os.geteuid() != 0:
            bad("nemesis", "disk faults mount a FUSE filesystem under each node: run as root")

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["store"] = str(self.store)
        return body

    @classmethod
    def from_json(cls, body: dict) -> "TestConfig":
        body = dict(body)
        body["client_settings"] = ClientSettings(**body.get("client_settings", {}))
        body["store"] = Path(body.get("store", "store"))
        return cls(**body)
