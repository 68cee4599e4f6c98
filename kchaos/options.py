"""The run's settings (kchaos/config.py) as the outside sees them: command-
line options derived from the fields, config files (TOML, the same fields
and tables as test.json's `config`), and flat keyword arguments.

A nested part (`workload`, its `client_settings`, `ssh`) is a table in a
file and flat on the command line, where every leaf name is unique
(checked when the options are derived); a part may prefix its leaves'
flat names (`ssh.user` is `ssh_user`, `--ssh-user`). A value the command line does not give is left
out, so the field's own default applies: each default is written once.
"""

from __future__ import annotations

import dataclasses
import tomllib
import types
import typing
from functools import cache
from pathlib import Path
from typing import Any

import click

from settings import default_of

Path_ = tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class Leaf:
    path: Path_                  # ("workload", "client_settings", "acks")
    field: dataclasses.Field
    type: Any                    # the resolved annotation
    name: str                    # flat: the last step, after its parts' prefixes (ssh_user)


def _is_settings(tp) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


@cache
def leaves(cls: type) -> tuple[Leaf, ...]:
    """Every setting under cls, depth first; nested parts are walked into."""
    found = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if _is_settings(tp):
            prefix = f.metadata.get("prefix", "")
            found += [Leaf((f.name, *leaf.path), leaf.field, leaf.type, prefix + leaf.name)
                      for leaf in leaves(tp)]
        else:
            found.append(Leaf((f.name,), f, tp, f.name))
    names = [leaf.name for leaf in found]
    clashes = sorted({n for n in names if names.count(n) > 1})
    if clashes:
        raise TypeError(f"{cls.__name__}: settings {clashes} appear in two parts; flat names "
                        f"(the command line, keyword arguments) need them unique")
    return tuple(found)


def _by_name(cls: type) -> dict[str, Leaf]:
    return {leaf.name: leaf for leaf in leaves(cls)}


# -- building ------------------------------------------------------------------

def build(cls: type, body: dict, where: str = "config"):
    """cls from a nested mapping (test.json's config, a config file's
    tables); missing keys take their defaults, unknown ones are refused."""
    if not isinstance(body, dict):
        raise ValueError(f"{where}: expected a table of settings, got {body!r}")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: not a setting; known: {', '.join(fields)}")
    values = {}
    for name, value in body.items():
        tp = hints[name]
        if _is_settings(tp) and not isinstance(value, tp):
            values[name] = build(tp, value, f"{where}.{name}")
        else:
            values[name] = _coerce(tp, value)
    return cls(**values)


def _coerce(tp, value):
    """A file's value into the field's type where the file cannot say it
    (a Path, a list given as a tuple, a whole number for a float)."""
    if tp is Path and isinstance(value, str):
        return Path(value)
    if isinstance(value, tuple):
        return list(value)
    if tp is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def from_flat(cls: type, flat: dict, base: dict | None = None):
    """cls from flat names (`partitions=4`) over an optional nested base (a
    config file); a part given whole (`client_settings=ClientSettings()`)
    replaces that part."""
    body = _nested_copy(base or {})
    by_name = _by_name(cls)
    parts = _parts(cls)
    for name, value in flat.items():
        if name in parts:
            _place(body, parts[name], dataclasses.asdict(value)
                   if dataclasses.is_dataclass(value) else value)
        elif name in by_name:
            _place(body, by_name[name].path, value)
        else:
            raise TypeError(f"{name}={value!r}: not a setting of {cls.__name__}; known: "
                            f"{', '.join(sorted(by_name))}")
    return build(cls, body)


def _parts(cls: type, prefix: Path_ = ()) -> dict[str, Path_]:
    found = {}
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        if _is_settings(hints[f.name]):
            found[f.name] = (*prefix, f.name)
            found.update(_parts(hints[f.name], (*prefix, f.name)))
    return found


def _place(body: dict, path: Path_, value) -> None:
    for key in path[:-1]:
        body = body.setdefault(key, {})
    body[path[-1]] = value


def _nested_copy(body: dict) -> dict:
    return {k: _nested_copy(v) if isinstance(v, dict) else v for k, v in body.items()}


def read_config_file(path: Path) -> dict:
    """A config file's settings (TOML): the same fields and tables as
    test.json's `config`."""
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such config file") from None
    except tomllib.TOMLDecodeError as e:
        raise ValueError(f"{path}: not valid TOML: {e}") from None


# -- the command line ----------------------------------------------------------

def click_options(cls: type):
    """A decorator adding one option per command-line setting of cls."""
    def decorate(command):
        for leaf in reversed([leaf for leaf in leaves(cls) if leaf.field.metadata.get("cli",
                                                                                    True)]):
            command = _option(leaf)(command)
        return command
    return decorate


def _option(leaf: Leaf):
    meta = leaf.field.metadata
    flag = meta.get("flag") or "--" + leaf.name.replace("_", "-")
    default = default_of(leaf.field)
    shown = meta.get("default_text") or _show(default)
    help = meta.get("help", "") + (f"  [default: {shown}]" if shown else "")
    kw: dict[str, Any] = {"default": None, "help": help, "metavar": meta.get("metavar")}
    base = _base_type(leaf.type)
    if meta.get("flag_value") is not None:
        return click.option(flag, leaf.name, flag_value=meta["flag_value"], default=None,
                            help=help)
    if base is bool:
        on = "--" + leaf.name.replace("_", "-")
        return click.option(f"{on}/--no-{on[2:]}", leaf.name, **kw)
    if meta.get("multiple"):
        return click.option(flag, leaf.name, multiple=True, **{**kw, "default": ()})
    if meta.get("choices"):
        kw["type"] = click.Choice(meta["choices"])
    elif meta.get("parse"):
        kw["type"] = str            # the field's own parser reads it
    elif base in (int, float):
        kw["type"] = base
    elif base is Path:
        kw["type"] = click.Path(path_type=Path)
    return click.option(flag, leaf.name, **kw)


def _base_type(tp):
    """int for `int | None`; the first member of another union; list for list[str]."""
    if isinstance(tp, types.UnionType) or typing.get_origin(tp) is typing.Union:
        members = [t for t in typing.get_args(tp) if t is not type(None)]
        tp = members[0]
    return typing.get_origin(tp) or tp


def _show(default) -> str:
    if default is None or default == [] or default is dataclasses.MISSING:
        return ""
    if isinstance(default, bool):
        return "on" if default else "off"
    if isinstance(default, list):
        return ",".join(map(str, default))
    return str(default)


def given(cls: type, params: dict, sources: dict) -> dict:
    """The flat settings the command line gave (`sources[name]` is whether
    the user typed it), parsed: comma lists split, a field's own parser."""
    flat = {}
    for leaf in leaves(cls):
        name = leaf.name
        if name not in params or not sources.get(name):
            continue
        value = params[name]
        if leaf.field.metadata.get("comma"):
            value = [item.strip() for item in value.split(",") if item.strip()]
        elif leaf.field.metadata.get("multiple"):
            value = list(value)
        elif leaf.field.metadata.get("parse"):
            value = leaf.field.metadata["parse"](value)
        flat[name] = value
    return flat
