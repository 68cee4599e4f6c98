"""What makes a TestConfig unrunnable, as (field, why) pairs: the first is
what `validate` raises, naming the field, its value and the fix. Every
entry point (`kchaos run`, the pytest plugin, `run_test`) validates before
anything starts."""

from __future__ import annotations

import os
from pathlib import Path

from kchaos.config import BACKENDS, DBS, TestConfig
from kchaos.options import leaves
from nemesis.schedule import DISK_KINDS
from nemesis.scripts import SCRIPTS

NETWORK_FAULTS = frozenset({"partition", "packet-loss"})
PROCESS_FAULTS = frozenset({"pause", "kill", "restart-all", "failover"})


def validate(config: TestConfig) -> None:
    """ValueError naming the first problem's field, its value and the fix."""
    found = problems(config)
    if found:
        name, why = found[0]
        raise ValueError(f"{name}={_value(config, name)!r}: {why}")


def _value(config: TestConfig, name: str):
    """The setting a flat name (the command line's) names, in its part."""
    path = next(leaf.path for leaf in leaves(TestConfig) if leaf.name == name)
    value = config
    for step in path:
        value = getattr(value, step)
    return value


def problems(config: TestConfig) -> list[tuple[str, str]]:
    # The nodes are counted from the system spec: only once it is known good.
    return _db(config) or [*_nodes(config), *config.workload.problems(), *_phases(config),
                           *_nemesis(config)]


def _db(config: TestConfig) -> list[tuple[str, str]]:
    found = []
    if config.db not in DBS:
        found.append(("db", f"choose one of {', '.join(DBS)}"))
    if config.db == "external" and not config.bootstrap:
        found.append(("bootstrap", "--db external needs --bootstrap HOST:PORT[,HOST:PORT...]"))
    if config.db != "external" and config.bootstrap:
        found.append(("bootstrap", "kchaos starts the cluster itself; use --db external to "
                      "test a cluster at --bootstrap"))
    if config.db == "command":
        if not config.system:
            found.append(("system", "--db command needs --system FILE.toml, the spec of how "
                          "to run the broker (examples/systems/)"))
        elif not Path(config.system).is_file():
            found.append(("system", "no such file: pass a system spec (examples/systems/)"))
    elif config.system:
        found.append(("system", "a system spec is for --db command"))
    for name in ("broker_process", "broker_start"):
        if getattr(config, name) and config.db != "external":
            found.append((name, "is for --db external; kchaos knows the processes of the "
                          "systems it starts"))
    if config.broker_start and not config.broker_process:
        found.append(("broker_start", "restarts a killed broker: pass --broker-process too"))
    if config.bugs and config.db != "reference":
        found.append(("bugs", "bug switches are the reference broker's (--db reference)"))
    if config.db == "reference":
        found += _reference(config)
    if config.broker_config and config.db == "external":
        found.append(("broker_config", "an external cluster's settings are not kchaos's to "
                      "set: drop --config"))
    if config.db in ("kafka", "command") and (config.db == "kafka" or config.system
                                              and Path(config.system).is_file()):
        found += _spec(config)
    return found


def _reference(config: TestConfig) -> list[tuple[str, str]]:
    """The broker's own parsers, before any node starts: an unknown switch
    or setting would otherwise stop every broker at its start."""
    from reference_broker.bugs import UnknownBug, parse_bugs
    from reference_broker.config import parse_settings
    found = []
    try:
        parse_bugs(config.bugs)
    except UnknownBug as e:
        found.append(("bugs", str(e)))
    try:
        parse_settings(config.broker_config)
    except ValueError as e:
        found.append(("broker_config", str(e)))
    return found


def _spec(config: TestConfig) -> list[tuple[str, str]]:
    from cluster.kafka.dist import KafkaDistError, check_version
    from cluster.system_spec import SpecError
    try:
        spec = config.system_spec()
    except SpecError as e:
        return [("system", str(e))]
    found = []
    uses_config = any("{config}" in f.text for f in spec.files)
    if config.broker_config and not uses_config:
        found.append(("broker_config", f"{spec.source} has no {{config}} in its files, so "
                      f"--config would change nothing: add it to the broker's config file"))
    bad = [item for item in config.broker_config if "=" not in item]
    if bad:
        found.append(("broker_config", f"{bad[0]!r}: write KEY=VALUE"))
    if spec.distribution == "kafka":
        try:
            check_version(config.kafka_version)
        except KafkaDistError as e:
            found.append(("kafka_version", str(e).split(": ", 1)[1]))
    return found


def _nodes(config: TestConfig) -> list[tuple[str, str]]:
    found = []
    backend = config.node_backend()
    if backend not in BACKENDS:
        return [("backend", f"choose one of {', '.join(BACKENDS)}")]
    hosts = isinstance(config.nodes, list)
    if backend == "ssh" and not hosts:
        found.append(("nodes", "the ssh backend needs the hosts: --nodes host1,host2,..."))
    if backend == "ssh" and config.ssh.key_file_problem():
        found.append(("ssh_key_file", config.ssh.key_file_problem()))
    if backend != "ssh" and hosts:
        found.append(("nodes", f"hosts are for --backend ssh; the {backend} backend makes "
                      f"its nodes: pass a count"))
    if not hosts and config.nodes < 1:
        found.append(("nodes", "must be at least 1"))
    if config.docker_containers and backend != "docker":
        found.append(("docker_containers", "containers are docker nodes: drop --backend "
                      f"{backend}"))
    if config.docker_containers and config.db != "external":
        found.append(("docker_containers", "running containers are a cluster that is already "
                      "running: use --db external --bootstrap ..."))
    if config.db == "external" and backend == "docker" and not config.docker_containers:
        found.append(("backend", "--db external on docker needs the cluster's containers: "
                      "--docker-containers c1,c2,..."))
    rf, count = config.workload.replication_factor, config.broker_count()
    if config.db != "external" and rf > count:
        found.append(("replication_factor", f"more than the {count} brokers; lower it or "
                      f"add nodes"))
    if config.controller_node and config.db not in ("reference", "kafka"):
        found.append(("controller_node", "places the controllers of --db reference and --db "
                      f"kafka; --db {config.db} runs no controller of kchaos's"
                      + (" (a spec says its own: controllers = N)"
                         if config.db == "command" else "")))
    if config.controller_node and count < 1:
        found.append(("controller_node", "needs a node for a broker besides the controller's"))
    return found


def _phases(config: TestConfig) -> list[tuple[str, str]]:
    from checkers.result import ANOMALY_TYPES
    found = [(name, "must be positive") for name in ("time_limit", "final_time_limit")
             if not getattr(config, name) > 0]
    found += [("allow", f"{t!r} is not an anomaly type; choose from {', '.join(ANOMALY_TYPES)}")
              for t in config.allow if t not in ANOMALY_TYPES][:1]
    if config.max_examples < 0:
        found.append(("max_examples", "must not be negative"))
    if config.recovery_time < 0:
        found.append(("recovery_time", "must not be negative"))
    return found


def _nemesis(config: TestConfig) -> list[tuple[str, str]]:
    from nemesis.schedule import check, plan
    try:
        check(config.nemesis, config.fault_targets, config.nemesis_interval)
    except ValueError as e:
        return [("nemesis", str(e))]
    found = []
    if config.nemesis and not plan(config.nemesis, interval=config.nemesis_interval,
                                   duration=config.time_limit, seed=config.seed,
                                   targets=config.fault_targets):
        # The first fault starts one interval in: a run shorter than that
        # would inject nothing, and its verdict would be about no fault.
        found.append(("nemesis", f"{','.join(config.nemesis)} asked for, but no fault "
                      f"starts within --time-limit {config.time_limit:g} s (the first one "
                      f"starts after --nemesis-interval {config.nemesis_interval:g} s): raise "
                      f"--time-limit or lower --nemesis-interval"))
    if config.nemesis and config.nemesis_script:
        found.append(("nemesis_script", "a script replaces the --nemesis schedule; pass one "
                      "of them"))
    if config.nemesis_script is not None:
        if config.nemesis_script not in SCRIPTS:
            found.append(("nemesis_script", f"choose one of {', '.join(sorted(SCRIPTS))}"))
    kinds = set(config.nemesis)
    if kinds and not config.has_nodes():
        found.append(("nemesis", "kchaos cannot reach the nodes of a cluster it does not "
                      "run: name them (--docker-containers c1,c2,... or --nodes HOSTS) with "
                      "--broker-process, or drop --nemesis"))
    elif config.db == "external":
        if kinds & PROCESS_FAULTS and not config.broker_process \
                and not config.docker_containers:
            found.append(("nemesis", "pause and kill faults on an external cluster's hosts "
                          "need --broker-process PATTERN (and --broker-start CMD to restart)"))
        if kinds & DISK_KINDS:
            found.append(("nemesis", "disk faults put a disk gate under the broker's data "
                          "before it starts: use --db reference or --db command"))
    backend = config.node_backend()
    local_loopback = backend == "local" and (
        config.use_namespaces is False or (config.use_namespaces is None and os.geteuid() != 0))
    if kinds & NETWORK_FAULTS and local_loopback and config.db != "external":
        found.append(("nemesis", f"{', '.join(sorted(kinds & NETWORK_FAULTS))} need each node "
                      "in a network namespace of its own: run as root, without "
                      "--no-namespaces"))
    if config.disk_gate() and backend == "local" and os.geteuid() != 0:
        found.append(("nemesis", "disk faults mount a FUSE filesystem under each node: run "
                      "as root"))
    return found
