"""The commands that judge recorded runs: `kchaos validate-history`,
`kchaos ingest` and `kchaos check`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from checkers.result import MAX_EXAMPLES
from cli.common import (EXIT_BAD_INPUT, EXIT_INVALID, EXIT_UNKNOWN, RUN_DIR, BadInput,
                        junit_option, print_counts, report, scratch_dir, spark_options,
                        start_spark, verdict_line)


@click.command("validate-history")
@click.argument("run_dir", type=RUN_DIR)
def validate_history_command(run_dir: Path) -> None:
    """Check RUN_DIR/history.jsonl against the history contract (docs/history.md).

    Prints a summary and exits 0 if the history is valid; otherwise prints the
    file, line, field and what was expected, and exits 3.
    """
    from history_analysis.history import HistoryError, validate_history
    from history_analysis.ingest import HISTORY_FILE
    path = run_dir / HISTORY_FILE
    if not path.is_file():
        raise BadInput(f"{run_dir}: no {HISTORY_FILE} in this run directory")
    try:
        report = validate_history(path)
    except HistoryError as e:
        raise BadInput(str(e)) from None
    click.echo(report.summary())


@click.command("ingest")
@click.argument("run_dirs", nargs=-1, required=True, type=RUN_DIR, metavar="RUN_DIR...")
def ingest_command(run_dirs: tuple[Path, ...]) -> None:
    """Turn RUN_DIR/history.jsonl into the Parquet tables of RUN_DIR/history/.

    Validates the history as it goes (nothing is written if a rule is
    broken); re-running replaces the tables whole. Needs no Spark.
    """
    from history_analysis.history import HistoryError
    from history_analysis.ingest import IngestError, ingest
    for run_dir in run_dirs:
        try:
            click.echo(ingest(run_dir).summary())
        except (HistoryError, IngestError) as e:
            raise BadInput(str(e)) from None


@click.command("check")
@click.argument("run_dirs", nargs=-1, required=True, type=RUN_DIR, metavar="RUN_DIR...")
@click.option("--allow", "allow", multiple=True, metavar="TYPE",
              help="An anomaly type expected in this run (repeatable), besides those the "
                   "run itself allowed (its test.json): still counted and shown, no longer "
                   "invalid. int-send-skip and resume-rewind are always allowed.")
@click.option("--max-examples", type=click.IntRange(min=0), default=None,
              help="Cases kept per anomaly type in results.json.  [default: the run's own "
                   f"setting, else {MAX_EXAMPLES}]")
@junit_option
@spark_options
def check_command(run_dirs: tuple[Path, ...], allow: tuple[str, ...], max_examples: int | None,
                  junit: Path | None, spark_master: str | None,
                  spark_conf: tuple[str, ...]) -> None:
    """Check the histories of RUN_DIR... for anomalies (docs/anomalies.md).

    Ingests a run directory whose tables are missing or older than its
    history.jsonl, writes RUN_DIR/results.json, prints a verdict per run and a
    table of anomaly counts. Exit code: 0 all valid, 1 any invalid, 2 any
    unknown (none invalid), 3 bad input or internal error.
    """
    from checkers.result import ANOMALY_TYPES, UNKNOWN, CheckOptions
    from history_analysis.history import HistoryError
    from history_analysis.ingest import IngestError
    from history_analysis.tables import TableError
    from kchaos.check import check_run, prepare_run, recorded_options

    unknown_types = [t for t in allow if t not in ANOMALY_TYPES]
    if unknown_types:
        raise BadInput(f"--allow {unknown_types[0]!r}: not an anomaly type; choose from "
                       + ", ".join(ANOMALY_TYPES))

    def options(run_dir: Path) -> CheckOptions:
        """The run's own (test.json's config), with this command's added."""
        own = recorded_options(run_dir)
        return CheckOptions(max_examples=own.max_examples if max_examples is None
                            else max_examples, allowed=own.allowed | frozenset(allow))
    from kchaos.junit import Case, case_of, write_junit
    verdicts, counts, cases = [], {}, []

    def bad(run_dir: Path, started: float, e: Exception) -> None:
        click.echo(f"kchaos: error: {e}", err=True)
        verdicts.append(None)
        cases.append(Case(run_dir, time.monotonic() - started, None, error=str(e)))

    # What needs no Spark first: input that can never be checked is told at
    # once, and no JVM starts (half a minute) when none can be.
    ready = []
    for run_dir in run_dirs:
        started = time.monotonic()
        try:
            ready.append(prepare_run(run_dir))
        except (HistoryError, IngestError) as e:
            bad(run_dir, started, e)
    spark = start_spark(spark_master, spark_conf, scratch_dir(run_dirs)) if ready else None
    for run_dir in ready:
        started = time.monotonic()
        try:
            suite = check_run(spark, run_dir, options(run_dir))
        except (HistoryError, IngestError, TableError) as e:
            bad(run_dir, started, e)
            continue
        verdicts.append(suite.valid)
        counts[run_dir] = suite.result.counts
        click.echo(f"{run_dir}: {verdict_line(suite)}")
        report(run_dir)
        cases.append(case_of(run_dir, time.monotonic() - started, suite, verdict_line(suite)))
    print_counts(counts)
    if junit is not None:
        write_junit(junit, cases)
    if None in verdicts:
        sys.exit(EXIT_BAD_INPUT)
    if False in verdicts:
        sys.exit(EXIT_INVALID)
    if UNKNOWN in verdicts:
        sys.exit(EXIT_UNKNOWN)
