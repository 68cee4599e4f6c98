"""Seeded fault schedules: `--nemesis partition,pause,kill,disk,...`.

`plan` is a pure function of (nemeses, interval, targets, exclusivity,
seed, duration): a list of steps — start fault #i described as plain data
at time t, stop fault #i at time u — so the same seed gives the same
schedule, and the plan is written into `test.json` before the run starts.
What the cluster's state decides (who leads when `leader` is the target)
is resolved when a step runs, and the history records what was done.

Faults of different kinds overlap unless `exclusive`; at most one fault
of each kind is active at a time. `lose-unsynced` disk faults are always
alone: losing the unsynced writes of a node that is, at that moment, the
only in-sync replica loses acknowledged records even in Kafka without
bugs (it does not fsync; KIP-966's eligible leader replicas address it),
and a schedule should find bugs, not that design. So a lose-unsynced fault
starts only after a quiet interval with no other fault, hits one node, and
nothing else starts until an interval after it is over.

`power-loss` (opt-in, never in a default mix) is that fault on a majority
or on every node at once: a correlated power loss. It loses acknowledged
records on a correct Kafka too, which acknowledges before fsync, unless
the topic syncs each write (`flush.messages=1`); a run that includes it
tests that setting, not the broker's replication.

`failover` (nemesis/failover.py) pauses a leader's or coordinator's
followers and kills it while they lag. It pauses and kills, so it never
overlaps a pause, kill or restart-all fault: one fault's resume or restart
would end another's early.

The mix varies with time, as Bufstream's Jepsen suite runs it: the run is
cut into periods of PERIOD intervals, each with its own random subset of
the kinds asked for, and about a quarter of the periods (never the first)
have no fault at all, so recovery gets tested as much as failure.
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass
from typing import Protocol

from nemesis.core import TARGETS, Fault

NEMESES = ("partition", "pause", "kill", "restart-all", "disk", "packet-loss", "failover",
           "power-loss")
OPT_IN = frozenset({"power-loss"})                  # never in a default mix
DEFAULT_MIX = tuple(n for n in NEMESES if n not in OPT_IN)   # the soak's, --generic's
DISK_KINDS = frozenset({"disk", "power-loss"})     # their brokers' data on disk gates
PERIOD = 4              # intervals per period of one fault mix
QUIET_SHARE = 0.25      # the share of periods with no fault
PARTITION_KINDS = ("halves", "random-halves", "isolate-one", "isolate-leader",
                   "majorities-ring", "bridge", "one-way")
DISK_MODES = ("stall", "errors", "lose-unsynced")
LOSS_PROBABILITIES = (0.1, 0.2, 0.3, 0.5)
HOLDS = (1.0, 2.5)      # a failover's pause, s: below Kafka's and the stress profile's lag limit
# Kinds that never overlap, because they act on the same processes.
CONFLICTS = {"failover": frozenset({"pause", "kill", "restart-all"})}


def _conflicts(name: str) -> set[str]:
    return {name, *CONFLICTS.get(name, ()), *(k for k, v in CONFLICTS.items() if name in v)}


@dataclass(frozen=True)
class Step:
    at: float               # seconds after the main phase started
    action: str             # start | stop
    id: int                 # which fault (a start and its stop share it)
    fault: dict             # make_fault's description

    def to_json(self) -> dict:
        return asdict(self)


def plan(nemeses: list[str], *, interval: float, duration: float, seed: int,
         targets: list[str] = TARGETS, exclusive: bool = False) -> list[Step]:
    """The schedule's steps in time order. The first fault starts after
    one interval of undisturbed workload; faults last 0.5–1.5 intervals
    and start 0.5–1.5 intervals apart."""
    check(nemeses, targets, interval)
    rng = random.Random(f"nemesis-{seed}")
    mixes = _mixes(nemeses, rng, int(duration // (PERIOD * interval)) + 1)
    steps: list[Step] = []
    busy_until: dict[str, float] = {}       # kind → when its active fault stops
    t, quiet_from = interval, 0.0
    while t < duration:
        mix = mixes[int(t // (PERIOD * interval))]
        free = [n for n in mix if all(busy_until.get(k, 0.0) <= t for k in _conflicts(n))]
        if free:
            name = rng.choice(free)
            fault = describe(name, rng, targets)
            lasts = rng.uniform(0.5, 1.5) * interval if name != "restart-all" \
                else rng.uniform(0.5, 2.0)
            alone = exclusive or fault.get("mode") == "lose-unsynced"
            if alone and (any(u > t for u in busy_until.values())
                          or (fault.get("mode") == "lose-unsynced" and t - quiet_from < interval)):
                t += rng.uniform(0.5, 1.5) * interval
                continue
            n = sum(step.action == "start" for step in steps)
            steps.append(Step(round(t, 3), "start", n, fault))
            if t + lasts < duration:
                steps.append(Step(round(t + lasts, 3), "stop", n, fault))
            busy_until[name] = t + lasts
            if alone:
                # Nothing else starts until this fault is over — and a
                # lose-unsynced fault's node has caught up again.
                pause = interval if fault.get("mode") == "lose-unsynced" else 0.0
                busy_until = {k: max(u, t + lasts + pause) for k, u in busy_until.items()}
                busy_until.update({k: t + lasts + pause for k in nemeses})
            quiet_from = max(busy_until.values())
        t += rng.uniform(0.5, 1.5) * interval
    return sorted(steps, key=lambda s: (s.at, s.action != "stop", s.id))


def _mixes(nemeses: list[str], rng: random.Random, periods: int) -> list[list[str]]:
    """Each period's kinds: none in about QUIET_SHARE of them (never the
    first), else a random non-empty subset, in the order asked."""
    mixes = []
    for period in range(periods):
        if period and rng.random() < QUIET_SHARE:
            mixes.append([])
        else:
            chosen = set(rng.sample(nemeses, rng.randint(1, len(nemeses))))
            mixes.append([n for n in nemeses if n in chosen])
    return mixes


def describe(name: str, rng: random.Random, targets: list[str]) -> dict:
    """A fault of kind `name` as plain data, its choices drawn from rng."""
    if name == "partition":
        kind = rng.choice(PARTITION_KINDS)
        fault = {"fault": "partition", "kind": kind}
        if kind == "isolate-leader":
            fault["target"] = rng.choice(["leader", "controller"])
        return fault
    if name == "restart-all":
        return {"fault": "kill", "targets": "all"}
    if name == "disk":
        mode = rng.choice(DISK_MODES)
        return {"fault": "disk", "mode": mode,
                "targets": "one" if mode == "lose-unsynced" else rng.choice(targets)}
    if name == "power-loss":
        return {"fault": "disk", "mode": "lose-unsynced",
                "targets": rng.choice(["majority", "all"])}
    if name == "packet-loss":
        return {"fault": "packet-loss", "targets": rng.choice(targets),
                "probability": rng.choice(LOSS_PROBABILITIES)}
    if name == "failover":
        from nemesis.failover import ROLES
        return {"fault": "failover", "role": rng.choice(ROLES),
                "hold": round(rng.uniform(*HOLDS), 1)}
    return {"fault": name, "targets": rng.choice(targets)}


def make_fault(description: dict) -> Fault:
    """The Fault a plan's description stands for."""
    body = dict(description)
    name = body.pop("fault")
    if name == "partition":
        from nemesis.net import PartitionFault
        return PartitionFault(**body)
    if name == "packet-loss":
        from nemesis.net import PacketLossFault
        return PacketLossFault(**body)
    if name == "disk":
        from nemesis.disk.fault import DiskFault
        return DiskFault(**body)
    from nemesis.process import KillFault, PauseFault
    if name == "pause":
        return PauseFault(**body)
    if name == "kill":
        return KillFault(**body)
    raise ValueError(f"fault={name!r}: choose one of partition, packet-loss, disk, pause, kill")


class Move(Protocol):
    """What a scheduled fault is to the script that runs it: begun at its
    start step, ended at its stop step, through the nemesis (which records
    each fault it applies)."""
    verbs: frozenset[str]       # the start verbs its history shows

    def begin(self, nemesis) -> None: ...

    def end(self, nemesis) -> None: ...


class Single:
    """One Fault as a move."""

    def __init__(self, fault: Fault):
        self.fault = fault
        self.verbs = frozenset({fault.start_f})

    def begin(self, nemesis) -> None:
        nemesis.start(self.fault)

    def end(self, nemesis) -> None:
        if self.fault in nemesis.active:
            nemesis.stop(self.fault)


def make_move(description: dict) -> Move:
    """The move a plan's description stands for."""
    if description.get("fault") == "failover":
        from nemesis.failover import Failover
        return Failover(**{k: v for k, v in description.items() if k != "fault"})
    return Single(make_fault(description))


def check(nemeses: list[str], targets: list[str], interval: float) -> None:
    unknown = [n for n in nemeses if n not in NEMESES]
    if unknown:
        raise ValueError(f"nemesis={','.join(nemeses)!r}: {', '.join(unknown)} unknown; "
                         f"choose from {', '.join(NEMESES)}")
    bad = [t for t in targets if t not in TARGETS]
    if bad or not targets:
        raise ValueError(f"fault_targets={','.join(targets)!r}: choose one or more of "
                         f"{', '.join(TARGETS)}")
    if not interval > 0:
        raise ValueError(f"nemesis_interval={interval!r}: must be positive seconds")


def scheduled(steps: list[Step]):
    """A nemesis script (nemesis/runner.py) that runs the steps on time."""
    def script(nemesis) -> None:
        started = time.monotonic()
        moves: dict[int, Move] = {}
        for n, step in enumerate(steps):
            if not nemesis.sleep(step.at - (time.monotonic() - started)):
                # Late faults push the later ones past the main phase's end:
                # the run says which never started (kchaos/verdict.py).
                nemesis.dropped = [s.to_json() for s in steps[n:] if s.action == "start"]
                return
            if step.action == "start":
                moves[step.id] = make_move(step.fault)
                moves[step.id].begin(nemesis)
            elif step.id in moves:
                moves.pop(step.id).end(nemesis)
    return script
