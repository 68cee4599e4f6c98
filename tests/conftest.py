"""Shared fixtures: one Spark session for the whole test run."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    from history_analysis.spark import spark_session
    session = spark_session(master="local[2]", conf={"spark.driver.memory": "2g"},
                            scratch_dir=tmp_path_factory.mktemp("spark-scratch"))
    yield session
    session.stop()


# End-to-end tests on the default subnet (198.18.0.0/24, namespaces
# `kchaos-n*`): under pytest-xdist (`make test`: -n 2 --dist loadgroup) they
# all run on one worker, one after another, since a run's setup removes what
# exists under its prefix. Tests with subnets of their own run anywhere.
DEFAULT_SUBNET_MODULES = ("test_run.py", "test_nemesis_run.py", "test_heal.py",
                          "test_validate.py", "test_verdict.py")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.parent.name == "kchaos" and item.path.name in DEFAULT_SUBNET_MODULES:
            item.add_marker(pytest.mark.xdist_group("default-subnet"))


def pytest_addoption(parser):
    parser.addoption("--full-matrix", action="store_true",
                     help="also run the whole validation matrix (every bug switch's "
                          "recipe; over an hour) — make validate runs it as kchaos validate")


@pytest.fixture
def full_matrix(request) -> None:
    if not request.config.getoption("--full-matrix"):
        pytest.skip("the full validation matrix runs with --full-matrix (or make validate)")
