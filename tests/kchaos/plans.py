"""Seeds for end-to-end fault tests: the schedule's mixes vary by period
(nemesis/schedule.py), so a test that needs certain faults asks for the
first seed whose plan has them, rather than pinning one."""

from __future__ import annotations

import json
from pathlib import Path

from checkers.group_offsets import STALE
from kchaos.config import TestConfig
from kchaos.run import nemesis_plan
from nemesis.core import TARGETS
from nemesis.schedule import DEFAULT_MIX, Single, make_move


# A test that checks every planned start was applied checks only the starts
# this many seconds before its main phase ends. The schedule runs late when a
# fault is slow to apply: a kill or restart of every node takes seconds of
# `docker exec` under a loaded suite, and the starts it pushes past the end of
# the main phase are never made (nemesis.schedule.scheduled).
SLACK = 15.0


def starts(config: TestConfig, within: float | None = None) -> list[dict]:
    """The plan's started faults (their descriptions), only those planned at
    most `within` seconds into the main phase when it is given."""
    return [s.fault for s in nemesis_plan(config)
            if s.action == "start" and (within is None or s.at <= within)]


def first_seed(wanted, *, within: float | None = None, **settings) -> int:
    """The first seed whose plan's started faults (their descriptions; with
    `within`, those of its first `within` seconds) satisfy `wanted`."""
    for seed in range(1, 2000):
        if wanted(starts(TestConfig.build(seed=seed, **settings), within)):
            return seed
    raise AssertionError(f"no seed below 2000 plans what is wanted with {settings}")


# The targets that hit one node of three: all but those that hit two or more.
ONE_NODE = set(TARGETS) - {"majority", "all", "leader-and-follower"}


def one_kill_and_a_partition(**settings) -> int:
    """The first seed whose plan partitions and kills, both in its first
    time_limit - SLACK s, and kills one node once in all. Each restart of an
    Apache Kafka broker is a JVM's start: a plan that killed every node in
    turn cost an ssh test 50 s of restarts under a loaded suite."""
    within = settings["time_limit"] - SLACK
    for seed in range(1, 2000):
        config = TestConfig.build(seed=seed, **settings)
        kills = [f for f in starts(config) if f["fault"] == "kill"]
        if len(kills) == 1 and kills[0].get("targets") in ONE_NODE \
                and {"start-partition", "kill"} <= verbs(starts(config, within)):
            return seed
    raise AssertionError(f"no seed below 2000 kills one node once with {settings}")


def every_default_kind(faults) -> bool:
    """Every kind of the default mix (nemesis.schedule.DEFAULT_MIX) starts:
    restart-all is planned as a kill whose targets are all nodes."""
    kinds = {f["fault"] for f in faults}
    restart_all = "all" in {f.get("targets") for f in faults if f["fault"] == "kill"}
    return set(DEFAULT_MIX) - {"restart-all"} <= kinds and restart_all


def verbs(faults) -> set[str]:
    """The start verbs of fault descriptions (start-partition, stall-disk, ...)."""
    return {verb for f in faults for verb in make_move(f).verbs}


def invocations(step) -> list[str]:
    """The nemesis's invocations for one plan step, in order: a failover's
    start is a pause, a kill and a resume, its stop a restart
    (nemesis/failover.py)."""
    move = make_move(step.fault)
    if isinstance(move, Single):
        return [move.fault.start_f if step.action == "start" else move.fault.stop_f]
    return ["pause", "kill", "resume"] if step.action == "start" else ["restart"]


def nemesis_completions(run_dir: Path) -> list[dict]:
    """The nemesis's completions (info or fail) in the run's history."""
    events = [json.loads(line) for line in (run_dir / "history.jsonl").read_text().splitlines()]
    return [e for e in events if e["process"] == -1 and e["type"] in ("info", "fail")]


def applied(run_dir: Path) -> set[str]:
    """The fault verbs whose start the nemesis completed (info, not fail)."""
    return {e["f"] for e in nemesis_completions(run_dir) if e["type"] == "info"}


def failed(run_dir: Path) -> list[str]:
    """Each nemesis op that failed, with its error."""
    return [f"{e['f']}: {e.get('error')}" for e in nemesis_completions(run_dir)
            if e["type"] == "fail"]


def no_false_alarm(result) -> None:
    """A faulted run on a correct broker found nothing wrong: `valid`, or
    `unknown` only because a committed-offset answer came while a partition,
    packet loss or pause could have left a replaced coordinator answering from
    its cache (checkers/group_offsets.py UNSURE_FAULTS) — Kafka's coordinator
    does the same, so the run cannot tell. Any other unknown is not excused."""
    unknown = result.suite.result.unknown
    # What held a stuck last stable offset, when the final phase asked:
    # the run directory is gone with the CI machine, this message is not.
    held = (result.outcome.final or {}).get("open_transactions")
    assert result.valid is True or (result.valid == "unknown" and set(unknown) == {STALE}), \
        (result.valid, result.counts, unknown, result.run_dir, held)
