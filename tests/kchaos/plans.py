"""Seeds for end-to-end fault tests: the schedule's mixes vary by period
(nemesis/schedule.py), so a test that needs certain faults asks for the
first seed whose plan has them, rather than pinning one."""

from __future__ import annotations

from kchaos.config import TestConfig
from kchaos.run import nemesis_plan
from nemesis.schedule import make_fault


def first_seed(wanted, **settings) -> int:
    """The first seed whose plan's started faults (their descriptions)
    satisfy `wanted`."""
    for seed in range(1, 500):
        steps = nemesis_plan(TestConfig.build(seed=seed, **settings))
        if wanted([s.fault for s in steps if s.action == "start"]):
            return seed
    raise AssertionError(f"no seed below 500 plans what is wanted with {settings}")


def verbs(faults) -> set[str]:
    """The start verbs of fault descriptions (start-partition, stall-disk, ...)."""
    return {make_fault(f).start_f for f in faults}
