"""The `kchaos` command line. Each command exposes only what works.

Exit codes: 0 success, 3 bad input or an internal error, with one line on
stderr saying what and where.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from kchaos import __version__

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
              help="An anomaly type expected in this run (repeatable): still counted and "
                   "shown, no longer invalid. int-send-skip and resume-rewind are always "
                   "allowed.")
@click.option("--max-examples", type=click.IntRange(min=0), default=32, show_default=True,
              help="Cases kept per anomaly type in results.json.")
@spark_options
def check_command(run_dirs: tuple[Path, ...], allow: tuple[str, ...], max_examples: int,
                  spark_master: str | None, spark_conf: tuple[str, ...]) -> None:
    """Check the histories of RUN_DIR... for anomalies (ANOMALIES.md).

    Ingests a run directory whose tables are missing or older than its
    history.jsonl, writes RUN_DIR/results.json, prints a verdict per run and a
    table of anomaly counts. Exit code: 0 all valid, 1 any invalid, 2 any
    unknown (none invalid), 3 bad input or internal error.
    """
    from checkers.result import ALLOWED_BY_DEFAULT, ANOMALY_TYPES, UNKNOWN, CheckOptions
    from history_analysis.history import HistoryError
    from history_analysis.ingest import IngestError
    from history_analysis.tables import TableError
    from kchaos.check import check_run

    unknown_types = [t for t in allow if t not in ANOMALY_TYPES]
    if unknown_types:
        raise BadInput(f"--allow {unknown_types[0]!r}: not an anomaly type; choose from "
                       + ", ".join(ANOMALY_TYPES))
    options = CheckOptions(max_examples=max_examples,
                           allowed=ALLOWED_BY_DEFAULT | frozenset(allow))
    spark = _spark(spark_master, spark_conf, _scratch_dir(run_dirs))
    verdicts, counts = [], {}
    for run_dir in run_dirs:
        try:
            suite = check_run(spark, run_dir, options)
        except (HistoryError, IngestError, TableError) as e:
            click.echo(f"kchaos: error: {e}", err=True)
            verdicts.append(None)
            continue
        verdicts.append(suite.valid)
        counts[run_dir] = suite.result.counts
        click.echo(f"{run_dir}: {_verdict_line(suite)}")
    _print_counts(counts)
    if None in verdicts:
        sys.exit(EXIT_BAD_INPUT)
    if False in verdicts:
        sys.exit(EXIT_INVALID)
    if UNKNOWN in verdicts:
        sys.exit(EXIT_UNKNOWN)


@cli.command("run")
@click.option("--name", default="queue", show_default=True, help="The test's name (run directory).")
@click.option("--seed", type=int, default=None, help="Seed of every random choice (default: random, "
              "recorded in test.json).")
@click.option("--time-limit", type=float, default=60.0, show_default=True,
              help="Seconds of the main phase.")
@click.option("--db", type=click.Choice(["reference", "external"]), default="reference",
              show_default=True, help="reference: start a local reference cluster; external: "
              "test the cluster at --bootstrap.")
@click.option("--bootstrap", metavar="HOST:PORT[,...]", help="The external cluster (--db external).")
@click.option("--nodes", type=int, default=3, show_default=True, help="Reference brokers.")
@click.option("--no-namespaces", is_flag=True, help="Loopback addresses even as root "
              "(network namespaces are used when root by default).")
@click.option("--subnet", default="198.18.0.0/24", show_default=True,
              help="Subnet of the nodes' network namespaces; runs at the same time on one "
              "machine need different subnets (it names the namespaces too).")
@click.option("--config", "broker_config", multiple=True, metavar="KEY=VALUE",
              help="A reference broker setting (repeatable), e.g. min.insync.replicas=2.")
@click.option("--bug", "bugs", multiple=True, metavar="NAME",
              help="A reference broker bug switch (repeatable; kchaos broker --list-bugs).")
@click.option("--client", type=click.Choice(["confluent-kafka", "kafka-python"]),
              default="confluent-kafka", show_default=True, help="The client library.")
@click.option("--topics", type=int, default=1, show_default=True, help="Topics to create.")
@click.option("--partitions", type=int, default=4, show_default=True,
              help="Partitions per topic.")
@click.option("--replication-factor", type=int, default=3, show_default=True,
              help="Replication factor of the topics.")
@click.option("--concurrency", type=int, default=6, show_default=True,
              help="Worker threads, alternately producers and consumers.")
@click.option("--rate", type=float, default=200.0, show_default=True,
              help="Operations per second, all workers together.")
@click.option("--records-per-send", type=int, default=1, show_default=True,
              help="Values one send operation produces, back to back to one partition "
              "(more than 1 pipelines batches).")
@click.option("--consumer-mode", type=click.Choice(["assign", "subscribe", "mixed"]),
              default="mixed", show_default=True,
              help="How consumers read: assign, subscribe, or both (alternating).")
@click.option("--groups", type=int, default=1, show_default=True,
              help="Consumer groups of the subscribe-mode consumers.")
@click.option("--crash-clients-every", type=float, default=None, metavar="S",
              help="Crash a worker's client about every S seconds (default: never).")
@click.option("--stall-consumers-every", type=float, default=None, metavar="S",
              help="About every S seconds, a subscribe-mode consumer stalls 1.5 x "
              "max.poll.interval.ms before a commit, as slow processing does (default: never).")
@click.option("--acks", type=click.Choice(["0", "1", "all"]), default="all", show_default=True,
              help="Producer acks.")
@click.option("--idempotence/--no-idempotence", default=True, show_default=True,
              help="The idempotent producer (KIP-98).")
@click.option("--retries", type=int, default=None, help="Producer retries (default: the client's).")
@click.option("--max-in-flight", type=int, default=5, show_default=True,
              help="Producer requests in flight per connection.")
@click.option("--linger-ms", type=int, default=0, show_default=True,
              help="Producer batching delay.")
@click.option("--batch-size", type=int, default=16384, show_default=True,
              help="Producer batch size in bytes (1: one record per batch).")
@click.option("--delivery-timeout-ms", type=int, default=10000, show_default=True,
              help="How long a send may take, retries included.")
@click.option("--request-timeout-ms", type=int, default=3000, show_default=True,
              help="Client request timeout.")
@click.option("--session-timeout-ms", type=int, default=6000, show_default=True,
              help="Group session timeout of subscribe-mode consumers.")
@click.option("--heartbeat-interval-ms", type=int, default=300, show_default=True,
              help="Group heartbeat interval.")
@click.option("--auto-offset-reset", type=click.Choice(["earliest", "latest"]),
              default="earliest", show_default=True,
              help="Where a consumer goes when its position is out of range (and a group "
              "with no commit starts).")
@click.option("--nemesis", default="", metavar="FAULT[,FAULT...]",
              help="Faults on a seeded schedule: partition, pause, kill, restart-all, disk, "
              "packet-loss (default: none).")
@click.option("--nemesis-interval", type=float, default=10.0, show_default=True, metavar="S",
              help="Mean seconds between fault starts (and a fault's mean duration).")
@click.option("--fault-targets", default="one,minority,majority,all,leader", show_default=True,
              metavar="TARGET[,TARGET...]",
              help="Which nodes pause, kill, disk and packet-loss faults may hit.")
@click.option("--nemesis-exclusive", is_flag=True,
              help="One fault at a time (default: faults of different kinds overlap).")
@click.option("--recovery-time", type=float, default=5.0, show_default=True,
              help="Seconds between healing and the final reads.")
@click.option("--final-time-limit", type=float, default=60.0, show_default=True,
              help="Seconds the final reads may take.")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), default=Path("store"),
              show_default=True, help="Where run directories go.")
@click.option("--allow", "allow", multiple=True, metavar="TYPE",
              help="An anomaly type expected in this run (repeatable), as kchaos check.")
@click.option("--max-examples", type=click.IntRange(min=0), default=32, show_default=True,
              help="Cases kept per anomaly type in results.json.")
@spark_options
def run_command(allow, max_examples, spark_master, spark_conf, **options) -> None:
    """Run a test: start the cluster, drive the queue workload, read
    everything back, check the history, print the verdict and the run
    directory. Exit codes as kchaos check: 0 valid, 1 invalid, 2 unknown,
    3 bad input or an error before a history was written.
    """
    from checkers.result import ANOMALY_TYPES, UNKNOWN
    from history_analysis.spark import parse_conf
    from kchaos.config import TestConfig
    from kchaos.progress import Progress
    from kchaos.run import run_and_check
    from kchaos.session import BackgroundSession
    from workloads.clients import ClientSettings

    unknown_types = [t for t in allow if t not in ANOMALY_TYPES]
    if unknown_types:
        raise BadInput(f"--allow {unknown_types[0]!r}: not an anomaly type; choose from "
                       + ", ".join(ANOMALY_TYPES))
    try:
        settings = ClientSettings(
            acks=options.pop("acks"), idempotence=options.pop("idempotence"),
            retries=options.pop("retries"), max_in_flight=options.pop("max_in_flight"),
            linger_ms=options.pop("linger_ms"), batch_size=options.pop("batch_size"),
            delivery_timeout_ms=options.pop("delivery_timeout_ms"),
            request_timeout_ms=options.pop("request_timeout_ms"),
            session_timeout_ms=options.pop("session_timeout_ms"),
            heartbeat_interval_ms=options.pop("heartbeat_interval_ms"),
            auto_offset_reset=options.pop("auto_offset_reset"))
    except ValueError as e:
        raise BadInput(str(e)) from None
    no_namespaces = options.pop("no_namespaces")
    seed = options.pop("seed")
    for name in ("nemesis", "fault_targets"):
        options[name] = [item.strip() for item in options[name].split(",") if item.strip()]
    config = TestConfig(**{k: (list(v) if isinstance(v, tuple) else v)
                           for k, v in options.items()},
                        client_settings=settings, use_namespaces=False if no_namespaces else None,
                        **({} if seed is None else {"seed": seed}))
    try:
        config.validate()
    except ValueError as e:
        raise BadInput(str(e)) from None
    try:
        spark = BackgroundSession(master=spark_master, conf=parse_conf(spark_conf),
                                  scratch_dir=Path(config.store) / ".spark")
    except ValueError as e:
        raise BadInput(str(e)) from None
    result = run_and_check(config, spark, allowed=frozenset(allow), max_examples=max_examples,
                           progress=Progress.for_terminal())
    outcome = result.outcome
    click.echo(f"run directory: {outcome.run_dir}")
    for failure in outcome.node_failures:
        click.echo(f"node failure: {failure}")
    for problem in outcome.heal_problems:
        click.echo(f"heal failed: {problem}")
    if outcome.nemesis_error:
        click.echo(f"the nemesis failed: {outcome.nemesis_error}")
    if outcome.final and not outcome.final.get("reached"):
        click.echo("final reads did not reach every partition's end within "
                   f"--final-time-limit {config.final_time_limit:g} s")
    click.echo(f"{outcome.run_dir}: {_verdict_line(result.suite)}")
    if result.seconds_to_verdict is not None:
        click.echo(f"verdict {result.seconds_to_verdict:.1f} s after the final reads")
    _print_counts({outcome.run_dir: result.suite.result.counts})
    if result.valid is False:
        sys.exit(EXIT_INVALID)
    if result.valid == UNKNOWN:
        sys.exit(EXIT_UNKNOWN)


@cli.command("heal")
@click.argument("run_dir", type=RUN_DIR)
def heal_command(run_dir: Path) -> None:
    """Heal the nodes of a run whose harness died with faults in place:
    remove kchaos's firewall chain in every node's namespace, continue
    paused processes, unmount disk gates. Exit 0 when all healed, 3 when a
    problem remains (printed).
    """
    from kchaos.heal import heal_run_dir
    try:
        done, problems = heal_run_dir(run_dir)
    except (FileNotFoundError, ValueError, PermissionError) as e:
        raise BadInput(str(e)) from None
    for line in done:
        click.echo(line)
    for problem in problems:
        click.echo(f"heal failed: {problem}")
    if problems:
        sys.exit(EXIT_BAD_INPUT)


@cli.command("validate")
@click.option("--switch", "switches", multiple=True, metavar="NAME",
              help="Validate only this bug switch (repeatable; default: every recipe).")
@click.option("--fast", is_flag=True, help="Only the recipes of make test's fast subset.")
@click.option("--soak", type=float, default=0.0, show_default=True, metavar="MINUTES",
              help="Also run every fault together on the correct broker for MINUTES.")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path),
              default=Path("store"), show_default=True, help="Where run directories go.")
@click.option("--table-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the table (Markdown) to this file.")
@click.option("--subnet", default="198.18.0.0/24", show_default=True,
              help="The nodes' subnet, as for `kchaos run`: runs at the same time on one "
              "machine need different subnets.")
@spark_options
def validate_command(switches, fast, soak, store, table_out, subnet, spark_master,
                     spark_conf) -> None:
    """The validation matrix: every bug switch's recipe (BROKER.md) with the
    switch on must show its anomaly within the recipe's seeded attempts,
    and the same seeds with it off must be valid. Prints a table; exit 0
    when every switch was found with no false alarm (and the soak valid),
    1 otherwise.
    """
    from kchaos.validate import format_table, selected, soak_config, validate_recipe
    from kchaos.run import run_and_check
    from kchaos.progress import Progress
    try:
        recipes = selected(list(switches), fast)
    except ValueError as e:
        raise BadInput(str(e)) from None
    store.mkdir(parents=True, exist_ok=True)
    spark = _spark(spark_master, spark_conf, store / ".spark")
    rows = []
    for recipe in recipes:
        click.echo(f"validating {recipe.switch} ...")
        rows.append(validate_recipe(recipe, spark, store, subnet=subnet))
        click.echo(format_table(rows[-1:]).splitlines()[-1])
    table = format_table(rows)
    lines = ["", table]
    soak_ok = True
    if soak > 0:
        config = soak_config(minutes=soak, seed=1, store=store, subnet=subnet)
        result = run_and_check(config, spark,
                               progress=Progress.for_terminal())
        soak_ok = result.valid is True
        found = ", ".join(f"{t} {n}" for t, n in sorted(result.counts.items()) if n)
        lines.append(f"\nsoak, {soak:g} min, every fault, correct broker: "
                     f"{'valid' if soak_ok else 'INVALID'}"
                     f"{' (' + found + ')' if found else ''} — {result.run_dir}")
    click.echo("\n".join(lines))
    if table_out is not None:
        table_out.write_text("\n".join(lines).strip() + "\n")
    if not soak_ok or not all(row.ok for row in rows):
        sys.exit(EXIT_INVALID)


@cli.command("broker", context_settings={"ignore_unknown_options": True,
                                         "allow_extra_args": True, "help_option_names": []},
             add_help_option=False)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def broker_command(args: tuple[str, ...]) -> None:
    """Run one reference broker node (the same options as
    `python -m reference_broker`; --help lists them)."""
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
    except Exception as e:  # noqa: BLE001 — one line, never a traceback
        detail = str(e).strip().splitlines()[0] if str(e).strip() else ""
        click.echo(f"kchaos: internal error: {type(e).__name__}: {detail}", err=True)
        code = EXIT_BAD_INPUT
    sys.exit(code if isinstance(code, int) else EXIT_OK)
