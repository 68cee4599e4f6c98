"""The runs validation shares: the brokers' fast failure detection, the
every-fault run (the soak's, `--generic`'s and the Kafka evidence's), and
the `--generic` profiles that add their settings to it.

Each profile is a table of its own in docs/validation.md: Kafka's defaults,
or the stress settings that let a 90-s run's faults cross the timeouts and
buffers a long run would; with the fault kinds its table was measured with.
"""

from __future__ import annotations

from kchaos.config import TestConfig
from nemesis.schedule import DEFAULT_MIX
from workloads.clients import ClientSettings

# Brokers that notice a dead peer within seconds: fenced by the controller,
# their leaderships moved and their ISR places dropped within 3 s (the
# recipes' and the end-to-end tests' cluster).
FAST_BROKERS = ["broker.session.timeout.ms=3000", "broker.heartbeat.interval.ms=300",
                "replica.lag.time.max.ms=3000", "group.initial.rebalance.delay.ms=0"]

NEMESES = list(DEFAULT_MIX)     # every fault kind of the generic schedule
# The kinds the first two profiles' tables were measured with, before
# `failover` joined the mix: a kind joins a profile only with a new table,
# since it changes every seed's schedule.
FIRST_MIX = [n for n in NEMESES if n != "failover"]


def every_fault_config(broker_config: list[str] = (), nemesis: list[str] = NEMESES,
                       **settings) -> TestConfig:
    """Every default fault kind together (or the kinds a --generic profile
    was measured with), acks=all with two in-sync replicas required (as
    Jepsen's Kafka tests run it), clients crashing now and then
    (settings add the rest, broker_config to min.insync.replicas=2)."""
    return TestConfig.build(nemesis=list(nemesis), nemesis_interval=10,
                            broker_config=["min.insync.replicas=2", *broker_config],
                            crash_clients_every=30, **settings)


def _kafka_defaults() -> dict:
    return dict(nemesis=FIRST_MIX)


def _stress(nemesis: list[str] = FIRST_MIX) -> dict:
    return dict(
        nemesis=nemesis,
        # Timeouts shorter than the ~10-s faults, so a paused or cut replica
        # leaves the ISR by lagging and a broker is fenced mid-fault; and a
        # load buffer (KAFKA-5600's) smaller than 90 s of commits.
        broker_config=[*FAST_BROKERS, "offsets.load.buffer.size=2048"],
        # Slow consumers (KIP-62) stall 1.5 x 6 s, so a 90-s run has zombies
        # (every 3 s at the nominal rate; polls under faults are slower).
        client_settings=ClientSettings(max_poll_interval_ms=6000),
        stall_consumers_every=3.0,
        # Ends asked under faults, where a new leader's stale high watermark
        # shows (KIP-207), judged by epochs (checkers/lost.py).
        end_offsets_every=1.0)


def _transactions() -> dict:
    """Kafka's timings, every kind, transactional producers (a quarter of
    the transactions aborted) and read_committed consumers: the
    transactional switches' table and the correct broker's."""
    return dict(nemesis=NEMESES, transactions=True)


# What each profile adds to the every-fault run: Kafka's own timings and
# sizes, or settings that let faults of a short run cross the timeouts and
# buffers a long one would; and the fault kinds.
PROFILES = {"kafka-defaults": _kafka_defaults, "stress": _stress,
            "stress-failover": lambda: _stress(NEMESES), "transactions": _transactions}
DEFAULT_PROFILE = "kafka-defaults"
