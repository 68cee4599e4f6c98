"""Seeds for end-to-end fault tests: the schedule's mixes vary by period
(nemesis/schedule.py), so a test that needs certain faults asks for the
first seed whose plan has them, rather than pinning one."""

from __future__ import annotations

from kchaos.config import TestConfig
from kchaos.run import nemesis_plan
from nemesis.schedule import DEFAULT_MIX, make_fault


def first_seed(wanted, **settings) -> int:
    """The first seed whose plan's started faults (their descriptions)
    satisfy `wanted`."""
    for seed in range(1, 500):
        steps = nemesis_plan(TestConfig.build(seed=seed, **settings))
        if wanted([s.fault for s in steps if s.action == "start"]):
            return seed
    raise AssertionError(f"no seed below 500 plans what is wanted with {settings}")


def every_default_kind(faults) -> bool:
    """Every kind of the default mix (nemesis.schedule.DEFAULT_MIX) starts:
    restart-all is planned as a kill whose targets are all nodes."""
    kinds = {f["fault"] for f in faults}
    restart_all = "all" in {f.get("targets") for f in faults if f["fault"] == "kill"}
    return set(DEFAULT_MIX) - {"restart-all"} <= kinds and restart_all


def verbs(faults) -> set[str]:
    """The start verbs of fault descriptions (start-partition, stall-disk, ...)."""
    return {make_fault(f).start_f for f in faults}
