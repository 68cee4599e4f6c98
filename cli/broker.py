"""`kchaos broker`: one reference broker node, as `python -m reference_broker`."""

from __future__ import annotations

import sys

import click

from cli.common import EXIT_BAD_INPUT


@click.command("broker", context_settings={"ignore_unknown_options": True,
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
