"""Apache Kafka as a system under test: its jars from Maven Central
(`dist`), and the system specs `--db kafka` runs (kafka.toml: KRaft
combined mode; kafka-quorum.toml: a controller quorum on nodes of its own),
which are system specs like any other (cluster/system_spec.py)."""

from pathlib import Path


def spec_path(*, quorum: bool = False) -> Path:
    """The spec `--db kafka` runs: combined mode, or (quorum) a quorum of
    three controllers on nodes of their own."""
    return Path(__file__).with_name("kafka-quorum.toml" if quorum else "kafka.toml")
