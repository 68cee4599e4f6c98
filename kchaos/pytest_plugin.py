"""kchaos as a pytest plugin: chaos suites written as pytest tests.

    def test_no_lost_writes(kchaos):
        result = kchaos(time_limit=30, partitions=4, broker_config=["min.insync.replicas=2"])
        assert result.valid is True, result.counts

The `kchaos` fixture runs a `TestConfig` built from its keyword arguments
(every setting of kchaos.config.TestConfig and its parts, by the
flat names `kchaos run` uses; `allowed` names anomaly types
expected in the run) and returns a `RunResult`: `valid` (True, False or
"unknown"), `counts` and `anomalies` by type, and the `run_dir` to inspect.
Run directories go under pytest's temporary directory unless `store=` is
given. Registered through the `pytest11` entry point, so installing kchaos
is enough; `examples/test_chaos_suite.py` is a suite to copy.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def kchaos_spark(tmp_path_factory):
    """The Spark session the checks run on: one per test session, started in
    the background during the first run's setup (kchaos/session.py).
    Override this fixture to use another master or settings."""
    from kchaos.session import BackgroundSession
    session = BackgroundSession(master="local[2]",
                                scratch_dir=tmp_path_factory.mktemp("kchaos-spark"))
    yield session
    session.stop()


@pytest.fixture
def kchaos(kchaos_spark, tmp_path):
    from kchaos.config import TestConfig
    from kchaos.progress import Progress
    from kchaos.run import run_and_check

    def run(*, allowed=(), **options):
        options.setdefault("store", tmp_path / "store")
        config = TestConfig.build(**options)
        config.validate()
        return run_and_check(config, kchaos_spark, allowed=frozenset(allowed),
                             progress=Progress.quiet())
    return run
