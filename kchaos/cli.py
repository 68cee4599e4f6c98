"""The `kchaos` command line. Each command exposes only what works.

Exit codes: 0 success, 3 bad input or an internal error, with one line on
stderr saying what and where.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from kchaos import __version__

EXIT_OK, EXIT_BAD_INPUT = 0, 3


class BadInput(click.ClickException):
    exit_code = EXIT_BAD_INPUT

    def show(self, file=None) -> None:
        click.echo(f"kchaos: error: {self.format_message()}", err=True, file=file)


def spark_options(command):
    """--spark-master and --spark-conf, for every command that runs Spark."""
    command = click.option(
        "--spark-conf", "spark_conf", multiple=True, metavar="KEY=VALUE",
        help="A Spark setting, for example spark.driver.memory=8g (repeatable).")(command)
    return click.option(
        "--spark-master", metavar="URL", default=None,
        help="Spark master URL, for example spark://host:7077. Default: local[*], "
             "all cores of this machine.")(command)


def _spark(master: str | None, conf_pairs: tuple[str, ...], scratch_dir: Path):
    from history_analysis.spark import parse_conf, spark_session
    try:
        conf = parse_conf(conf_pairs)
        return spark_session(master=master, conf=conf, scratch_dir=scratch_dir)
    except (ValueError, RuntimeError) as e:
        raise BadInput(str(e)) from None


RUN_DIR = click.Path(file_okay=False, path_type=Path)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="kchaos",
                      message="%(prog)s %(version)s", help="Print the version and exit.")
def cli() -> None:
    """kchaos: Jepsen-style correctness and chaos testing for Kafka-compatible systems."""


@cli.command("validate-history")
@click.argument("run_dir", type=RUN_DIR)
def validate_history_command(run_dir: Path) -> None:
    """Check RUN_DIR/history.jsonl against the history contract (HISTORY.md).

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


@cli.command("ingest")
@click.argument("run_dirs", nargs=-1, required=True, type=RUN_DIR, metavar="RUN_DIR...")
@spark_options
def ingest_command(run_dirs: tuple[Path, ...], spark_master: str | None,
                   spark_conf: tuple[str, ...]) -> None:
    """Turn RUN_DIR/history.jsonl into the Parquet tables of RUN_DIR/history/.

    Validates the history first; re-running replaces the tables whole. Several
    run directories share one Spark session.
    """
    from history_analysis.history import HistoryError
    from history_analysis.ingest import IngestError, ingest
    spark = _spark(spark_master, spark_conf, run_dirs[0] / ".spark")
    for run_dir in run_dirs:
        try:
            click.echo(ingest(spark, run_dir).summary())
        except (HistoryError, IngestError) as e:
            raise BadInput(str(e)) from None


def main() -> None:
    """Entry point: usage errors are bad input too (exit 3), as ANOMALIES.md's
    exit codes reserve 1 and 2 for verdicts."""
    try:
        code = cli.main(prog_name="kchaos", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        code = EXIT_BAD_INPUT
    except (click.Abort, KeyboardInterrupt):
        click.echo("kchaos: interrupted", err=True)
        code = 130
    sys.exit(code if isinstance(code, int) else EXIT_OK)
