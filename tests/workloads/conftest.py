"""What the workload tests share: one reference broker per module (topics
are per test; it never creates a topic by itself, so a send to a missing
topic is refused)."""

from __future__ import annotations

import pytest

from cluster.broker_process import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", config=[
        "group.initial.rebalance.delay.ms=0", "num.partitions=2",
        "auto.create.topics.enable=false"])
    with process:
        yield process
