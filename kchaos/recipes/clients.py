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

What the harness cannot do is partition a client from a broker (clients
live in the root namespace and reach every node over the bridge): the
recipes below say where that made them deviate from BROKER.md's. Two
recipes need the workload rather than a fault: pipelined sends
(records_per_send, batch_size=1) and slow consumers (stall_consumers_every).
"""

from __future__ import annotations

from kchaos.recipes import Recipe
from nemesis.net import PartitionFault
from nemesis.process import KillFault, PauseFault
from workloads.clients import ClientSettings

OFFSETS_TOPIC = "__consumer_offsets"

# A dead broker is fenced (and its leaderships moved) within 3 s.
FAST_BROKERS = ["broker.heartbeat.interval.ms=300", "broker.session.timeout.ms=3000",
                "replica.lag.time.max.ms=3000", "group.initial.rebalance.delay.ms=0"]
# Brokers paused for a few seconds are neither fenced by the controller nor
# dropped from an ISR: a recipe that stalls replication on purpose needs
# the ISR whole afterwards (a clean election, acks=all waiting for everyone).
PATIENT_BROKERS = ["broker.heartbeat.interval.ms=300", "broker.session.timeout.ms=8000",
                   "replica.lag.time.max.ms=10000", "group.initial.rebalance.delay.ms=0"]
# Every group on one coordinator: the leader of __consumer_offsets-0.
ONE_COORDINATOR = ["offsets.topic.num.partitions=1"]


def _others(nemesis, node) -> list[str]:
    return [n.name for n in nemesis.cluster.nodes if n.name != node.name]


def _whole_isr(nemesis, topic: str | None = None, partition: int = 0):
    """The leader of topic-partition (the first topic's by default) once
    every node is in its ISR; None before (or when nobody answers)."""
    isr = nemesis.cluster.in_sync(topic, partition) or []
    if len(isr) != len(nemesis.cluster.nodes):
        return None
    return nemesis.cluster.leader(topic, partition)


def stall_acks(nemesis) -> None:
    """Pause the followers of partition 0 for 5 s, longer than the
    producers' request.timeout.ms (3 s) and shorter than the brokers'
    session and lag timeouts: the leader has appended the batch in flight,
    its acks=all answer waits for the followers and times out, and the
    producer retries the same batch (same sequence) to the same leader,
    which must answer with the original offsets (KIP-98)."""
    while nemesis.sleep(4):
        leader = _whole_isr(nemesis)
        if leader is None:
            continue
        pause = PauseFault(_others(nemesis, leader))
        nemesis.start(pause)
        if not nemesis.sleep(5):
            return
        nemesis.stop(pause)
        nemesis.until(lambda: _whole_isr(nemesis) is not None, 20)


def lose_unreplicated_commits(nemesis) -> None:
    """Pause the coordinator's followers for 2.5 s while the consumers
    commit, kill the coordinator, resume the followers: one of them is
    elected (the ISR is still whole) and replays its own log. Kafka answers
    a commit only once the ISR has it (GroupMetadataManager.appendForGroup,
    requiredAcks=-1)."""
    while nemesis.sleep(4):
        coordinator = _whole_isr(nemesis, OFFSETS_TOPIC)
        if coordinator is None:
            continue
        pause, kill = PauseFault(_others(nemesis, coordinator)), KillFault([coordinator.name])
        nemesis.start(pause)
        if not nemesis.sleep(2.5):
            return
        nemesis.start(kill)
        nemesis.stop(pause)
        # The controller fences the dead coordinator after its session
        # timeout; the consumers then meet the new one.
        if not nemesis.sleep(15):
            return
        nemesis.stop(kill)
        nemesis.until(lambda: _whole_isr(nemesis, OFFSETS_TOPIC) is not None, 30)


def fail_over_coordinator(nemesis) -> None:
    """Kill the group coordinator once its partition holds well over
    offsets.load.buffer.size bytes of commits (KAFKA-5600's loader read
    one buffer only), restart it 12 s later."""
    while nemesis.sleep(8):
        coordinator = _whole_isr(nemesis, OFFSETS_TOPIC)
        if coordinator is None:
            continue
        kill = KillFault([coordinator.name])
        nemesis.start(kill)
        if not nemesis.sleep(12):
            return
        nemesis.stop(kill)
        nemesis.until(lambda: _whole_isr(nemesis, OFFSETS_TOPIC) is not None, 30)


def isolate_leader(nemesis) -> None:
    """Cut off from the other nodes, for 8 s, the leader of a partition
    led away from the controller's node (isolating that node would cut the
    controller off with it, and the leader would keep its place); clients
    still reach it, with the metadata they had, and a new leader is elected
    in a new epoch (KIP-320 fences requests naming the old one). Then heal."""
    controller = nemesis.cluster.controller()
    while nemesis.sleep(4):
        led_away = [p for p in range(nemesis.cluster.partitions)
                    if (leader := _whole_isr(nemesis, partition=p)) is not None
                    and leader.name != getattr(controller, "name", None)]
        if not led_away:
            continue
        cut = PartitionFault("isolate-leader", partition=led_away[0])
        nemesis.start(cut)
        if not nemesis.sleep(8):
            return
        nemesis.stop(cut)
        nemesis.until(lambda: _whole_isr(nemesis, partition=led_away[0]) is not None, 30)


RECIPES: list[Recipe] = [
    Recipe(
        switch="no-idempotent-dedup",
        expected=frozenset({"duplicate"}),
        config=dict(time_limit=20, partitions=1, consumer_mode="assign",
                    broker_config=PATIENT_BROKERS, recovery_time=3, final_time_limit=30),
        script=stall_acks,
        fast=True,
        why="Pausing partition 0's followers makes the leader's acks=all answer time "
            "out after it appended the batch; the idempotent producer retries it with "
            "the same sequence, and the broker writes it again instead of answering "
            "with its offsets. (BROKER.md isolates or kills the leader; clients cannot "
            "be isolated here, and a stalled acknowledgement gives the same retry of an "
            "appended batch without a failover.)",
    ),
    Recipe(
        switch="dedup-window-one",
        expected=frozenset({"duplicate", "nonmonotonic-send"}),
        config=dict(time_limit=20, partitions=1, consumer_mode="assign", records_per_send=10,
                    client_settings=ClientSettings(batch_size=1),
                    broker_config=PATIENT_BROKERS, recovery_time=3, final_time_limit=30),
        script=stall_acks,
        error="OUT_OF_ORDER_SEQUENCE_NUMBER",
        why="Ten records per send, one per batch, so a producer has up to 5 batches of "
            "one partition in flight (BROKER.md); stalled acknowledgements make it retry "
            "them all. The single-batch cache knows only the last one, so the retry of "
            "the first gets OUT_OF_ORDER_SEQUENCE_NUMBER, and librdkafka stops the "
            "producer with a fatal 'sequence desynchronization' error: the sends end "
            "`info`, nothing is written twice, and no anomaly type applies — the switch "
            "shows as that client error, which the correct broker never causes. "
            "(kafka-python keeps one batch per partition in flight with idempotence, "
            "and cannot trigger it.)",
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
        expected=frozenset({"nonmonotonic-poll", "poll-skip", "inconsistent-offsets"}),
        config=dict(time_limit=30, partitions=3, consumer_mode="assign",
                    broker_config=FAST_BROKERS, recovery_time=3, final_time_limit=30),
        script=isolate_leader,
        attempts=1,
        why="BROKER.md's recipe: a partition's leader (one away from the controller's "
            "node) is cut off from the other nodes, a new one is elected, and clients "
            "keep the metadata they had. Not found: the cut-off leader does not know it "
            "was deposed, so the clients' requests name its own epoch and fencing has "
            "nothing to refuse; its high watermark cannot move without its followers, and "
            "after a clean election every leader holds the same records below it. Clients "
            "that learn the new epoch send to the new leader. The broker logs each request "
            "the switch lets through: one in the recipe's run, to a follower, which "
            "answered NOT_LEADER_OR_FOLLOWER anyway.",
    ),
    Recipe(
        switch="no-generation-fencing",
        expected=frozenset({"stale-committed-offset"}),
        config=dict(time_limit=30, partitions=4, consumer_mode="subscribe", concurrency=8,
                    stall_consumers_every=5,
                    client_settings=ClientSettings(session_timeout_ms=2000,
                                                   max_poll_interval_ms=2000),
                    broker_config=ONE_COORDINATOR + ["group.min.session.timeout.ms=1000",
                                                     "group.initial.rebalance.delay.ms=0"],
                    recovery_time=3, final_time_limit=30),
        fast=True,
        why="No fault: slow processing makes the zombie (KIP-62). A consumer stalls "
            "3 s, past its max.poll.interval.ms (2 s), before a commit; librdkafka leaves "
            "the group, another member takes its partitions and commits further, and then "
            "the stalled one commits what it read before the stall. Kafka refuses that "
            "commit (UNKNOWN_MEMBER_ID); with the switch it lands, and the group's "
            "committed offset goes back. (BROKER.md partitions the member; a stall "
            "replaces it just the same, without the network.)",
    ),
]
