"""What the commands share: exit codes, bad input, the run-directory and
Spark options, and how a verdict and its counts are printed.

Exit codes: 0 success (valid), 1 invalid, 2 unknown, 3 bad input or an
internal error, with one line on stderr saying what and where
(docs/checking.md).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

EXIT_OK, EXIT_INVALID, EXIT_UNKNOWN, EXIT_BAD_INPUT = 0, 1, 2, 3


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


def start_spark(master: str | None, conf_pairs: tuple[str, ...], scratch_dir: Path):
    from history_analysis.spark import parse_conf, spark_session
    try:
        conf = parse_conf(conf_pairs)
        return spark_session(master=master, conf=conf, scratch_dir=scratch_dir)
    except (ValueError, RuntimeError) as e:
        raise BadInput(str(e)) from None


RUN_DIR = click.Path(file_okay=False, path_type=Path)
junit_option = click.option(
    "--junit", type=click.Path(dir_okay=False, path_type=Path), default=None, metavar="FILE",
    help="Also write JUnit XML: a test case per run, its anomalies and the verdict's reasons "
         "in the failure text (unknown is an error).")


def scratch_dir(run_dirs: tuple[Path, ...]) -> Path:
    """Spark's scratch space: `.spark/` in the first run directory that
    exists (never creating a run directory that is not there)."""
    for run_dir in run_dirs:
        if run_dir.is_dir():
            return run_dir / ".spark"
    return Path(tempfile.mkdtemp(prefix="kchaos-spark-"))


def verdict_line(suite) -> str:
    result, allowed = suite.result, suite.options.allowed
    found = ", ".join(f"{t} {n}" + (" (allowed)" if t in allowed else "")
                      for t, n in sorted(result.counts.items()))
    word = {True: "valid", False: "INVALID"}.get(suite.valid, "unknown")
    parts = [word] + ([found] if found else [])
    parts += [f"{t} undecided: {u['count']}" if "summary" not in u else f"{t}: {u['summary']}"
              for t, u in sorted(result.unknown.items())]
    parts += [f"checker {e['checker']} failed: {e['error']}" for e in result.errors]
    return "; ".join(parts)


def report(run_dir: Path) -> None:
    """The report, beside the verdict: a failure is logged and shown, and
    changes neither the verdict nor the exit code."""
    from history_analysis.report import write_report_quietly
    echo_report(run_dir, write_report_quietly(run_dir))


def echo_report(run_dir: Path, report: Path | None) -> None:
    click.echo(f"report: {report}" if report is not None else
               f"report: none (writing it failed; the verdict stands; see the log, or run "
               f"kchaos report {run_dir})")


def print_counts(counts: dict) -> None:
    types = sorted({t for c in counts.values() for t in c})
    if not types:
        return
    runs = list(counts)
    width = max(len(t) for t in types)
    click.echo("\n" + "anomaly".ljust(width) + "".join(f"  run{i + 1:>3}" for i in
                                                       range(len(runs))))
    for t in types:
        click.echo(t.ljust(width) + "".join(f"  {counts[r].get(t, 0):>6}" for r in runs))
    for i, run in enumerate(runs):
        click.echo(f"run{i + 1}: {run}")
