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

Every run writes `report.html` into its run directory; when a test fails,
its output gets a "kchaos runs" section naming each run's directory,
verdict and report, and the report paths are added to the test's
`user_properties` (pytest's --junitxml writes them as properties).
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


RUNS = pytest.StashKey[list]()      # the RunResults of one test, in order


@pytest.fixture
def kchaos(kchaos_spark, tmp_path, request):
    from kchaos.config import TestConfig
    from kchaos.config_checks import validate
    from kchaos.progress import Progress
    from kchaos.run import run_and_check

    def run(*, allowed=(), **options):
        options.setdefault("store", tmp_path / "store")
        # `allowed=` is the plugin's older name for the setting `allow`.
        config = TestConfig.build(**{"allow": sorted(allowed), **options})
        validate(config)
        result = run_and_check(config, kchaos_spark, progress=Progress.quiet())
        request.node.stash.setdefault(RUNS, []).append(result)
        if result.report is not None:
            request.node.user_properties.append(("kchaos_report", str(result.report)))
        return result
    return run


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    runs = item.stash.get(RUNS, [])
    if runs and report.when == "call" and report.failed:
        verdicts = {True: "valid", False: "INVALID"}
        report.sections.append(("kchaos runs", "\n".join(
            f"{r.run_dir}: {verdicts.get(r.valid, r.valid)}"
            + (f"; {', '.join(f'{t} {n}' for t, n in sorted(r.counts.items()))}"
               if r.counts else "")
            + f"\n  report: {r.report or 'none (writing it failed; see the log)'}"
            for r in runs)))
    return report
