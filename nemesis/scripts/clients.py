"""Scripts for the client-facing paths: the idempotent producer's
deduplication (KIP-98), the group coordinator's offsets (commits, their
replication, their reload) and the fencing of stale requests (KIP-320).

The one idea: each fault is timed on what the cluster says, never on the
clock alone. A script that needs a request to be retried stalls the
replication its acks=all answer waits for (pausing the followers), so the
request times out and is retried to the same leader; one that needs a
coordinator failover asks who leads `__consumer_offsets` and kills it.
"""

from __future__ import annotations

from nemesis.process import KillFault, PauseFault
from nemesis.scripts.watch import BrokerLinkCut, acknowledged, isr, leads, order, settled

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"
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


def strand_pending_offsets(nemesis) -> None:
    """Leave a consume-transform-produce pipeline's offsets pending across
    a group coordinator failover (Redpanda #10669's partition and heal).
    The recipe keeps `__consumer_offsets` on two replicas, the group
    coordinator G and a follower F, and one `__transaction_state`
    partition. When its leader, the transaction coordinator T, is the third
    node, the connections T opens to G are cut for 5 s: transactions
    commit, their offsets are written by G and replicated to F, and stay
    pending, since T's markers cannot reach G. G is then killed and the
    link healed; F loads the partition, and a correct F keeps the pending
    offsets until the retried markers land. Restarted 6 s later. While T
    is one of the offsets partition's replicas, T is killed for 4 s to move
    the transactions' partition (not counted)."""
    failovers = 0
    while nemesis.sleep(3):
        group = nemesis.cluster.leader(OFFSETS_TOPIC)
        txn = nemesis.cluster.leader(TRANSACTIONS_TOPIC)
        replicas = {n.name for n in nemesis.cluster.in_sync(OFFSETS_TOPIC) or []}
        if group is None or txn is None or len(replicas) < 2:
            continue
        if txn.name in replicas:
            move = KillFault([txn.name], broker_only=True)
            nemesis.start(move)
            stopped = not nemesis.sleep(4)
            nemesis.stop(move)
            if stopped:
                break
            continue
        # Only T's requests to G (its markers, its fetches): G's own requests
        # to T go through, so G's produce verifications (KIP-890) answer.
        cut = BrokerLinkCut(group.name, [txn.name], inbound_only=True)
        kill = KillFault([group.name], broker_only=True)
        nemesis.start(cut)
        if not nemesis.sleep(5):
            nemesis.stop(cut)
            break
        nemesis.start(kill)
        nemesis.stop(cut)
        failovers += 1
        if not nemesis.sleep(6):
            break
        nemesis.stop(kill)
        nemesis.until(lambda: len(nemesis.cluster.in_sync(OFFSETS_TOPIC) or []) == 2, 30)
    nemesis.require(failovers, "the group coordinator killed while cut off from the "
                               "transaction coordinator, at least once")


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
