"""Property tests of the whole suite against a model of a correct run.

A correct run must show nothing; the same run with exactly one mutation must
show exactly the anomaly types that mutation implies (tests/checkers/model.py,
mutations.py).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from checkers.result import CheckOptions
from checkers.suite import check_history
from tests.checkers.conftest import history_of
from tests.checkers.model import runs
from tests.checkers.mutations import MUTATIONS

pytestmark = pytest.mark.spark

# Each example is a suite run (about a second), derandomized: the same
# cases on every machine.
SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow,
                                           HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture])


def check(spark, run):
    history = history_of(spark, run.events())
    try:
        return check_history(history, CheckOptions(max_examples=4))
    finally:
        history.release()


@settings(SETTINGS, max_examples=16)
@given(run=runs())
def test_a_correct_run_shows_nothing(spark, run):
    outcome = check(spark, run)
    assert outcome.result.errors == []
    assert outcome.result.counts == {}, outcome.result.anomalies
    assert outcome.result.unknown == {}
    assert outcome.valid is True


@pytest.mark.parametrize("mutation", MUTATIONS, ids=lambda m: m.__name__)
def test_one_mutation_shows_exactly_its_anomalies(spark, mutation):
    @SETTINGS
    @given(run=runs(), data=st.data())
    def mutated(run, data):
        expected = mutation(run, data.draw)
        assume(expected is not None)
        outcome = check(spark, run)
        assert outcome.result.errors == []
        assert set(outcome.result.counts) == expected, outcome.result.anomalies
    mutated()
