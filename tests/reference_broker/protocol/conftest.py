"""What the wire tests share: a scenario run against a broker on the test's
own data dir, on a fresh event loop (`wire.run`: anything the loop or the
broker's error log saw fails the test)."""

from __future__ import annotations

import pytest

from tests.reference_broker.protocol.wire import open_node, run


@pytest.fixture
def run_on_node(tmp_path):
    """run_on_node(scenario, *settings, bugs=..., expected_error=...) runs
    `await scenario(node)` with a node open on tmp_path and returns what it
    returns. Called again, it opens the same data dir: a restart."""
    def run_on_node(scenario, *settings: str, bugs: frozenset[str] = frozenset(),
                    expected_error: str | None = None):
        async def on_open_node():
            async with open_node(tmp_path, *settings, bugs=bugs) as node:
                return await scenario(node)
        return run(on_open_node(), expected_error=expected_error)
    return run_on_node
