"""Apache Kafka's shipped system spec for tests on docker nodes and ssh
hosts: the same file `--db kafka` runs, with the JVM options tests/conftest.py
gives every local JVM (C1 only) set in the broker's environment, which
containers and ssh sessions do not inherit. Run it with `--db command
--system`: `--db kafka` is that spec by name (kchaos/config.py), and
tests/kchaos/test_kafka_run.py runs it so."""

from __future__ import annotations

import os
from pathlib import Path

from cluster.kafka import spec_path
from cluster.system_spec import load_spec


def kafka_spec_with_local_jvm_options(directory: Path) -> Path:
    """A copy of the shipped combined-mode spec in directory whose Kafka
    daemon (the file's last table) has this process's JAVA_TOOL_OPTIONS."""
    options = os.environ["JAVA_TOOL_OPTIONS"]
    copy = directory / "kafka-tests.toml"
    copy.write_text(spec_path().read_text()
                    + f'env = {{ JAVA_TOOL_OPTIONS = "{options}" }}\n')
    daemons = load_spec(copy).daemons
    assert [d.env for d in daemons] == [{"JAVA_TOOL_OPTIONS": options}], daemons
    return copy
