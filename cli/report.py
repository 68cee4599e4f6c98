"""`kchaos report` and `kchaos serve`: the commands that explain runs."""

from __future__ import annotations

import time
from pathlib import Path

import click

from cli.common import RUN_DIR, BadInput


@click.command("report")
@click.argument("run_dirs", nargs=-1, required=True, type=RUN_DIR, metavar="RUN_DIR...")
def report_command(run_dirs: tuple[Path, ...]) -> None:
    """Write RUN_DIR/report.html (and its plots in RUN_DIR/plots/) for each
    run: the verdict and why, the run's settings, each anomaly in words with
    its history excerpts, the faults and availability under each, plots over
    time, offset diagrams and an operation timeline (docs/reports.md).

    Ingests a history whose tables are missing or stale; needs no Spark. A
    run that was never checked gets a report that says so. Exit 3 when a
    report could not be written.
    """
    from history_analysis.report import write_report
    failed = False
    for run_dir in run_dirs:
        if not run_dir.is_dir():
            click.echo(f"kchaos: error: {run_dir}: no such run directory", err=True)
            failed = True
            continue
        started = time.monotonic()
        try:
            path = write_report(run_dir)
        except Exception as e:  # noqa: BLE001 — one line per run, the others still written
            detail = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            click.echo(f"kchaos: error: {run_dir}: no report: {detail}", err=True)
            failed = True
            continue
        click.echo(f"{path} ({time.monotonic() - started:.1f} s)")
    if failed:
        raise SystemExit(3)


@click.command("serve")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), default=Path("store"),
              show_default=True, help="The directory of runs to list (kchaos run --store).")
@click.option("--port", type=click.IntRange(0, 65535), default=8080, show_default=True,
              help="The port to listen on (0: any free port).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="The address to bind. Anyone who can reach it can read every run in the "
                   "store: keep the default unless you mean to share them.")
def serve_command(store: Path, port: int, host: str) -> None:
    """Browse the runs in STORE: a list with verdicts and anomaly counts,
    sortable and filterable; each run's report and files; a zip of a run.
    Stops on Ctrl-C."""
    from kchaos.serve import StoreServer, check_store
    try:
        check_store(store)
        server = StoreServer(store, host, port, verbose=True)
    except (ValueError, OSError) as e:
        raise BadInput(f"cannot serve {store} on {host}:{port}: {e}") from None
    click.echo(f"serving {store} at {server.url} (Ctrl-C stops)")
    try:
        server.serve_forever()
    finally:
        server.server_close()
