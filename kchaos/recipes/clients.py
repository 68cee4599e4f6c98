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

from kchaos.recipes import FAST_BROKERS, Recipe
from kchaos.recipes.watch import BrokerLinkCut, acknowledged, isr, leads, order, settled
from nemesis.process import KillFault, PauseFault
from workloads.clients import ClientSettings

OFFSETS_TOPIC = "__consumer_offsets"

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
# Consumers reach a held high watermark well within this (they poll every
# few milliseconds); less than the 8 s of SLOW_ISR_SHRINK.
READ_UP_S = 3


def _others(nemesis, node) -> list[str]:
    return [n.name for n in nemesis.cluster.nodes if n.name != node.name]


def _whole_isr(nemesis, topic: str | None = None):
    """The leader of partition 0 of topic (the first topic by default) once
    every node is in its ISR; None before (or when nobody answers)."""
    in_sync = nemesis.cluster.in_sync(topic) or []
    if len(in_sync) != len(nemesis.cluster.nodes):
        return None
    return nemesis.cluster.leader(topic)


def stall_acks(nemesis) -> None:
    """Pause the followers of partition 0 for 5 s, longer than the
    producers' request.timeout.ms (3 s) and shorter than the brokers'
    session and lag timeouts: the leader has appended the batch in flight,
    its acks=all answer waits for the followers and times out, and the
    producer retries the same batch (same sequence) to the same leader,
    which must answer with the original offsets (KIP-98)."""
    stalls = 0
    while nemesis.sleep(4):
        leader = _whole_isr(nemesis)
        if leader is None:
            continue
        pause = PauseFault(_others(nemesis, leader), broker_only=True)
        nemesis.start(pause)
        if not nemesis.sleep(5):
            break
        nemesis.stop(pause)
        stalls += 1
        nemesis.until(lambda: _whole_isr(nemesis) is not None, 20)
    nemesis.require(stalls, "a whole ISR whose followers were paused for 5 s, at least once")


def lose_unreplicated_commits(nemesis) -> None:
    """Pause the coordinator's followers for 2.5 s while the consumers
    commit, kill the coordinator, resume the followers: one of them is
    elected (the ISR is still whole) and replays its own log. Kafka answers
    a commit only once the ISR has it (GroupMetadataManager.appendForGroup,
    requiredAcks=-1)."""
    failovers = 0
    while nemesis.sleep(4):
        coordinator = _whole_isr(nemesis, OFFSETS_TOPIC)
        if coordinator is None:
            continue
        pause = PauseFault(_others(nemesis, coordinator), broker_only=True)
        kill = KillFault([coordinator.name], broker_only=True)
        nemesis.start(pause)
        if not nemesis.sleep(2.5):
            break
        nemesis.start(kill)
        nemesis.stop(pause)
        failovers += 1
        # The controller fences the dead coordinator after its session
        # timeout; the consumers then meet the new one.
        if not nemesis.sleep(15):
            break
        nemesis.stop(kill)
        nemesis.until(lambda: _whole_isr(nemesis, OFFSETS_TOPIC) is not None, 30)
    nemesis.require(failovers, "a coordinator killed with its followers paused, at least once")


def fail_over_coordinator(nemesis) -> None:
    """Kill the group coordinator once its partition holds well over
    offsets.load.buffer.size bytes of commits (KAFKA-5600's loader read
    one buffer only), restart it 12 s later."""
    failovers = 0
    while nemesis.sleep(8):
        coordinator = _whole_isr(nemesis, OFFSETS_TOPIC)
        if coordinator is None:
            continue
        kill = KillFault([coordinator.name], broker_only=True)
        nemesis.start(kill)
        if not nemesis.sleep(12):
            break
        nemesis.stop(kill)
        failovers += 1
        nemesis.until(lambda: _whole_isr(nemesis, OFFSETS_TOPIC) is not None, 30)
    nemesis.require(failovers, "a coordinator killed for 12 s, at least once")


def truncate_under_readers(nemesis) -> None:
    """An unclean election takes back records the consumers have read
    (KAFKA-6880's setting). Follower B is cut off from A and C until the
    ISR is {A, C}; A and C commit on; then C is cut off from A too, which
    holds the high watermark while C stays in the ISR
    (replica.lag.time.max.ms), and the consumers read up to it. A and C
    are killed: B, the one replica alive, is elected without the suffix
    they read, and producers write on there. A consumer told the new epoch
    asks where its own epoch ended (OffsetForLeaderEpoch) and goes back
    there; one that is not fetches at its old position, past B's log end,
    and auto.offset.reset takes it to B's end, past what producers wrote
    there meanwhile.

    B must be the group coordinator (the leader of the one
    `__consumer_offsets` partition), alone in its ISR by the crash: commits
    are then answered throughout and no consumer restarts from one —
    librdkafka 2.16 does not validate a committed offset against the
    leader's log (seen here), so a restart past a truncation would skip
    what the new leader wrote there, fix or no fix."""
    leader = settled(nemesis, 3)
    coordinator = nemesis.cluster.leader(OFFSETS_TOPIC)
    nemesis.require(leader and coordinator and coordinator.name != leader.name,
                    "partition 0 settled, 3 replicas in its ISR, led by a node that is not "
                    "the group coordinator")
    a, b = leader.name, coordinator.name
    [c] = [name for name in order(nemesis, leader) if name not in (a, b)]
    lagging = BrokerLinkCut(b, [a, c])
    nemesis.start(lagging)
    nemesis.require(nemesis.until(lambda: isr(nemesis) == sorted([a, c])
                                  and isr(nemesis, OFFSETS_TOPIC) == [b], 20),
                    "B out of partition 0's ISR and alone in the coordinator's within 20 s")
    nemesis.require(acknowledged(nemesis, 100, 20), "100 sends committed by A and C")
    held = BrokerLinkCut(a, [c])
    nemesis.start(held)
    nemesis.require(nemesis.sleep(READ_UP_S), f"{READ_UP_S} s of reads up to the held mark")
    crash = KillFault([a, c], broker_only=True)
    nemesis.start(crash)
    nemesis.stop(held)
    nemesis.stop(lagging)
    nemesis.require(nemesis.until(lambda: leads(nemesis, b), 20) and nemesis.sleep(8),
                    "B led within 20 s of the crash")
    nemesis.stop(crash)
    nemesis.until(lambda: len(isr(nemesis)) == 3, 30)


RECIPES: list[Recipe] = [
    Recipe(
        switch="no-idempotent-dedup",
        expected=frozenset({"duplicate"}),
        config=dict(time_limit=20, partitions=1, consumer_mode="assign",
                    broker_config=PATIENT_BROKERS, recovery_time=3, final_time_limit=30),
        script=stall_acks,
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
        script=stall_acks,
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
        script=lose_unreplicated_commits,
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
        script=fail_over_coordinator,
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
        script=truncate_under_readers,
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
