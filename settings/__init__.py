"""Settings: dataclass fields that carry their help text, so the run's
configuration is written once and the command line, config files and
test.json are derived from it (kchaos/config.py, kchaos/options.py).

    acks: str = setting("all", "Producer acks.", choices=("0", "1", "all"))

A field's metadata says how it appears on the command line: its help,
`choices`, a `flag` other than `--<name>`, `comma=True` for a list given as
`a,b,c`, `multiple=True` for a repeatable option, `cli=False` for a field
that only Python, config files and test.json set. Nested settings (a
dataclass field whose type is a dataclass) are flattened on the command
line and kept as tables in files.

This package imports nothing of the project: every room may declare
settings (the run's own are kchaos/config.py's, the workload's, the ssh
backend's).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any


def setting(default: Any = dataclasses.MISSING, help: str = "", *,
            default_factory: Callable[[], Any] | Any = dataclasses.MISSING,
            choices: Sequence[str] | None = None, flag: str | None = None,
            metavar: str | None = None, comma: bool = False, multiple: bool = False,
            cli: bool = True, default_text: str | None = None,
            parse: Callable[[str], Any] | None = None, flag_value: Any = None,
            prefix: str = "") -> Any:
    """A dataclass field with its command-line description (see the module
    docstring). `default_text` replaces the default in the help, for a
    default computed at run time (a random seed). `parse` reads the
    option's text; `flag_value` makes the option a flag that sets this
    value (a tri-state setting whose flag says no). `prefix`, on a nested
    part, starts its settings' flat names (`ssh_` makes `ssh.user` the
    command line's `--ssh-user`)."""
    metadata = {"help": help, "choices": tuple(choices) if choices else None, "flag": flag,
                "metavar": metavar, "comma": comma, "multiple": multiple, "cli": cli,
                "default_text": default_text, "parse": parse, "flag_value": flag_value,
                "prefix": prefix}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def default_of(f: dataclasses.Field) -> Any:
    """The field's default value (a fresh one from its factory)."""
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING
