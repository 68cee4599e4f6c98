"""The `kchaos` command line. Each command exposes only what works.

Exit codes: 0 success, 3 bad input or an internal error, with one line on
stderr saying what and where.
"""

from __future__ import annotations

import faulthandler
import signal
import sys
import tempfile
import time
from pathlib import Path

import click
from click.core import ParameterSource

from checkers.result import MAX_EXAMPLES
from kchaos import __version__
from kchaos.config import TestConfig
from kchaos.options import click_options, from_flat, given, read_config_file

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


def _spark(master: str | None, conf_pairs: tuple[str, ...], scratch_dir: Path):
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
# Every setting of a run, derived from the fields of TestConfig and its parts.
run_options = click_options(TestConfig)


def _scratch_dir(run_dirs: tuple[Path, ...]) -> Path:
    """Spark's scratch space: `.spark/` in the first run directory that
    exists (never creating a run directory that is not there)."""
    for run_dir in run_dirs:
        if run_dir.is_dir():
            return run_dir / ".spark"
    return Path(tempfile.mkdtemp(prefix="kchaos-spark-"))


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="kchaos",
                      message="%(prog)s %(version)s", help="Print the version and exit.")
def cli() -> None:
    """kchaos: Jepsen-style correctness and chaos testing for Kafka-compatible systems."""


@cli.command("validate-history")
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


@cli.command("ingest")
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


@cli.command("check")
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
    spark = _spark(spark_master, spark_conf, _scratch_dir(run_dirs)) if ready else None
    for run_dir in ready:
        started = time.monotonic()
        try:
            suite = check_run(spark, run_dir, options(run_dir))
        except (HistoryError, IngestError, TableError) as e:
            bad(run_dir, started, e)
            continue
        verdicts.append(suite.valid)
        counts[run_dir] = suite.result.counts
        click.echo(f"{run_dir}: {_verdict_line(suite)}")
        _report(run_dir)
        cases.append(case_of(run_dir, time.monotonic() - started, suite, _verdict_line(suite)))
    _print_counts(counts)
    if junit is not None:
        write_junit(junit, cases)
    if None in verdicts:
        sys.exit(EXIT_BAD_INPUT)
    if False in verdicts:
        sys.exit(EXIT_INVALID)
    if UNKNOWN in verdicts:
        sys.exit(EXIT_UNKNOWN)


@cli.command("run")
@click.option("--config-file", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="A test's settings (TOML): the same fields and tables as test.json's "
                   "config. Options given here override it.")
@run_options
@click.option("--check/--no-check", default=True, show_default=True,
              help="Check the history when the run ends. With --no-check no Spark "
                   "starts, the run is not judged (exit 2) and `kchaos check RUN_DIR` "
                   "judges it later, anywhere.")
@junit_option
@spark_options
@click.pass_context
def run_command(ctx, config_file, check, junit, spark_master, spark_conf, **options) -> None:
    """Run a test: start the cluster, drive the queue workload, read
    everything back, check the history, print the verdict and the run
    directory. Exit codes as kchaos check: 0 valid, 1 invalid, 2 unknown
    (or not checked), 3 bad input or an error before a history was written.
    """
    from checkers.result import UNKNOWN
    from cluster.node import SetupError
    from history_analysis.spark import parse_conf
    from kchaos.progress import Progress
    from kchaos.run import run_and_check, run_test
    from kchaos.session import BackgroundSession

    if junit is not None and not check:
        raise BadInput("--junit writes a verdict, which --no-check does not give: drop one")
    sources = {name: ctx.get_parameter_source(name) is ParameterSource.COMMANDLINE
               for name in options}
    try:
        base = read_config_file(config_file) if config_file is not None else None
        config = from_flat(TestConfig, given(TestConfig, options, sources), base)
        config.validate()
    except (ValueError, TypeError) as e:
        raise BadInput(f"{config_file}: {e}" if config_file is not None and
                       str(config_file) not in str(e) else str(e)) from None
    try:
        spark = BackgroundSession(master=spark_master, conf=parse_conf(spark_conf),
                                  scratch_dir=Path(config.store) / ".spark")
    except ValueError as e:
        raise BadInput(str(e)) from None
    started = time.monotonic()
    try:
        if not check:
            outcome = run_test(config, Progress.for_terminal())
            _echo_outcome(outcome, config)
            click.echo(f"{outcome.run_dir}: not checked; kchaos check {outcome.run_dir} "
                       "judges it")
            sys.exit(EXIT_UNKNOWN)
        result = run_and_check(config, spark, progress=Progress.for_terminal())
    except SetupError as e:
        raise BadInput(str(e)) from None
    _echo_outcome(result.outcome, config)
    outcome = result.outcome
    click.echo(f"{outcome.run_dir}: {_verdict_line(result.suite)}")
    if result.seconds_to_verdict is not None:
        click.echo(f"verdict {result.seconds_to_verdict:.1f} s after the final reads")
    _echo_report(outcome.run_dir, result.report)
    _print_counts({outcome.run_dir: result.suite.result.counts})
    if junit is not None:
        from kchaos.junit import case_of, write_junit
        write_junit(junit, [case_of(outcome.run_dir, time.monotonic() - started, result.suite,
                                    _verdict_line(result.suite))])
    if result.valid is False:
        sys.exit(EXIT_INVALID)
    if result.valid == UNKNOWN:
        sys.exit(EXIT_UNKNOWN)


def _echo_outcome(outcome, config: TestConfig) -> None:
    """What the run itself tells, before any verdict."""
    click.echo(f"run directory: {outcome.run_dir}")
    for failure in outcome.node_failures:
        click.echo(f"node failure: {failure}")
    for effect in outcome.fault_effects:
        click.echo(f"fault effect: {effect}")
    for problem in outcome.heal_problems:
        click.echo(f"heal failed: {problem}")
    if outcome.nemesis_error:
        click.echo(f"the nemesis failed: {outcome.nemesis_error}")
    if outcome.final and not outcome.final.get("reached"):
        click.echo("final reads did not reach every partition's end within "
                   f"--final-time-limit {config.final_time_limit:g} s")
    if outcome.final and outcome.final.get("past_end"):
        past = outcome.final["past_end"]
        click.echo(f"final reads read {sum(past.values())} record(s) past the recorded ends "
                   f"of {', '.join(sorted(past))} (the ends were stale when recorded)")


@cli.command("heal")
@click.argument("run_dir", type=RUN_DIR)
def heal_command(run_dir: Path) -> None:
    """Heal the nodes of a run whose harness died with faults in place:
    remove kchaos's firewall chain on every node (namespace, container or
    host), continue paused processes, unmount disk gates. Nothing is
    stopped (kchaos clean does that). Exit 0 when all healed, 3 when a
    problem remains (printed).
    """
    from kchaos.heal import heal_run_dir
    _on_run_dir("heal", heal_run_dir, run_dir)


@cli.command("clean")
@click.argument("run_dir", type=RUN_DIR)
def clean_command(run_dir: Path) -> None:
    """Stop everything a run started and remove what it made, from any
    state (a harness killed mid-setup, a run that already ended): heal as
    kchaos heal, then stop its brokers and daemons and remove its network
    namespaces, bridge and forwarding rule, or its containers and network,
    or its daemons on the ssh hosts. An external cluster keeps running.
    Idempotent. Exit 0 when clean, 3 when a problem remains (printed).
    """
    from kchaos.heal import clean_run_dir
    _on_run_dir("clean", clean_run_dir, run_dir)


def _on_run_dir(verb: str, action, run_dir: Path) -> None:
    """Run heal or clean on run_dir: print what was done and each problem;
    exit 3 when a problem remains."""
    try:
        done, problems = action(run_dir)
    except (FileNotFoundError, ValueError, PermissionError) as e:
        raise BadInput(str(e)) from None
    for line in done:
        click.echo(line)
    for problem in problems:
        click.echo(f"{verb} failed: {problem}")
    if problems:
        sys.exit(EXIT_BAD_INPUT)


@cli.command("broker", context_settings={"ignore_unknown_options": True,
                                         "allow_extra_args": True, "help_option_names": []},
             add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def broker_command(args: tuple[str, ...]) -> None:
    """Run one reference broker node (the same options as
    `python -m reference_broker`; --help lists them)."""
    from reference_broker.standalone import without_hypothesis
    without_hypothesis()
    from reference_broker.main import main as broker_main
    try:
        code = broker_main(list(args), prog="kchaos broker")
    except SystemExit as e:  # argparse: usage errors are kchaos's bad input
        code = EXIT_BAD_INPUT if e.code == 2 else e.code
    sys.exit(code)


def _verdict_line(suite) -> str:
    result, allowed = suite.result, suite.options.allowed
    found = ", ".join(f"{t} {n}" + (" (allowed)" if t in allowed else "")
                      for t, n in sorted(result.counts.items()))
    word = {True: "valid", False: "INVALID"}.get(suite.valid, "unknown")
    parts = [word] + ([found] if found else [])
    parts += [f"{t} undecided: {u['count']}" if "summary" not in u else f"{t}: {u['summary']}"
              for t, u in sorted(result.unknown.items())]
    parts += [f"checker {e['checker']} failed: {e['error']}" for e in result.errors]
    return "; ".join(parts)


def _report(run_dir: Path) -> None:
    """The report, beside the verdict: a failure is logged and shown, and
    changes neither the verdict nor the exit code."""
    from history_analysis.report import write_report_quietly
    _echo_report(run_dir, write_report_quietly(run_dir))


def _echo_report(run_dir: Path, report: Path | None) -> None:
    click.echo(f"report: {report}" if report is not None else
               f"report: none (writing it failed; the verdict stands; see the log, or run "
               f"kchaos report {run_dir})")


def _print_counts(counts: dict) -> None:
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


from kchaos.cli_report import report_command, serve_command  # noqa: E402 — needs BadInput
from kchaos.cli_validate import validate_command  # noqa: E402 — needs BadInput

cli.add_command(report_command)
cli.add_command(serve_command)
cli.add_command(validate_command)


class Terminated(KeyboardInterrupt):
    """SIGTERM (CI cancelling a job): unwinds like Ctrl-C, so every
    `finally` tears down what the run started."""


def _on_sigterm(signum, frame) -> None:
    # Once: a second SIGTERM must not cut the teardown the first started.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Terminated()


def main() -> None:
    """Entry point: usage errors are bad input too (exit 3): the exit codes
    reserve 1 and 2 for verdicts (docs/checking.md)."""
    # The clients run in this process: should a client library crash it
    # (a native abort or segfault), the Python stack of every thread shows
    # where, on stderr.
    faulthandler.enable()
    signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        code = cli.main(prog_name="kchaos", standalone_mode=False)
    except click.ClickException as e:
        e.show()
        code = EXIT_BAD_INPUT
    except (click.Abort, KeyboardInterrupt) as e:
        # click turns an interrupt inside a command into Abort, from it.
        if isinstance(e, Terminated) or isinstance(e.__cause__, Terminated):
            click.echo("kchaos: terminated (SIGTERM); what had started was torn down",
                       err=True)
            code = 128 + signal.SIGTERM
        else:
            click.echo("kchaos: interrupted", err=True)
            code = 130
    except Exception as e:  # noqa: BLE001 — one line, never a traceback
        detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
        click.echo(f"kchaos: internal error: {type(e).__name__}: {detail}", err=True)
        code = EXIT_BAD_INPUT
    sys.exit(code if isinstance(code, int) else EXIT_OK)
