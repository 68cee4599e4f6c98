"""The broker's configuration: where it listens, where its data lives, and
the Kafka settings it honours.

Only settings that change behaviour are accepted; an unknown or malformed
`--config key=value` is an error that names it (a switch that is accepted
but ignored would make a test lie about what it tested). Names and defaults
are Kafka's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return text.lower() == "true"


def _optional_int(text: str) -> int | None:
    value = int(text)
    return None if value >= 2 ** 63 - 1 else value  # Long.MAX_VALUE: never


# key -> (parser, default)
SETTINGS = {
    "auto.create.topics.enable": (_bool, True),
    "num.partitions": (int, 1),
    "default.replication.factor": (int, 1),
    "message.max.bytes": (int, 1048588),
    "socket.request.max.bytes": (int, 104857600),
    "log.segment.bytes": (int, 1 << 30),
    "log.index.interval.bytes": (int, 4096),
    "log.flush.interval.messages": (_optional_int, None),
    "log.flush.interval.ms": (_optional_int, None),
    "offsets.topic.num.partitions": (int, 50),
    "group.initial.rebalance.delay.ms": (int, 3000),
    "group.min.session.timeout.ms": (int, 6000),
    "group.max.session.timeout.ms": (int, 1800000),
    "offsets.topic.replication.factor": (int, 3),   # capped by the brokers registered
    "offsets.commit.timeout.ms": (int, 5000),
    "offsets.load.buffer.size": (int, 5242880),
    "min.insync.replicas": (int, 1),
    "unclean.leader.election.enable": (_bool, False),
    "replica.lag.time.max.ms": (int, 30000),
    "replica.fetch.wait.max.ms": (int, 500),
    "replica.fetch.max.bytes": (int, 1048576),
    "replica.high.watermark.checkpoint.interval.ms": (int, 5000),
    "broker.session.timeout.ms": (int, 9000),
    "broker.heartbeat.interval.ms": (int, 2000),
}


def parse_settings(pairs: list[str]) -> dict:
    """`["key=value", ...]` → {key: parsed value} over the defaults."""
    settings = {key: default for key, (_, default) in SETTINGS.items()}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ValueError(f"--config {pair!r}: expected KEY=VALUE, e.g. num.partitions=4")
        if key not in SETTINGS:
            raise ValueError(f"--config {pair!r}: unknown setting {key!r}; known: "
                             + ", ".join(sorted(SETTINGS)))
        try:
            settings[key] = SETTINGS[key][0](text)
        except ValueError as e:
            raise ValueError(f"--config {pair!r}: bad value {text!r} ({e})") from None
    return settings


def parse_address(text: str, option: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise ValueError(f"{option} {text!r}: expected HOST:PORT, e.g. 127.0.0.1:9092")
    return host.strip("[]") or "0.0.0.0", int(port)


@dataclass(frozen=True)
class BrokerConfig:
    node_id: int
    listen: tuple[str, int]
    advertise: tuple[str, int]
    data_dir: Path
    settings: dict = field(default_factory=lambda: parse_settings([]))
    bugs: frozenset[str] = frozenset()  # bug switches (bugs.py), validated by parse_bugs
    # KRaft's process.roles: a broker, a controller, or both in one process.
    process_roles: frozenset[str] = frozenset({"broker", "controller"})
    controller: tuple[str, int] | None = None   # where a broker-only node's controller is

    def __post_init__(self) -> None:
        unknown = set(self.process_roles) - {"broker", "controller"}
        if unknown or not self.process_roles:
            raise ValueError(f"--process-roles {','.join(sorted(self.process_roles))!r}: "
                             "expected broker, controller or broker,controller")
        if "controller" in self.process_roles and self.controller is not None:
            raise ValueError("--controller names another node's controller, but this node "
                             "has the controller role: drop one of them")
        if "controller" not in self.process_roles and self.controller is None:
            raise ValueError("a broker-only node needs --controller HOST:PORT")

    def __getitem__(self, key: str):
        return self.settings[key]
