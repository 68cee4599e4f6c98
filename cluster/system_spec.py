"""A system spec: how to run a Kafka-compatible broker on a node, in a
small TOML file (examples/systems/), for `--db command` (cluster/command_db.py).

    name = "Apache Kafka (KRaft, combined mode)"
    port = 9092                        # where clients connect, on every broker node
    data_dir = "data"                  # under the node's workdir; disk faults gate it
    peer = "{node_id}@{address}:9093"  # one item of {peers}, joined by ","
    broker = "kafka"                   # the daemon whose nodes are the brokers
    ready_timeout = 120
    controllers = 0                    # nodes of their own, after the brokers'
    distribution = "kafka"             # kchaos brings Apache Kafka's jars: {dist}

    [[daemon]]
    name = "kafka"
    on = "all"                         # "all", "first", "brokers" or "controllers"
    setup = [["{java}", "-cp", "{dist}/*", "kafka.tools.StorageTool", "format", ...]]
    argv = ["{java}", "-cp", "{dist}/*", "kafka.Kafka", "{workdir}/server.properties"]
    stop_signal = "SIGTERM"
    stop_timeout = 30

    [[file]]                           # written before setup, on the nodes of `on`
    path = "server.properties"
    text = "node.id={node_id}\n{config}\n..."

Nodes: the brokers' first (n1..nN), then `controllers` nodes of their own
that run only the daemons marked `on = "controllers"` (a quorum apart from
the brokers); with none, "brokers" is every node. Every daemon of a node is
killed, paused and resumed together, as a crash or a pause of the machine.

Placeholders, in argv, setup commands, env values and file text:
{node_id} (1, 2, ... in node order), {node_name}, {address}, {port},
{workdir}, {data_dir} (absolute), {peers} (`peer` of each controller node,
or of every node when there are none), {first_address} (the first node's
address), {python} (the node's Python with kchaos, if any),
{replication_factor} and {min_insync_replicas} (3 and 2, or fewer when the
brokers are fewer: for internal topics), {config} (the run's `--config KEY=VALUE` settings, a line each);
with a distribution, {dist} (its directory on the node) and {java} (the
node's Java). A literal brace is written twice.
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
                "first_address", "python", "replication_factor", "min_insync_replicas",
                "config")
# A distribution kchaos fetches and installs on the nodes: its placeholders.
DISTRIBUTIONS = {"kafka": ("dist", "java")}
NODE_SETS = ("all", "first", "brokers", "controllers")


class SpecError(SetupError, ValueError):
    """A system spec that cannot be used: the message names the file, the
    key and how to fix it."""


@dataclass(frozen=True)
class Daemon:
    name: str
    argv: tuple[str, ...]
    on: str = "all"                         # one of NODE_SETS
    setup: tuple[tuple[str, ...], ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    stop_signal: int = signal.SIGTERM
    stop_timeout: float = 30.0


@dataclass(frozen=True)
class SpecFile:
    path: str
    text: str
    on: str = "all"


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
    controllers: int = 0
    distribution: str | None = None
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

    known = {"name", "port", "data_dir", "peer", "broker", "ready_timeout", "daemon", "file",
             "controllers", "distribution"}
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
    files = tuple(SpecFile(str(f.get("path", "")), str(f.get("text", "")),
                           str(f.get("on", SpecFile.on)))
                  for f in _tables(body, "file", bad))
    for f in files:
        if not f.path or PurePosixPath(f.path).is_absolute() or ".." in PurePosixPath(f.path).parts:
            bad("file.path", f"{f.path!r}: a path relative to the node's workdir")
        if f.on not in NODE_SETS:
            bad(f"file {f.path}.on", f"{f.on!r}: one of {', '.join(map(repr, NODE_SETS))}")
    controllers = body.get("controllers", SystemSpec.controllers)
    if not isinstance(controllers, int) or isinstance(controllers, bool) or controllers < 0:
        bad("controllers", f"{controllers!r}: the number of controller nodes (0: none apart)")
    sets = {d.on for d in daemons} | {f.on for f in files}
    if "controllers" in sets and not controllers:
        bad("controllers", "daemons or files are on \"controllers\", but the spec has none: "
            "set controllers = N")
    if controllers and body["broker"] in {d.name for d in daemons if d.on == "controllers"}:
        bad("broker", f"{body['broker']!r} runs on the controller nodes; the broker daemon runs "
            f"on \"brokers\" (or \"all\")")
    distribution = body.get("distribution")
    if distribution is not None and distribution not in DISTRIBUTIONS:
        bad("distribution", f"{distribution!r}: kchaos brings only "
            f"{', '.join(map(repr, DISTRIBUTIONS))}; leave it out and install the system on "
            f"the nodes yourself")
    spec = SystemSpec(name=str(body["name"]), port=body["port"], daemons=daemons,
                      broker=body["broker"],
                      data_dir=str(body.get("data_dir", SystemSpec.data_dir)),
                      peer=str(body.get("peer", SystemSpec.peer)), files=files,
                      ready_timeout=float(body.get("ready_timeout", SystemSpec.ready_timeout)),
                      controllers=controllers, distribution=distribution, source=source)
    known_placeholders = PLACEHOLDERS + DISTRIBUTIONS.get(distribution, ())
    for where, template in templates(spec):
        _check_template(template, known_placeholders,
                        lambda why, where=where: bad(where, why))
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
    if d.get("on", Daemon.on) not in NODE_SETS:
        bad(f"{where}.on", f"{d.get('on')!r}: one of {', '.join(map(repr, NODE_SETS))}")
    try:
        stop = signal.Signals[str(d.get("stop_signal", Daemon.stop_signal.name))]
    except KeyError:
        bad(f"{where}.stop_signal", f"{d.get('stop_signal')!r} is not a signal name (SIGTERM)")
    return Daemon(name=str(d.get("name", f"daemon{i}")), argv=tuple(d["argv"]),
                  on=d.get("on", Daemon.on), setup=tuple(tuple(c) for c in setup),
                  env={str(k): str(v) for k, v in d.get("env", {}).items()},
                  stop_signal=stop,
                  stop_timeout=float(d.get("stop_timeout", Daemon.stop_timeout)))


def templates(spec: SystemSpec):
    """(where, template) of every placeholder-holding string in spec."""
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


def _check_template(template: str, known: tuple[str, ...], bad) -> None:
    try:
        fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as e:
        bad(f"{template!r}: {e} (write a literal brace twice)")
        return
    for name in fields:
        if name not in known:
            bad(f"{template!r}: unknown placeholder {{{name}}}; known: "
                + ", ".join(f"{{{p}}}" for p in known)
                + ("" if name not in {p for ps in DISTRIBUTIONS.values() for p in ps}
                   else f" ({{{name}}} needs distribution = \"kafka\")"))


def fill(template: str, values: dict) -> str:
    return template.format(**values)
