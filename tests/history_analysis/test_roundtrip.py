"""Generated valid histories pass the reader and ingest to the exact row counts."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from hypothesis import HealthCheck, given, settings

from history_analysis.history import HistoryWriter, validate_history
from history_analysis.ingest import ingest
from tests.history_analysis.history.generated import histories


def write_with_writer(path, model) -> None:
    with HistoryWriter(path) as writer:
        for process, type_, f, value, extra in model.events:
            writer.append(process, type_, f, value, **extra)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(model=histories())
def test_generated_histories_are_valid(tmp_path_factory, model):
    path = tmp_path_factory.mktemp("h") / "history.jsonl"
    write_with_writer(path, model)
    report = validate_history(path)
    assert report.events == len(model.events)
    invoked = sum(1 for e in model.events if e[1] == "invoke")
    assert sum(report.operations.values()) + len(report.unmatched) == invoked


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(model=histories(max_steps=60))
def test_generated_histories_ingest_to_the_rows_they_imply(tmp_path_factory, model):
    run = tmp_path_factory.mktemp("run")
    write_with_writer(run / "history.jsonl", model)
    result = ingest(run)
    assert result.rows == model.expected_rows()
    indexes = pq.read_table(run / "history" / "ops", columns=["op_index"])["op_index"]
    completed = [i for i in indexes.to_pylist()[:result.rows["ops"] - result.unmatched]]
    assert completed == sorted(completed)
    assert json.loads((run / "history" / "_ingest.json").read_text())["events"] == len(
        model.events)
