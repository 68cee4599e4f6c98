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


def pytest_addoption(parser):
    parser.addoption("--full-matrix", action="store_true",
                     help="also run the whole validation matrix (every bug switch's "
                          "recipe; over an hour) — make validate runs it as kchaos validate")


@pytest.fixture
def full_matrix(request) -> None:
    if not request.config.getoption("--full-matrix"):
        pytest.skip("the full validation matrix runs with --full-matrix (or make validate)")
