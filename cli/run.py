"""`kchaos run` and the commands that tidy after one: `kchaos heal` and
`kchaos clean`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
from click.core import ParameterSource

from cli.common import (EXIT_BAD_INPUT, EXIT_INVALID, EXIT_UNKNOWN, RUN_DIR, BadInput,
                        echo_report, junit_option, print_counts, spark_options, verdict_line)
from kchaos.config import TestConfig
from kchaos.config_checks import validate
from kchaos.options import click_options, from_flat, given, read_config_file

# Every setting of a run, derived from the fields of TestConfig and its parts.
run_options = click_options(TestConfig)


@click.command("run")
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
        validate(config)
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
    except KeyboardInterrupt:       # Ctrl-C or SIGTERM (cli.main): the run is torn down
        spark.abandon()
        raise
    _echo_outcome(result.outcome, config)
    outcome = result.outcome
    click.echo(f"{outcome.run_dir}: {verdict_line(result.suite)}")
    if result.seconds_to_verdict is not None:
        click.echo(f"verdict {result.seconds_to_verdict:.1f} s after the final reads")
    echo_report(outcome.run_dir, result.report)
    print_counts({outcome.run_dir: result.suite.result.counts})
    if junit is not None:
        from kchaos.junit import case_of, write_junit
        write_junit(junit, [case_of(outcome.run_dir, time.monotonic() - started, result.suite,
                                    verdict_line(result.suite))])
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
    held = (outcome.final or {}).get("open_transactions")
    if held is not None:
        from history_analysis.report.explain import held_by
        places = sorted({(e["topic"], e["partition"]) for e in held if "topic" in e})
        click.echo("the last stable offsets stayed below the high watermarks to the end of "
                   "the final phase's wait" + (held_by(held, "", -1) if not places else ""))
        for topic, partition in places:
            click.echo(f"  {topic}-{partition}{held_by(held, topic, partition)}")
    if outcome.final and outcome.final.get("past_end"):
        past = outcome.final["past_end"]
        click.echo(f"final reads read {sum(past.values())} record(s) past the recorded ends "
                   f"of {', '.join(sorted(past))} (the ends were stale when recorded)")


@click.command("heal")
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


@click.command("clean")
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
