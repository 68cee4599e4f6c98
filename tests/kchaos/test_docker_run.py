"""`kchaos run` on docker nodes: every fault on the reference broker,
described by its system spec (`--db command`), is valid; a bug switch's
recipe is detected on the reference broker there (`--db reference`); Apache
Kafka runs there (`--db kafka`); and a compose cluster kchaos did not start
is hurt through its containers (`--db external --docker-containers`)."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
from pathlib import Path

import pytest

from kchaos.config import TestConfig
from kchaos.progress import Progress
from validation.recipes import RECIPES
from kchaos.run import run_and_check
from validation.matrix import recipe_config
from nemesis.schedule import DEFAULT_MIX
from tests.docker_support import DOCKER_MARKS, compose_cluster
from tests.kafka_support import kafka_spec_with_local_jvm_options
from tests.kchaos.plans import (
    SLACK, applied, every_default_kind, failed, first_seed, no_false_alarm,
    one_kill_and_a_partition, starts, verbs)

pytestmark = [*DOCKER_MARKS, pytest.mark.spark, pytest.mark.slow, pytest.mark.root,
              pytest.mark.skipif(os.geteuid() != 0, reason="docker nodes need root here")]

SPEC = Path(__file__).resolve().parents[2] / "examples" / "systems" / "reference.toml"
ROLES = {"leader", "follower", "coordinator", "controller"}     # one node each


def check_faults(run_dir: Path, config: TestConfig, within: float | None = None) -> None:
    """Every start the seeded plan made in its first `within` seconds (by
    default, up to SLACK s before the main phase's end) was applied (its
    completion is info)."""
    planned = verbs(starts(config, config.time_limit - SLACK if within is None else within))
    assert planned and planned <= applied(run_dir), (sorted(planned), sorted(applied(run_dir)))


def roles(faults) -> set[str]:
    """The roles a plan's pauses and kills target."""
    return {f.get("targets") for f in faults if f["fault"] in ("pause", "kill")} & ROLES


def role_targeted(run_dir: Path) -> dict[str, list[list[str]]]:
    """The nodes each role-targeted pause or kill hit, by role."""
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    hit: dict[str, list[list[str]]] = {}
    for e in events:
        targets = e["value"].get("targets") if e["process"] == -1 else None
        # A failover's pause and kill name their nodes (a list), not a role.
        if e["type"] == "info" and e["f"] in ("pause", "kill") and isinstance(targets, str) \
                and targets in ROLES:
            hit.setdefault(targets, []).append(e["value"]["nodes"])
    return hit


def test_apache_kafka_on_docker_nodes(tmp_path, spark):
    """Kafka's shipped spec (`--db kafka`'s, with the tests' C1 option:
    tests/kafka_support.py) there: the node image's Java runtime, Kafka's
    jars copied into each container, partitions and kills applied and
    healed, and no anomaly (valid alone; under a loaded suite the final
    reads once recorded no partition end, so 6 unseen sends stayed
    undecided: unknown). Disk faults on Kafka are test_kafka_run.py's, and
    the gate in containers test_every_fault_on_a_described_system_on_docker_nodes's:
    with disk errors on every node Kafka halts (its log directory failed)
    and the heal that restarts three JVMs in containers took 72 s of this
    test's 310."""
    settings = dict(time_limit=30, nemesis=["partition", "kill"], nemesis_interval=6)
    seed = one_kill_and_a_partition(**settings)
    # A subnet no other test uses: a run's setup removes what runs under its
    # prefix, and tests of this module may run at the same time (xdist).
    config = TestConfig.build(backend="docker", db="command", seed=seed,
                              system=str(kafka_spec_with_local_jvm_options(tmp_path)),
                              subnet="198.18.25.0/24",
                              broker_config=["min.insync.replicas=2"], recovery_time=3,
                              final_time_limit=90, store=tmp_path, **settings)
    result = run_and_check(config, spark, progress=Progress.quiet())
    assert result.valid is not False and not result.counts, (result.counts, result.run_dir)
    check_faults(result.run_dir, config)
    assert failed(result.run_dir) == []
    assert result.outcome.heal_problems == [] and result.outcome.node_failures == []
    assert "Kafka Server started" in (result.run_dir / "nodes" / "n1" / "kafka.log").read_text()


def test_a_bug_switch_is_detected_on_docker_nodes(tmp_path, spark):
    recipe = RECIPES["acks-all-ignores-min-isr"]
    # Pausing and killing containers is slower than processes: the main
    # phase is 15 s longer than the recipe's, for sends after the failover.
    on = recipe_config(recipe, on=True, seed=1, store=tmp_path)
    config = dataclasses.replace(on, backend="docker", subnet="198.18.22.0/24",
                                 time_limit=on.time_limit + 15)
    result = run_and_check(config, spark, progress=Progress.quiet())
    assert set(t for t, n in result.counts.items() if n) & set(recipe.expected), \
        (result.counts, result.run_dir)


def test_every_fault_on_a_described_system_on_docker_nodes(tmp_path, spark):
    """The reference broker described by its system spec (`--db command`)
    on docker nodes takes every kind of the default schedule (restart-all
    is a kill of all; failover; disk errors and a stall through the gate
    in each container) and role targets: the controller (on n1) is paused
    or killed, and so is one other role's node. None fails, and the run is
    valid. The starts of the first WITHIN s are checked, and the main phase
    is 25 s longer: faults run in turn, and on a loaded machine each
    restart takes longer (a partition planned at 17 s once came after 35 s,
    when the main phase had ended)."""
    within = 20.0
    settings = dict(time_limit=within + 25, nemesis_interval=3, nemesis=DEFAULT_MIX)
    seed = first_seed(lambda faults: every_default_kind(faults)
                      and "controller" in roles(faults) and roles(faults) - {"controller"},
                      within=within, **settings)
    config = TestConfig.build(backend="docker", db="command", system=str(SPEC), seed=seed,
                              subnet="198.18.23.0/24", recovery_time=3, final_time_limit=90,
                              store=tmp_path, **settings)
    result = run_and_check(config, spark, progress=Progress.quiet())
    no_false_alarm(result)
    check_faults(result.run_dir, config, within)
    assert failed(result.run_dir) == []
    hit = role_targeted(result.run_dir)
    assert hit["controller"] and all(nodes == ["n1"] for nodes in hit["controller"]), hit
    assert set(hit) - {"controller"}, hit
    assert all(len(nodes) == 1 for nodes in itertools.chain(*hit.values())), hit
    assert result.outcome.heal_problems == []
    assert (result.run_dir / "nodes" / "n1" / "container.log").exists()


def test_a_compose_cluster_takes_kills_and_partitions(tmp_path, spark):
    with compose_cluster() as cluster:
        config = TestConfig.build(db="external", bootstrap=cluster.bootstrap,
                                  docker_containers=list(cluster.containers.values()),
                                  nemesis=["partition", "kill", "pause"], nemesis_interval=4,
                                  seed=24, time_limit=30, recovery_time=5, final_time_limit=90,
                                  store=tmp_path)
        result = run_and_check(config, spark, progress=Progress.quiet())
    no_false_alarm(result)
    check_faults(result.run_dir, config)
