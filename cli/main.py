"""The `kchaos` command line: the group, its commands (each in a module of
this package, sharing cli/common.py), and the entry point that turns every
failure into one line and an exit code. Each command exposes only what
works.
"""

from __future__ import annotations

import faulthandler
import signal
import sys

import click

from cli.broker import broker_command
from cli.check import check_command, ingest_command, validate_history_command
from cli.common import EXIT_BAD_INPUT, EXIT_OK
from cli.report import report_command, serve_command
from cli.run import clean_command, heal_command, run_command
from cli.validate import validate_command
from kchaos import __version__


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="kchaos",
                      message="%(prog)s %(version)s", help="Print the version and exit.")
def cli() -> None:
    """kchaos: Jepsen-style correctness and chaos testing for Kafka-compatible systems."""


for command in (validate_history_command, ingest_command, check_command, run_command,
                heal_command, clean_command, broker_command, report_command, serve_command,
                validate_command):
    cli.add_command(command)


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
    # SIGUSR1 prints every thread's stack and goes on: where a run that
    # seems stuck is (tests/cli/test_sigterm.py asks it of a slow teardown).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
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
