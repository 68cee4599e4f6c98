"""`kchaos validate`: the recipe matrix (validation/matrix.py); with
--generic, the generic nemesis's detection power (validation/generic.py);
with --kafka, the evidence on Apache Kafka (validation/kafka.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cli.common import EXIT_INVALID, BadInput, spark_options, start_spark
from cluster.addressing import DEFAULT_SUBNET
from validation import generic
from validation import kafka as evidence
from validation.figures import machine, stamp
from validation.matrix import (CLEAN_RUNS, format_table, selected, soak_config, validate_recipe,
                               write_docs_table, write_generic_table)
from validation.profiles import DEFAULT_PROFILE, PROFILES


@click.command("validate")
@click.option("--switch", "switches", multiple=True, metavar="NAME",
              help="Validate only this bug switch (repeatable; default: every recipe; with "
              "--generic, `none` is the correct broker).")
@click.option("--fast", is_flag=True, help="Only the recipes of make test's fast subset.")
@click.option("--soak", type=float, default=0.0, show_default=True, metavar="MINUTES",
              help="Also run every fault together on the correct broker for MINUTES.")
@click.option("--clean-runs", type=click.IntRange(1), default=None, metavar="N",
              help="Conclusive runs with the switch off each switch needs.  [default: 3]")
@click.option("--generic", is_flag=True,
              help="Measure the generic nemesis instead of the recipes: every fault kind, "
              "each switch on, --seeds runs of --time-limit s, and --clean-seeds runs on "
              "the correct broker; resumable (finished cells are kept in the store).")
@click.option("--kafka", is_flag=True,
              help="Apache Kafka's evidence instead: the safe configuration with no fault "
              "and under every fault (must be valid) and Kafka's unsafe settings (must be "
              "found), --seeds runs each; --switch picks rows by key; resumable.")
@click.option("--kafka-version", default=None, metavar="VERSION",
              help="--kafka: the release to run.  [default: the one --db kafka runs]")
@click.option("--seeds", type=click.IntRange(1), default=None, metavar="N",
              help="--generic: runs per switch.  [default: 5]  --kafka: runs per row.  "
              "[default: 10 for the safe rows, 3 for the unsafe]")
@click.option("--clean-seeds", type=click.IntRange(0), default=None, metavar="N",
              help="--generic: runs on the correct broker.  [default: 10]")
@click.option("--time-limit", type=click.FloatRange(1), default=None, metavar="S",
              help="--generic: seconds of each run's main phase.  [default: 90]")
@click.option("--profile", type=click.Choice(list(PROFILES)), default=None,
              help="--generic: Kafka's timings and sizes, or timeouts and buffers a 90-s "
              "run's faults cross, with slow consumers and ends asked under faults; "
              "stress-failover adds the failover fault to stress's mix "
              f"(docs/validation.md); a table each.  [default: {DEFAULT_PROFILE}]")
@click.option("--recheck", is_flag=True,
              help="--generic: run no new cell; judge the profile's finished cells again "
              "with this version's checkers (their histories are kept in the store).")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path),
              default=Path("store"), show_default=True, help="Where run directories go.")
@click.option("--table-out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Also write the table (Markdown) to this file.")
@click.option("--write-docs", is_flag=True,
              help="Also write the table into docs/validation.md (with the commit).")
@click.option("--subnet", default=DEFAULT_SUBNET, show_default=True,
              help="The nodes' subnet, as for `kchaos run`: runs at the same time on one "
              "machine need different subnets.")
@spark_options
def validate_command(switches, fast, soak, clean_runs, generic, kafka, kafka_version, seeds,
                     clean_seeds, time_limit, profile, recheck, store, table_out, write_docs,
                     subnet, spark_master, spark_conf) -> None:
    """The validation matrix: every bug switch's recipe (docs/validation.md)
    with the switch on must show its anomaly within the recipe's seeded
    attempts, and at least --clean-runs runs with it off must be valid; a
    run whose recipe did not reach its preconditions is inconclusive and
    retried with the next seed. Prints a table; exit 0 when every switch
    was found with no false alarm and no recipe failed (and the soak was
    valid), 1 otherwise.

    With --generic: the detection rate, the median time to first detection
    and the anomaly types the generic nemesis finds per switch, and the
    false alarms on the correct broker; exit 0 when the correct broker had
    none, 1 otherwise.
    """
    if kafka:
        if generic or fast or soak or clean_runs or clean_seeds is not None or time_limit \
                or profile or recheck:
            raise BadInput("--kafka takes only --switch, --seeds, --kafka-version and the "
                           "store, table and subnet options")
        sys.exit(_kafka(list(switches), seeds, kafka_version, store, table_out, write_docs,
                        subnet, spark_master, spark_conf))
    if kafka_version:
        raise BadInput("--kafka-version goes with --kafka")
    if generic:
        if fast or soak or clean_runs:
            raise BadInput("--generic takes neither --fast, --soak nor --clean-runs")
        sys.exit(_generic(list(switches), seeds, clean_seeds, time_limit, profile, recheck,
                          store, table_out, write_docs, subnet, spark_master, spark_conf))
    if seeds or clean_seeds is not None or time_limit or profile or recheck:
        raise BadInput("--seeds, --clean-seeds, --time-limit, --profile and --recheck go "
                       "with --generic")
    from kchaos.progress import Progress
    from kchaos.run import run_and_check
    try:
        recipes = selected(list(switches), fast)
    except ValueError as e:
        raise BadInput(str(e)) from None
    measured_on = f"{stamp()}; {machine()}"       # the code that runs, as it starts
    store.mkdir(parents=True, exist_ok=True)
    spark = start_spark(spark_master, spark_conf, store / ".spark")
    rows = []
    for recipe in recipes:
        click.echo(f"validating {recipe.switch} ...")
        rows.append(validate_recipe(recipe, spark, store, subnet=subnet,
                                    clean_runs=clean_runs or CLEAN_RUNS))
        click.echo(format_table(rows[-1:]).splitlines()[-1])
    table = format_table(rows)
    lines = ["", table]
    soak_ok = True
    if soak > 0:
        config = soak_config(minutes=soak, seed=1, store=store, subnet=subnet)
        result = run_and_check(config, spark, progress=Progress.for_terminal())
        soak_ok = result.valid is True
        found = ", ".join(f"{t} {n}" for t, n in sorted(result.counts.items()) if n)
        lines.append(f"\nsoak, {soak:g} min, every fault, correct broker: "
                     f"{'valid' if soak_ok else 'INVALID'}"
                     f"{' (' + found + ')' if found else ''} — {result.run_dir}")
    click.echo("\n".join(lines))
    if table_out is not None:
        _write_table(table_out, "\n".join(lines).strip())
    if write_docs:
        block = "recipe-subset" if switches else "recipe-fast" if fast else "recipe-matrix"
        page = write_docs_table(lines, block=block, measured_on=measured_on)
        click.echo(f"written to {page}")
    if not soak_ok or not all(row.ok for row in rows):
        sys.exit(EXIT_INVALID)


def _generic(switches, seeds, clean_seeds, time_limit, profile, recheck, store, table_out,
             write_docs, subnet, spark_master, spark_conf) -> int:
    from reference_broker.bugs import CATALOGUE
    every = [*CATALOGUE, generic.CORRECT]
    unknown = [s for s in switches if s not in every]
    if unknown:
        raise BadInput(f"--switch {unknown[0]!r}: not a bug switch; choose from "
                       f"{', '.join(every)}")
    switches = switches or every
    store.mkdir(parents=True, exist_ok=True)
    spark = start_spark(spark_master, spark_conf, store / ".spark")
    limit = time_limit or generic.TIME_LIMIT
    profile = profile or DEFAULT_PROFILE

    if recheck:
        cells = generic.recheck(spark, store, profile=profile, time_limit=limit,
                                on_cell=lambda cell: _report(cell, None))
    else:
        cells = generic.fill(switches, spark, store, seeds=seeds or generic.SEEDS,
                             clean_seeds=generic.CLEAN_SEEDS if clean_seeds is None
                             else clean_seeds, time_limit=limit, subnet=subnet,
                             profile=profile, on_cell=_report)
    shown = [c for c in cells if c.time_limit == limit and c.profile == profile]
    table = generic.format_generic(generic.rows(shown, every), {limit})
    click.echo("\n" + table)
    if table_out is not None:
        _write_table(table_out, table)
    if write_docs:
        commits = sorted({c.commit for c in shown})
        checked = sorted({c.checked for c in shown if c.checked})
        click.echo(f"written to {write_generic_table(table, commits, profile, checked)}")
    false_alarms = [c for c in shown if c.switch == generic.CORRECT and c.valid is False]
    return EXIT_INVALID if false_alarms else 0


def _kafka(keys, seeds, version, store, table_out, write_docs, subnet, spark_master,
           spark_conf) -> int:
    from cluster.kafka import dist
    unknown = [k for k in keys if k not in evidence.BY_KEY]
    if unknown:
        raise BadInput(f"--switch {unknown[0]!r}: not a row of the Kafka evidence; choose "
                       f"from {', '.join(evidence.BY_KEY)}")
    version = version or dist.DEFAULT_VERSION
    rows = [evidence.BY_KEY[k] for k in keys] or evidence.ROWS
    store.mkdir(parents=True, exist_ok=True)
    spark = start_spark(spark_master, spark_conf, store / ".spark")

    cells = evidence.fill(rows, spark, store, version=version, seeds=seeds, subnet=subnet,
                          on_cell=_report)
    outcomes = evidence.outcomes(cells)
    table = evidence.format_outcomes(outcomes)
    click.echo("\n" + table)
    if table_out is not None:
        _write_table(table_out, table)
    if write_docs:
        click.echo(f"written to {evidence.write_table(outcomes, cells, version)}")
    return 0 if all(o.ok for o in outcomes if o.runs) else EXIT_INVALID


def _write_table(path: Path, table: str) -> None:
    """--table-out: its folder is made (a fresh clone has no store/, and the
    table was lost after a sitting of runs, before the docs were written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(table + "\n")


def _report(cell, skipped) -> None:
    """One line per cell as it finishes (or is found done before)."""
    if skipped:
        click.echo(f"{skipped[0]} seed {skipped[1]}: done before, skipped")
    else:
        found = ", ".join(f"{t} {n}" for t, n in cell.counts.items()) or "no anomaly"
        click.echo(f"{cell.switch} seed {cell.seed}: {cell.valid} ({found}) — {cell.run_dir}")
