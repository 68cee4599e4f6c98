"""Validation recipes: for every bug switch of docs/broker.md, a kchaos test
(config, nemesis script, time limit) that shows the switch's anomaly when
it is on and is valid when it is off — the evidence that kchaos finds each
historical bug and raises no false alarm on the correct broker.

A recipe is plain data plus one script: `config` holds TestConfig fields
(the switch itself, the seed and the store are the validator's to set),
`script` is a nemesis script (nemesis/runner.py) that drives the faults by
hand — recipes need their faults at a moment the cluster's state decides
(the ISR has shrunk to the leader), which a timed schedule cannot promise.
`kchaos validate` (kchaos/validate.py) runs them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

# Brokers that notice a dead peer within seconds: fenced by the controller,
# their leaderships moved and their ISR places dropped within 3 s (the
# recipes' and the end-to-end tests' cluster).
FAST_BROKERS = ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
                "replica.lag.time.max.ms=3000", "group.initial.rebalance.delay.ms=0"]


@dataclass(frozen=True)
class Recipe:
    switch: str                             # the bug switch (reference_broker/bugs.py)
    expected: frozenset[str]                # any of these anomaly types counts as found
    config: dict                            # TestConfig fields
    script: Callable | None = None          # script(nemesis); None: config's schedule
    attempts: int = 3                       # seeded runs allowed to find it
    disk: bool = False                      # the data directories on disk gates
    fast: bool = False                      # in `make test`'s subset
    allowed: frozenset[str] = field(default_factory=frozenset)   # designed-in here
    # A client error the switch shows where no anomaly type (docs/anomalies.md)
    # applies (a client that stops rather than misbehaves): found in an
    # operation's error, it counts as detection, and a clean run must not show it.
    error: str | None = None
    why: str = ""                           # how the script triggers the bug


def _all() -> list[Recipe]:
    from kchaos.recipes import clients, replication
    return [*replication.RECIPES, *clients.RECIPES]


RECIPES: dict[str, Recipe] = {recipe.switch: recipe for recipe in _all()}
# TestConfig.nemesis_script names a recipe's script by its switch.
SCRIPTS: dict[str, Callable] = {name: r.script for name, r in RECIPES.items() if r.script}
DISK_SCRIPTS: frozenset[str] = frozenset(name for name, r in RECIPES.items() if r.disk)
