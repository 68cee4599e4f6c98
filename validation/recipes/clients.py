"""Recipes for the client-facing bug switches: the idempotent producer's
deduplication (KIP-98), the group coordinator's offsets (commits, their
replication, their reload) and the fencing of stale requests (KIP-320,
generations).

The one idea: each fault is timed on what the cluster says, never on the
clock alone. A recipe that needs a request to be retried stalls the
replication its acks=all answer waits for (pausing the followers), so the
request times out and is retried to the same leader; one that needs a
coordinator failover asks who leads `__consumer_offsets` and kills it. The
brokers get `offsets.topic.num.partitions=1` where groups matter, so every
group has that one coordinator.

What the harness cannot do is partition a client from a broker (clients live in
the root namespace and reach every node over the bridge): the recipes below say
where that made them deviate from the catalogue's triggers (docs/broker.md).
Two recipes need the workload rather than a fault: pipelined sends
(records_per_send, batch_size=1) and slow consumers (stall_consumers_every).
"""

from __future__ import annotations

from validation.profiles import FAST_BROKERS
from validation.recipes.recipe import Recipe
from workloads.clients import ClientSettings

# Brokers paused for a few seconds are neither fenced by the controller nor
# dropped from an ISR: a recipe that stalls replication on purpose needs
# the ISR whole afterwards (a clean election, acks=all waiting for everyone).
PATIENT_BROKERS = ["broker.heartbeat.interval.ms=300", "broker.session.timeout.ms=8000",
                   "replica.lag.time.max.ms=10000", "group.initial.rebalance.delay.ms=0"]
# Every group on one coordinator: the leader of __consumer_offsets-0.
ONE_COORDINATOR = ["offsets.topic.num.partitions=1"]
# Followers stay in the ISR 8 s after they stop fetching: a cut follower
# holds the high watermark that long.
SLOW_ISR_SHRINK = ["broker.heartbeat.interval.ms=300", "broker.session.timeout.ms=3000",
                   "replica.lag.time.max.ms=8000", "group.initial.rebalance.delay.ms=0"]


RECIPES: list[Recipe] = [
    Recipe(
        switch="no-idempotent-dedup",
        expected=frozenset({"duplicate"}),
        config=dict(time_limit=20, partitions=1, consumer_mode="assign",
                    broker_config=PATIENT_BROKERS, recovery_time=3, final_time_limit=30),
        script="stall-acks",
        fast=True,
        why="Pausing partition 0's followers makes the leader's acks=all answer time out "
            "after it appended the batch; the idempotent producer retries it with the same "
            "sequence, and the broker writes it again instead of answering with its "
            "offsets. (The catalogue's trigger, docs/broker.md, isolates or kills the "
            "leader; clients cannot be isolated here, and a stalled acknowledgement gives "
            "the same retry of an appended batch without a failover.)",
    ),
    Recipe(
        switch="dedup-window-one",
        expected=frozenset({"duplicate", "nonmonotonic-send"}),
        config=dict(time_limit=20, partitions=1, consumer_mode="assign", records_per_send=10,
                    client_settings=ClientSettings(batch_size=1),
                    broker_config=PATIENT_BROKERS, recovery_time=3, final_time_limit=30),
        script="stall-acks",
        error="OUT_OF_ORDER_SEQUENCE_NUMBER",
        why="Ten records per send, one per batch, so a producer has up to 5 batches of one "
            "partition in flight (docs/broker.md); stalled acknowledgements make it retry "
            "them all. The single-batch cache knows only the last one, so the retry of the "
            "first gets OUT_OF_ORDER_SEQUENCE_NUMBER, and librdkafka stops the producer "
            "with a fatal 'sequence desynchronization' error: the sends end `info`, "
            "nothing is written twice, and no anomaly type applies — the switch shows as "
            "that client error, which the correct broker never causes. (kafka-python keeps "
            "one batch per partition in flight with idempotence, and cannot trigger it.)",
    ),
    Recipe(
        switch="offsets-commit-acks-one",
        expected=frozenset({"stale-committed-offset"}),
        config=dict(time_limit=25, partitions=2, consumer_mode="assign", concurrency=10,
                    broker_config=PATIENT_BROKERS + ONE_COORDINATOR,
                    recovery_time=3, final_time_limit=30),
        script="lose-unreplicated-commits",
        fast=True,
        why="With the coordinator's followers paused, its commits are acknowledged "
            "from its own log alone; killing it then elects a follower (the ISR is "
            "still whole) that never had them, and the consumers' next OffsetFetch "
            "returns older offsets.",
    ),
    Recipe(
        switch="coordinator-partial-load",
        expected=frozenset({"stale-committed-offset"}),
        config=dict(time_limit=25, partitions=2, consumer_mode="assign", concurrency=10,
                    broker_config=FAST_BROKERS + ONE_COORDINATOR
                    + ["offsets.load.buffer.size=2048"],
                    recovery_time=3, final_time_limit=30),
        script="fail-over-coordinator",
        why="Ten commits a second fill __consumer_offsets-0 far past a 2 KiB load "
            "buffer; killing the coordinator makes a follower load the partition, and "
            "KAFKA-5600's loader stops after the first buffer, so OffsetFetch answers "
            "with commits from the first seconds of the run.",
    ),
    Recipe(
        switch="no-leader-epoch-fencing",
        expected=frozenset({"group-lost", "poll-skip"}),
        # Designed-in here (docs/broker.md): with unclean election, the records
        # read from A and those B wrote at the same offsets, sends landing
        # below earlier ones of the same producer, and consumers going back
        # to where their epoch ended (a move the history cannot show);
        # without idempotence, a retried batch written twice.
        allowed=frozenset({"inconsistent-offsets", "nonmonotonic-poll",
                           "int-nonmonotonic-poll", "nonmonotonic-send", "duplicate"}),
        config=dict(time_limit=50, partitions=1, consumer_mode="assign",
                    broker_config=SLOW_ISR_SHRINK + ONE_COORDINATOR
                    + ["unclean.leader.election.enable=true"],
                    # Without idempotence, producers send to B the moment
                    # they learn it leads (an idempotent one first fails
                    # on the sequence numbers B lost and starts over).
                    client_settings=ClientSettings(auto_offset_reset="latest",
                                                   idempotence=False),
                    recovery_time=3, final_time_limit=40),
        script="truncate-under-readers",
        why="An unclean election truncates records the consumers read. Told the new epoch, "
            "they validate their position (KIP-320) and go back to where their epoch ended "
            "on the new leader; under the switch Metadata tells no epochs, so they fetch "
            "at their old offset, past the new leader's log end, and "
            "auto.offset.reset=latest skips what it wrote meanwhile: the group commits "
            "past records it never read. (The catalogue's trigger, docs/broker.md, "
            "partitions the leader; without an unclean election no record below the high "
            "watermark is ever taken back, so nothing stale is left to fence: measured, "
            "the switch changed no verdict there.)",
    ),
    Recipe(
        switch="no-generation-fencing",
        # The zombie's ok commit itself, and a fetch that returns its offset.
        expected=frozenset({"zombie-commit", "stale-committed-offset"}),
        config=dict(time_limit=30, partitions=4, consumer_mode="subscribe", concurrency=8,
                    stall_consumers_every=5,
                    client_settings=ClientSettings(session_timeout_ms=2000,
                                                   max_poll_interval_ms=2000),
                    broker_config=ONE_COORDINATOR + ["group.min.session.timeout.ms=1000",
                                                     "group.initial.rebalance.delay.ms=0"],
                    recovery_time=3, final_time_limit=30),
        fast=True,
        why="No fault: slow processing makes the zombie (KIP-62). A consumer stalls 3 s, "
            "past its max.poll.interval.ms (2 s), before a commit; librdkafka leaves the "
            "group, another member takes its partitions and commits further, and then the "
            "stalled one commits what it read before the stall. Kafka refuses that commit "
            "(UNKNOWN_MEMBER_ID); with the switch it lands, and the group's committed "
            "offset goes back. (The catalogue's trigger, docs/broker.md, partitions the "
            "member; a stall replaces it just the same, without the network.)",
    ),
]
