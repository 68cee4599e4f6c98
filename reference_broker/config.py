"""The broker's configuration: where it listens, where its data lives, and
the Kafka settings it honours.

Only settings that change behaviour are accepted; an unknown or malformed
`--config key=value` is an error that names it (a switch that is accepted
but ignored would make a test lie about what it tested). Names and defaults
are Kafka's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

LONG_MAX = 2 ** 63 - 1


def _bool(text: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError("expected true or false")
    return text.lower() == "true"


def _optional_int(text: str) -> int | None:
    value = int(text)
    return None if value >= LONG_MAX else value  # Long.MAX_VALUE: never


class Setting(NamedTuple):
    parse: Callable[[str], Any]
    default: Any
    type: str       # Kafka's ConfigDef type, which DescribeConfigs reports


SETTINGS = {
    "auto.create.topics.enable": Setting(_bool, True, "boolean"),
    "num.partitions": Setting(int, 1, "int"),
    "default.replication.factor": Setting(int, 1, "int"),
    "message.max.bytes": Setting(int, 1048588, "int"),
    "socket.request.max.bytes": Setting(int, 104857600, "int"),
    "log.segment.bytes": Setting(int, 1 << 30, "int"),
    "log.index.interval.bytes": Setting(int, 4096, "int"),
    "log.flush.interval.messages": Setting(_optional_int, None, "long"),
    "log.flush.interval.ms": Setting(_optional_int, None, "long"),
    "offsets.topic.num.partitions": Setting(int, 50, "int"),
    "group.initial.rebalance.delay.ms": Setting(int, 3000, "int"),
    "group.min.session.timeout.ms": Setting(int, 6000, "int"),
    "group.max.session.timeout.ms": Setting(int, 1800000, "int"),
    # capped by the brokers registered
    "offsets.topic.replication.factor": Setting(int, 3, "short"),
    "offsets.commit.timeout.ms": Setting(int, 5000, "int"),
    "offsets.load.buffer.size": Setting(int, 5242880, "int"),
    "min.insync.replicas": Setting(int, 1, "int"),
    "unclean.leader.election.enable": Setting(_bool, False, "boolean"),
    "replica.lag.time.max.ms": Setting(int, 30000, "long"),
    "replica.fetch.wait.max.ms": Setting(int, 500, "int"),
    "replica.fetch.max.bytes": Setting(int, 1048576, "int"),
    "replica.high.watermark.checkpoint.interval.ms": Setting(int, 5000, "long"),
    "broker.session.timeout.ms": Setting(int, 9000, "int"),
    "broker.heartbeat.interval.ms": Setting(int, 2000, "int"),
    "request.timeout.ms": Setting(int, 30000, "int"),
    # The transaction coordinator's topic and rules (KIP-98, KIP-890).
    "transaction.state.log.num.partitions": Setting(int, 50, "int"),
    # capped by the brokers registered, as offsets.topic.replication.factor
    "transaction.state.log.replication.factor": Setting(int, 3, "short"),
    "transaction.state.log.min.isr": Setting(int, 2, "int"),
    "transaction.max.timeout.ms": Setting(int, 900000, "int"),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": Setting(int, 10000, "int"),
    "transaction.partition.verification.enable": Setting(_bool, True, "boolean"),
}


def kafka_text(value) -> str:
    """A setting's value as Kafka prints it (DescribeConfigs): booleans in
    lower case, "never" (None) as Long.MAX_VALUE."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(LONG_MAX if value is None else value)


def parse_settings(pairs: list[str]) -> dict:
    """`["key=value", ...]` → {key: parsed value} over the defaults."""
    settings = {key: setting.default for key, setting in SETTINGS.items()}
    for pair in pairs:
        key, sep, text = pair.partition("=")
        if not sep:
            raise ValueError(f"--config {pair!r}: expected KEY=VALUE, e.g. num.partitions=4")
        if key not in SETTINGS:
            raise ValueError(f"--config {pair!r}: unknown setting {key!r}; known: "
                             + ", ".join(sorted(SETTINGS)))
        try:
            settings[key] = SETTINGS[key].parse(text)
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
