"""The kchaos command line, run as a user runs it: a subprocess — or, for
checks beyond the first, in this process (`kchaos_here`), where the test
session's Spark session stands in for the JVM each subprocess would start."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kchaos import __version__
from tests.cli_support import kchaos, kchaos_here

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "queue-sample"


def copy_example(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    run.mkdir()
    for name in ("history.jsonl", "test.json"):
        shutil.copy(EXAMPLE / name, run / name)
    return run


def test_version():
    result = kchaos("--version")
    assert (result.returncode, result.stdout.strip()) == (0, f"kchaos {__version__}")


def test_every_option_has_help():
    for command in ("validate-history", "ingest", "check", "run"):
        result = kchaos(command, "--help")
        assert result.returncode == 0
        for line in result.stdout.splitlines():
            if line.strip().startswith("--"):
                assert len(line.split(None, 1)) == 2 or "KEY=VALUE" in line, line


def test_validate_history_of_the_example():
    result = kchaos("validate-history", str(EXAMPLE))
    assert result.returncode == 0, result.stderr
    assert "valid history, 40 events, 20 completed operations" in result.stdout


@pytest.mark.parametrize("command", [
    "validate-history", "ingest", pytest.param("check", marks=pytest.mark.spark)])
def test_a_malformed_history_is_one_line_of_error_and_exit_3(tmp_path, command):
    run = copy_example(tmp_path)
    lines = (run / "history.jsonl").read_text().splitlines(keepends=True)
    event = json.loads(lines[6])
    event["value"]["sends"][0]["partition"] = "zero"
    lines[6] = json.dumps(event) + "\n"
    (run / "history.jsonl").write_text("".join(lines))
    result = kchaos(command, str(run))
    assert result.returncode == 3
    errors = [line for line in result.stderr.splitlines() if "kchaos:" in line]
    assert errors == [f"kchaos: error: {run}/history.jsonl:7: field "
                      "'value.sends[0].partition': expected a partition number "
                      "(0 to 2147483647), got 'zero'"]
    assert "Traceback" not in result.stderr


def test_missing_run_directory_and_bad_usage_exit_3(tmp_path):
    result = kchaos("validate-history", str(tmp_path / "nowhere"))
    assert result.returncode == 3
    assert "no history.jsonl in this run directory" in result.stderr
    assert kchaos("no-such-command").returncode == 3
    assert kchaos("ingest").returncode == 3


def test_bad_spark_conf_is_bad_input(tmp_path):
    result = kchaos("check", "--spark-conf", "novalue", str(copy_example(tmp_path)))
    assert result.returncode == 3
    assert "--spark-conf 'novalue': expected KEY=VALUE" in result.stderr


def test_ingest_the_example(tmp_path):
    run = copy_example(tmp_path)
    result = kchaos("ingest", str(run))
    assert result.returncode == 0, result.stderr
    assert "ingested 40 events → ops 20, sends 14, reads 20" in result.stdout
    manifest = json.loads((run / "history" / "_ingest.json").read_text())
    assert manifest["rows"]["end_offsets"] == 2
    assert not (run / ".spark").exists()  # ingest needs no Spark


def write_run(run: Path, ops) -> Path:
    """A run directory of ops, with the outcome of a run that went as planned."""
    from tests.checkers.conftest import write_events
    from tests.history_analysis.report.report_runs import CLEAN_OUTCOME
    write_events(run, ops.events)
    (run / "test.json").write_text(json.dumps({"outcome": CLEAN_OUTCOME}))
    return run


def three_runs(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A valid run (the example), one with a lost write, one undecided."""
    from tests.checkers.conftest import Ops

    valid = copy_example(tmp_path)
    invalid = write_run(tmp_path / "lost", Ops().send(0, "t", 0, 10, offsets=[0])
                        .send(0, "t", 0, 11, offsets=[1]).poll(1, ("t", 0, 1, 11)))
    undecided = write_run(tmp_path / "unseen", Ops().send(0, "t", 0, 10, offsets=[0]))
    return valid, invalid, undecided


@pytest.mark.spark
def test_check_exit_codes_and_summary(spark, tmp_path):
    valid, invalid, undecided = three_runs(tmp_path)

    result = kchaos("check", str(valid), "--spark-master", "local[2]")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"{valid}: valid")
    assert json.loads((valid / "results.json").read_text())["valid"] is True

    result = kchaos_here("check", str(valid), str(invalid), str(undecided), "--max-examples", "1")
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == f"{valid}: valid"
    assert lines[1] == f"report: {valid / 'report.html'}"
    assert lines[2].startswith(f"{invalid}: INVALID; lost-write 1")
    assert lines[3] == f"report: {invalid / 'report.html'}"
    assert lines[4].startswith(f"{undecided}: unknown; nothing-read-back: none of the 1 "
                               "acknowledged record(s) was read; unseen undecided: 1")
    assert any(line.split() == ["lost-write", "0", "1", "0"] for line in lines)

    result = kchaos_here("check", str(undecided))
    assert result.returncode == 2
    assert json.loads((undecided / "results.json").read_text())["valid"] == "unknown"

    result = kchaos_here("check", str(invalid), "--allow", "lost-write")
    assert result.returncode == 0, result.stdout
    written = json.loads((invalid / "results.json").read_text())
    assert written["valid"] is True and written["counts"] == {"lost-write": 1}


@pytest.mark.spark
def test_check_bad_input_exits_3(spark, tmp_path):
    from tests.checkers.conftest import Ops

    # Judged before any JVM starts: a master Spark cannot start with is
    # never tried (before, this said only that Spark's gateway exited).
    result = kchaos("check", str(tmp_path / "missing"), "--spark-master", "nonsense")
    assert result.returncode == 3, result.stderr
    assert result.stderr.splitlines() == [f"kchaos: error: {tmp_path / 'missing'}: "
                                          "no such run directory"]

    result = kchaos("check", str(tmp_path), "--allow", "lost-writes")
    assert result.returncode == 3 and "--allow 'lost-writes': not an anomaly type" in result.stderr

    empty = tmp_path / "empty"
    empty.mkdir()
    result = kchaos_here("check", str(empty))
    assert result.returncode == 3 and "neither history.jsonl nor history/" in result.stderr

    run = write_run(tmp_path / "run", Ops().send(0, "t", 0, 10, offsets=[0]))
    assert kchaos("ingest", str(run)).returncode == 0
    (run / "history.jsonl").unlink()  # tables only, as another tool may leave them
    shutil.rmtree(run / "history" / "commits")
    result = kchaos_here("check", str(run))
    assert result.returncode == 3
    assert "table 'commits' is missing" in result.stderr

    spark.createDataFrame([(1, "x")], "op_index long, process string") \
        .write.parquet(str(run / "history" / "commits"))
    result = kchaos_here("check", str(run))
    assert result.returncode == 3
    assert "table 'commits' lacks columns invoke_index, invoke_time, time, type, phase, " \
        "group, topic" in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("args, message", [
    (["--db", "external"], "--db external needs --bootstrap"),
    (["--bootstrap", "127.0.0.1:9092"], "use --db external to test a cluster at --bootstrap"),
    (["--replication-factor", "5"], "replication_factor=5: more than the 3 brokers"),
    (["--concurrency", "1"], "concurrency=1: must be at least 2"),
    (["--consumer-mode", "both"], "Invalid value for '--consumer-mode'"),
    (["--allow", "nonsense"], "allow=['nonsense']: 'nonsense' is not an anomaly type"),
    (["--records-per-send", "0"], "records_per_send=0: must be at least 1"),
    (["--stall-consumers-every", "0"], "stall_consumers_every=0.0: must be positive seconds"),
    (["--end-offsets-every", "-1"], "end_offsets_every=-1.0: must be positive seconds"),
    (["--transaction-stall-probability", "0.1"],
     "transaction_stall_probability=0.1: needs --transactions"),
    (["--pipeline"], "pipeline=True: needs --transactions"),
    (["--transactions", "--pipeline", "--client", "java"],
     "client='java': java does not commit offsets in transactions here yet"),
    (["--batch-size", "0"], "batch_size=0: must be at least 1 byte"),
    (["--max-in-flight", "6"], "idempotence=True conflicts with max_in_flight=6"),
    (["--auto-offset-reset", "none"], "Invalid value for '--auto-offset-reset'"),
    (["--no-check", "--junit", "j.xml"], "--junit writes a verdict, which --no-check does not"),
    (["--nemesis", "partition,kill", "--time-limit", "10"],
     "partition,kill asked for, but no fault starts within --time-limit 10 s"),
    (["--bug", "no-such-bug"], "--bug 'no-such-bug': no such bug switch"),
    (["--config", "log.retention.ms=1"], "unknown setting 'log.retention.ms'"),
    (["--nemesis-script", "no-such-script"], "Invalid value for '--nemesis-script'"),
])
def test_run_refuses_bad_options_before_starting_anything(tmp_path, args, message):
    result = kchaos("run", "--store", str(tmp_path / "store"), *args, timeout=60)
    assert result.returncode == 3, result.stderr
    assert message in result.stderr
    assert not (tmp_path / "store").exists()


@pytest.mark.spark
@pytest.mark.root
def test_a_run_not_checked_says_so_starts_no_spark_and_is_judged_later(spark, tmp_path):
    """--no-check: a master Spark cannot start with is never tried, the run
    is not judged (exit 2, as unknown), and kchaos check judges it after."""
    result = kchaos("run", "--no-check", "--spark-master", "nonsense", "--time-limit", "3",
                    "--recovery-time", "0", "--subnet", "198.18.8.0/24",
                    "--store", str(tmp_path), timeout=180)
    assert result.returncode == 2, result.stdout + result.stderr
    run_dir = next((tmp_path / "queue").iterdir())
    assert f"{run_dir}: not checked; kchaos check {run_dir} judges it" in result.stdout
    assert "gateway" not in result.stderr and not (run_dir / "results.json").exists()
    judged = kchaos_here("check", str(run_dir))
    assert judged.returncode == 0 and judged.stdout.startswith(f"{run_dir}: valid"), judged


@pytest.mark.spark
def test_check_writes_junit_a_case_per_run(spark, tmp_path):
    import xml.etree.ElementTree as ET

    valid, invalid, undecided = three_runs(tmp_path)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "history.jsonl").write_text('{"index": 0, "type": "<script>"}\n')
    junit = tmp_path / "out" / "kchaos.xml"
    result = kchaos_here("check", str(valid), str(invalid), str(undecided), str(broken),
                         "--junit", str(junit))
    assert result.returncode == 3, result.stderr
    suite = ET.parse(junit).getroot().find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("4", "1", "2")
    cases = {Path(c.get("name")).name: c for c in suite.findall("testcase")}
    assert list(cases["run"]) == []                      # valid: no child, a pass
    failure = cases["lost"].find("failure")
    assert failure.get("type") == "invalid" and failure.get("message").startswith(
        "INVALID; lost-write 1")
    assert "lost-write: 1" in failure.text and "first lost-write:" in failure.text
    assert cases["unseen"].find("error").get("type") == "unknown"
    error = cases["broken"].find("error")
    assert error.get("type") == "bad-input" and "field 'time'" in error.get("message")
    assert float(suite.get("time")) > 0
    assert all(c.get("classname").startswith("kchaos.") for c in cases.values())


def test_junit_escapes_what_comes_from_the_history(tmp_path):
    import xml.etree.ElementTree as ET

    from kchaos.junit import Case, write_junit

    hostile = '<script>alert("x")</script> & ]]> \u00e9'
    path = tmp_path / "kchaos.xml"
    write_junit(path, [Case(tmp_path / "run", 1.5, False, f"INVALID; {hostile}",
                            {"lost-write": 1}, {"lost-write": [{"error": hostile}]})])
    assert "<script>" not in path.read_text()
    failure = ET.parse(path).getroot().find("testsuite/testcase/failure")
    assert failure.get("message") == f"INVALID; {hostile}"
    assert json.dumps(hostile)[1:-1] in failure.text
