"""A validation recipe: for one bug switch of docs/broker.md, a kchaos test
(config, nemesis script, time limit) that shows the switch's anomaly when
it is on and is valid when it is off.

A recipe is plain data: `config` holds TestConfig fields (the switch
itself, the seed and the store are the validator's to set), and `script`
names a nemesis script (nemesis/scripts/) that drives the faults by hand —
recipes need their faults at a moment the cluster's state decides (the ISR
has shrunk to the leader), which a timed schedule cannot promise.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Recipe:
    switch: str                             # the bug switch (reference_broker/bugs.py)
    expected: frozenset[str]                # any of these anomaly types counts as found
    config: dict                            # TestConfig fields
    script: str | None = None               # nemesis/scripts/'s name; None: config's schedule
    attempts: int = 3                       # seeded runs allowed to find it
    fast: bool = False                      # in `make test`'s subset
    allowed: frozenset[str] = field(default_factory=frozenset)   # designed-in here
    # A client error the switch shows where no anomaly type (docs/anomalies.md)
    # applies (a client that stops rather than misbehaves): found in an
    # operation's error, it counts as detection, and a clean run must not show it.
    error: str | None = None
    why: str = ""                           # how the script triggers the bug
