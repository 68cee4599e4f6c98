"""A system spec: how to run a Kafka-compatible broker on a node, in a
small TOML file (examples/systems/), for `--db command` (cluster/command_db.py).

    name = "Apache Kafka 3.9 (KRaft, combined mode)"
    port = 9092                        # where clients connect, on every node
    data_dir = "data"                  # under the node's workdir; disk faults gate it
    peer = "{node_id}@{address}:9093"  # one item of {peers}, joined by ","
    broker = "kafka"                   # the daemon that pause and kill hit
    ready_timeout = 120

    [[daemon]]
    name = "kafka"
    on = "all"                         # "all" nodes, or "first"
    setup = [["kafka-storage.sh", "format", ...]]   # before each start from empty data
    argv = ["kafka-server-start.sh", "{workdir}/server.properties"]
    stop_signal = "SIGTERM"
    stop_timeout = 30

    [[file]]                           # written on every node before setup
    path = "server.properties"
    text = "node.id={node_id}\n..."

Placeholders, in argv, setup commands, env values and file text:
{node_id} (1, 2, ... in node order), {node_name}, {address}, {port},
{workdir}, {data_dir} (absolute), {peers}, {first_address} (the first
node's address), {python} (the node's Python with kchaos, if any). A
literal brace is written twice.
"""

from __future__ import annotations

import signal
import string
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from cluster.daemon_db import READY_TIMEOUT
from cluster.node import SetupError

PLACEHOLDERS = ("node_id", "node_name", "address", "port", "workdir", "data_dir", "peers",
                "first_address", "python")


class SpecError(SetupError, ValueError):
    """A system spec that cannot be used: the message names the file, the
    key and how to fix it."""


@dataclass(frozen=True)
class Daemon:
    name: str
    argv: tuple[str, ...]
    on: str = "all"                         # "all" | "first"
    setup: tuple[tuple[str, ...], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    stop_signal: int = signal.SIGTERM
    stop_timeout: float = 30.0


@dataclass(frozen=True)
class SpecFile:
    path: str
    text: str


@dataclass(frozen=True)
class SystemSpec:
    name: str
    port: int
    daemons: tuple[Daemon, ...]
    broker: str
    data_dir: str = "data"
    peer: str = "{address}:{port}"
    files: tuple[SpecFile, ...] = ()
    ready_timeout: float = READY_TIMEOUT
    source: str = "<spec>"

    def daemon(self, name: str) -> Daemon:
        return next(d for d in self.daemons if d.name == name)


def load_spec(path: str | Path) -> SystemSpec:
    path = Path(path)
    try:
        body = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise SpecError(f"{path}: no such system spec; see examples/systems/") from None
    except tomllib.TOMLDecodeError as e:
        raise SpecError(f"{path}: not valid TOML: {e}") from None
    return parse_spec(body, str(path))


def parse_spec(body: dict, source: str = "<spec>") -> SystemSpec:
    def bad(key: str, why: str):
        raise SpecError(f"{source}: {key}: {why}")

    known = {"name", "port", "data_dir", "peer", "broker", "ready_timeout", "daemon", "file"}
    for key in sorted(set(body) - known):
        bad(key, f"not a spec key; known: {', '.join(sorted(known))}")
    for key in ("name", "port", "daemon", "broker"):
        if key not in body:
            bad(key, "missing")
    if not isinstance(body["port"], int) or not 0 < body["port"] < 65536:
        bad("port", f"{body['port']!r} is not a TCP port")
    daemons = tuple(_daemon(d, i, bad) for i, d in enumerate(_tables(body, "daemon", bad)))
    names = [d.name for d in daemons]
    if len(set(names)) != len(names):
        bad("daemon", f"names {names} repeat")
    if body["broker"] not in names:
        bad("broker", f"{body['broker']!r} is not one of the daemons {names}")
    files = tuple(SpecFile(str(f.get("path", "")), str(f.get("text", "")))
                  for f in _tables(body, "file", bad))
    for f in files:
        if not f.path or PurePosixPath(f.path).is_absolute() or ".." in PurePosixPath(f.path).parts:
            bad("file.path", f"{f.path!r}: a path relative to the node's workdir")
    spec = SystemSpec(name=str(body["name"]), port=body["port"], daemons=daemons,
                      broker=body["broker"],
                      data_dir=str(body.get("data_dir", SystemSpec.data_dir)),
                      peer=str(body.get("peer", SystemSpec.peer)), files=files,
                      ready_timeout=float(body.get("ready_timeout", SystemSpec.ready_timeout)),
                      source=source)
    for where, template in _templates(spec):
        _check_template(template, lambda why, where=where: bad(where, why))
    return spec


def _tables(body: dict, key: str, bad) -> list[dict]:
    value = body.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        bad(key, f"write it as [[{key}]] tables")
    return value


def _daemon(d: dict, i: int, bad) -> Daemon:
    where = f"daemon[{i}]"
    known = {"name", "argv", "on", "setup", "env", "stop_signal", "stop_timeout"}
    for key in sorted(set(d) - known):
        bad(f"{where}.{key}", f"not a daemon key; known: {', '.join(sorted(known))}")
    if not isinstance(d.get("argv"), list) or not d["argv"] or \
            not all(isinstance(a, str) for a in d["argv"]):
        bad(f"{where}.argv", "a list of strings (argv, never a shell line)")
    setup = d.get("setup", [])
    if not all(isinstance(c, list) and c and all(isinstance(a, str) for a in c) for c in setup):
        bad(f"{where}.setup", "a list of argv lists")
    if d.get("on", Daemon.on) not in ("all", "first"):
        bad(f"{where}.on", "\"all\" or \"first\"")
    try:
        stop = signal.Signals[str(d.get("stop_signal", Daemon.stop_signal.name))]
    except KeyError:
        bad(f"{where}.stop_signal", f"{d.get('stop_signal')!r} is not a signal name (SIGTERM)")
    return Daemon(name=str(d.get("name", f"daemon{i}")), argv=tuple(d["argv"]),
                  on=d.get("on", Daemon.on), setup=tuple(tuple(c) for c in setup),
                  env={str(k): str(v) for k, v in d.get("env", {}).items()},
                  stop_signal=stop,
                  stop_timeout=float(d.get("stop_timeout", Daemon.stop_timeout)))


def _templates(spec: SystemSpec):
    yield "peer", spec.peer
    for i, d in enumerate(spec.daemons):
        for a in d.argv:
            yield f"daemon[{i}].argv", a
        for c in d.setup:
            for a in c:
                yield f"daemon[{i}].setup", a
        for v in d.env.values():
            yield f"daemon[{i}].env", v
    for f in spec.files:
        yield f"file {f.path}", f.text


def _check_template(template: str, bad) -> None:
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as e:
        bad(f"{template!r}: {e} (write a literal brace twice)")
        return
    for name in fields:
        if name not in PLACEHOLDERS:
            bad(f"{template!r}: unknown placeholder {{{name}}}; known: "
                + ", ".join(f"{{{p}}}" for p in PLACEHOLDERS))


def fill(template: str, values: dict) -> str:
    return template.format(**values)
