"""Clients of the library under test, made on the module's broker and
handed to the `clients` fixture, which closes them after the test."""

from __future__ import annotations

import uuid

from workloads.clients import ClientSettings, make_consumer, make_producer

TIMEOUT = 30  # s: the bound of every wait
SETTINGS = ClientSettings()


def producer(library, broker, clients, settings=SETTINGS):
    client = make_producer(library, broker.bootstrap, settings, f"p-{uuid.uuid4().hex[:6]}")
    clients.append(client)
    return client


def consumer(library, broker, clients, group=None, settings=SETTINGS):
    client = make_consumer(library, broker.bootstrap, settings,
                           f"c-{uuid.uuid4().hex[:6]}", group)
    clients.append(client)
    return client
