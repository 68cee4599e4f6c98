"""What the client tests share beside the module's broker: a fresh topic
per test, the clients a test made, closed after it, and the library a test
runs with — every one, so each implementation runs the same suite."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from workloads.clients import LIBRARIES

TIMEOUT = 30


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


@pytest.fixture(params=LIBRARIES)
def library(request):
    return request.param
