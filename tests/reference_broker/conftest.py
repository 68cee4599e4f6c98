"""A real reference broker process per test, on a free loopback port."""

from __future__ import annotations

import pytest

from cluster.broker_process import BrokerProcess


@pytest.fixture
def broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", config=[
        "group.initial.rebalance.delay.ms=0", "num.partitions=4"], log_level="DEBUG")
    with process:
        yield process
