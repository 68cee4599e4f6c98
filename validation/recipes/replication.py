"""Recipes for the replication bug switches (docs/broker.md's catalogue): for
each, a script that drives the cluster down the one code path the switch
changes, and the anomaly that path leaves in the history.

Scripts work on partition 0 of the one topic and keep followers in the
ISR while they stop replicating with `BrokerLinkCut` (nemesis/scripts/watch.py).
A loss shows as `lost-write` only if nobody read the records first
(IDLE_READERS), else as `inconsistent-offsets` once other records take
their offsets.
"""

from __future__ import annotations

from validation.profiles import FAST_BROKERS
from validation.recipes.recipe import Recipe
from workloads.clients import ClientSettings

# Subscribe-mode consumers whose group's first rebalance outlasts the main
# phase: only the final phase reads, as in Jepsen's Kafka tests.
IDLE_READERS = "group.initial.rebalance.delay.ms=120000"
# Sends stuck behind a cut time out within a few seconds and producers go
# on with new ones, so two leaders' suffixes hold different sends, not the
# same batches retried (which can land at the same offsets again).
IMPATIENT_PRODUCERS = ClientSettings(request_timeout_ms=1000, delivery_timeout_ms=2000)


RECIPES: list[Recipe] = [
    Recipe(
        switch="acks-all-ignores-min-isr",
        expected=frozenset({"lost-write"}),
        config=dict(time_limit=30, partitions=1, consumer_mode="subscribe",
                    broker_config=FAST_BROKERS + ["min.insync.replicas=2",
                                                  "unclean.leader.election.enable=true",
                                                  IDLE_READERS],
                    recovery_time=3, final_time_limit=40),
        script="lone-leader-acks-then-dies", fast=True,
        why="Paused followers leave the leader alone in the ISR to acknowledge acks=all "
            "sends by itself (the bug); it is killed and unclean election elects a follower.",
    ),
    Recipe(
        switch="truncate-to-local-hw",
        expected=frozenset({"lost-write", "inconsistent-offsets"}),
        config=dict(time_limit=30, partitions=1, replication_factor=2,
                    consumer_mode="subscribe", broker_config=FAST_BROKERS + [IDLE_READERS],
                    recovery_time=3, final_time_limit=40),
        script="crash-follower-then-leader", fast=True,
        why="Follower and leader are killed back to back and restarted; the last in the ISR "
            "is elected again after the bug cut its log at its checkpointed high watermark.",
    ),
    Recipe(
        switch="epoch-lookup-v0",
        expected=frozenset({"inconsistent-offsets"}),
        config=dict(time_limit=45, partitions=1, consumer_mode="assign",
                    broker_config=FAST_BROKERS + ["min.insync.replicas=2",
                                                  "replica.lag.time.max.ms=20000"],
                    client_settings=IMPATIENT_PRODUCERS, recovery_time=3, final_time_limit=40),
        script="alternating-epochs",
        why="Clean failovers with replication cut leave a follower holding an epoch its "
            "leader never saw; the offset-only lookup lets it keep that diverging suffix.",
    ),
    Recipe(
        switch="isr-expand-below-epoch-start",
        expected=frozenset({"lost-write", "inconsistent-offsets"}),
        config=dict(time_limit=45, partitions=1, consumer_mode="subscribe",
                    broker_config=FAST_BROKERS + [
                        "min.insync.replicas=2", "replica.fetch.max.bytes=1",
                        "replica.high.watermark.checkpoint.interval.ms=600000", IDLE_READERS],
                    recovery_time=3, final_time_limit=40),
        script="premature-isr-join",
        why="A restarted leader's high watermark is 0; the bug lets a lagging replica join "
            "its ISR at once, and the leader is paused before that replica has caught up.",
    ),
    Recipe(
        switch="stale-hw-after-failover",
        expected=frozenset({"stale-end"}),
        config=dict(time_limit=40, partitions=1, replication_factor=2, rate=400,
                    consumer_mode="assign",
                    broker_config=FAST_BROKERS + ["min.insync.replicas=2",
                                                  "replica.lag.time.max.ms=60000",
                                                  "replica.fetch.max.bytes=1"],
                    client_settings=ClientSettings(acks="1", idempotence=False),
                    recovery_time=0, final_time_limit=60),
        script="stale-end-after-failover",
        why="The heal brings back a leader whose high watermark lags its epoch start by 25 s "
            "of acks=1 sends; the bug's ListOffsets answers that stale end, below offsets "
            "consumers had read before the failover.",
    ),
    Recipe(
        switch="hw-advances-under-min-isr",
        expected=frozenset({"inconsistent-offsets"}),
        config=dict(time_limit=40, partitions=1, consumer_mode="assign", concurrency=10,
                    broker_config=["broker.session.timeout.ms=8000",
                                   "broker.heartbeat.interval.ms=300",
                                   "replica.lag.time.max.ms=2000", "min.insync.replicas=2",
                                   "group.initial.rebalance.delay.ms=0"],
                    client_settings=ClientSettings(request_timeout_ms=600, delivery_timeout_ms=800,
                                                   fetch_max_wait_ms=200,
                                                   default_api_timeout_ms=500),
                    recovery_time=3, final_time_limit=40),
        script="last-replica-loses-its-tail",
        why="Alone in the ISR the leader's high watermark passes what only it holds (the "
            "bug); consumers read it, then it crashes losing it and is the last one standing.",
    ),
    Recipe(
        switch="fetch-above-hw",
        expected=frozenset({"inconsistent-offsets"}),
        config=dict(time_limit=30, partitions=1, consumer_mode="assign",
                    broker_config=FAST_BROKERS + ["replica.lag.time.max.ms=10000"],
                    # Commits stuck behind the cut give up: consumers keep polling.
                    client_settings=ClientSettings(request_timeout_ms=1000,
                                                   delivery_timeout_ms=1500,
                                                   default_api_timeout_ms=1500),
                    recovery_time=3, final_time_limit=40),
        script="dirty-read-then-failover",
        why="With replication cut the leader appends past its high watermark, which the bug "
            "lets consumers read; then it is killed and a follower leads without it.",
    ),
]
