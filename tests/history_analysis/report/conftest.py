"""A checked run directory with anomalies, shared by the report's tests."""

from __future__ import annotations

import pytest

from checkers.result import CheckOptions
from tests.history_analysis.report.report_runs import anomalous, write_run


@pytest.fixture(scope="session")
def anomalous_run(spark, tmp_path_factory):
    """report_runs.anomalous(), checked by the real suite (results.json),
    no report yet."""
    from kchaos.check import check_run
    run_dir = write_run(tmp_path_factory.mktemp("report") / "anomalous", anomalous())
    check_run(spark, run_dir, CheckOptions())
    return run_dir
