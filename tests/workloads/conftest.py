"""What the client tests share: one reference broker per module (topics
are per test; it never creates a topic by itself, so a send to a missing
topic is refused), a fresh topic per test, and the clients a test made,
closed after it."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from cluster.broker_process import BrokerProcess

TIMEOUT = 30


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", config=[
        "group.initial.rebalance.delay.ms=0", "num.partitions=2",
        "auto.create.topics.enable=false"])
    with process:
        yield process


@pytest.fixture
def topic(broker):
    name = f"t-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=2,
                                  replication_factor=1)])[name].result(TIMEOUT)
    return name


@pytest.fixture
def clients():
    """Closes every client a test made."""
    made = []
    yield made
    for client in made:
        client.close()
