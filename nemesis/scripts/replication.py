"""Scripts for the replication paths: each drives the cluster down one code
path where a historical replication bug (docs/broker.md's catalogue) lost
or rewrote acknowledged records, timed on what the cluster says.

Scripts work on partition 0 of the one topic and keep followers in the
ISR while they stop replicating with `BrokerLinkCut` (nemesis/scripts/watch.py).
"""

from __future__ import annotations

from nemesis.disk.fault import DiskFault, command
from nemesis.process import KillFault, PauseFault
from nemesis.scripts.watch import BrokerLinkCut, acknowledged, isr, leads, order, settled


def lone_leader_acks_then_dies(nemesis) -> None:
    """acks-all-ignores-min-isr (KAFKA-1555): pause the followers until the
    leader is alone in the ISR, let it acknowledge by itself, kill it and
    resume the followers: unclean election makes one of them leader, and
    its later sends are read past the acknowledged ones it never had."""
    leader = settled(nemesis, 3)
    nemesis.require(leader, "partition 0 settled, 3 replicas in its ISR")
    pause = PauseFault(order(nemesis, leader)[1:], broker_only=True)
    nemesis.start(pause)
    nemesis.require(nemesis.until(lambda: isr(nemesis) == [leader.name], 20),
                    "the paused followers dropped from the ISR within 20 s")
    acknowledged(nemesis, 50, 8)       # without the bug none commit: the wait runs out
    nemesis.start(KillFault([leader.name], broker_only=True))
    nemesis.stop(pause)
    # A lost write is an acknowledged send that readers skip past: without
    # sends committed by the new leader the loss could only show as `unseen`.
    nemesis.require(acknowledged(nemesis, 10, 20),
                    "10 sends committed by the new leader within 20 s of the failover")


def crash_follower_then_leader(nemesis) -> None:
    """truncate-to-local-hw (KAFKA-1211; KIP-101's first scenario, two
    replicas): kill the follower, then the leader, within a fetch round
    trip; restart both once the partition is leaderless. The last in the
    ISR is elected again, and with the bug it first cuts its log at its
    high watermark as checkpointed, up to 5 s (the interval) behind."""
    leader = settled(nemesis, 2)
    nemesis.require(leader, "partition 0 settled, 2 replicas in its ISR")
    nemesis.require(acknowledged(nemesis, 400, 30),      # for the checkpoint to trail
                    "400 more sends committed within 30 s")
    crashes = [KillFault([order(nemesis, leader)[1]], broker_only=True),
               KillFault([leader.name], broker_only=True)]
    for crash in crashes:
        nemesis.start(crash)
    nemesis.require(nemesis.until(lambda: nemesis.cluster.leader() is None, 15),
                    "partition 0 leaderless within 15 s of the kills")
    for crash in crashes:
        nemesis.stop(crash)


def alternating_epochs(nemesis) -> None:
    """epoch-lookup-v0 (KAFKA-6361, KIP-279): leader A appends a suffix C
    fetches and B does not (cut); A dies, B leads epoch 1 and appends what
    C does not fetch (cut); B dies, C leads epoch 2. B returns holding
    epoch 1, which C never saw: KIP-279's answer (0, end of epoch 0 at C)
    cuts B where the logs part, v0's offset-only one lets B keep its
    records over C's. C is bounced, B leads, and readers find other
    records at offsets they read from C."""
    leader = settled(nemesis, 3)
    nemesis.require(leader, "partition 0 settled, 3 replicas in its ISR")
    a, b, c = order(nemesis, leader)
    suffix = BrokerLinkCut(a, [b])
    nemesis.start(suffix)
    nemesis.require(nemesis.sleep(3), "3 s of A's suffix")
    quiet = BrokerLinkCut(b, [c])
    nemesis.start(quiet)
    # A stays down: B, not A, must lead after C.
    nemesis.start(KillFault([a], broker_only=True))
    nemesis.stop(suffix)
    nemesis.require(nemesis.until(lambda: leads(nemesis, b), 15) and nemesis.sleep(3),
                    "B led within 15 s of A's kill")
    kill_b = KillFault([b], broker_only=True)
    nemesis.start(kill_b)
    nemesis.require(nemesis.until(lambda: leads(nemesis, c), 15),
                    "C led within 15 s of B's kill")
    nemesis.stop(quiet)
    nemesis.stop(kill_b)
    nemesis.require(nemesis.until(lambda: b in isr(nemesis), 20) and nemesis.sleep(4),
                    "B back in the ISR within 20 s")
    bounce = KillFault([c], broker_only=True)
    nemesis.start(bounce)
    nemesis.stop(bounce)                # C's new registration fences the old: B leads
    nemesis.require(nemesis.until(lambda: leads(nemesis, b), 15),
                    "B led within 15 s of C's bounce")


def premature_isr_join(nemesis) -> None:
    """isr-expand-below-epoch-start (KAFKA-7128): C lags (killed) while A
    and B commit; A, then B die, and B, last in the ISR, returns alone and
    leads with the high watermark it restarted with (none checkpointed: 0),
    far below its epoch's start. With the bug C's first fetch puts it in
    the ISR though it lacks B's records up to that start; B is paused then
    (catching up takes a fetch per batch), and C leads without them."""
    leader = settled(nemesis, 3)
    nemesis.require(leader, "partition 0 settled, 3 replicas in its ISR")
    a, b, c = order(nemesis, leader)
    lagging = KillFault([c], broker_only=True)
    nemesis.start(lagging)
    nemesis.require(acknowledged(nemesis, 1500, 40), "1,500 sends committed while C was down")
    kill_a, kill_b = KillFault([a], broker_only=True), KillFault([b], broker_only=True)
    nemesis.start(kill_a)
    # A's session ends first: B is the last in the ISR.
    nemesis.require(nemesis.sleep(1.5), "1.5 s between A's kill and B's")
    nemesis.start(kill_b)
    nemesis.require(nemesis.sleep(5), "5 s with A and B down")
    nemesis.stop(kill_b)
    nemesis.require(nemesis.until(lambda: leads(nemesis, b), 20),
                    "B led within 20 s of its restart")
    nemesis.stop(lagging)
    nemesis.require(nemesis.until(lambda: c in isr(nemesis), 30),
                    "C in the ISR within 30 s of its restart")
    pause = PauseFault([b], broker_only=True)
    nemesis.start(pause)
    nemesis.require(nemesis.until(lambda: leads(nemesis, c), 15),
                    "C led within 15 s of B's pause")
    nemesis.stop(pause)
    nemesis.stop(kill_a)


def stale_end_after_failover(nemesis) -> None:
    """stale-hw-after-failover (KAFKA-2334, KIP-207): the follower is cut
    off but stays in the ISR, so the high watermark stands still while
    acks=1 sends are acknowledged; then it and the leader (last in the
    ISR) are killed. The heal restarts both: the leader leads again, its
    high watermark below its epoch's start until the follower has fetched
    the backlog a batch per fetch. The final phase's ListOffsets(latest)
    comes in that window: the bug answers the stale end, below what the
    consumers had read before the failover (`stale-end`); the fix answers
    OFFSET_NOT_AVAILABLE until it caught up."""
    leader = settled(nemesis, 2)
    nemesis.require(leader, "partition 0 settled, 2 replicas in its ISR")
    follower = order(nemesis, leader)[1]
    cut = BrokerLinkCut(leader.name, [follower])
    nemesis.start(cut)
    nemesis.require(nemesis.sleep(25), "25 s of acks=1 sends with the follower cut off")
    nemesis.start(KillFault([follower], broker_only=True))
    nemesis.stop(cut)
    nemesis.require(nemesis.until(lambda: isr(nemesis) == [leader.name], 15),
                    "the killed follower dropped from the ISR within 15 s")
    nemesis.start(KillFault([leader.name], broker_only=True))


def last_replica_loses_its_tail(nemesis) -> None:
    """hw-advances-under-min-isr (KAFKA-15583, KIP-966's last replica
    standing): C is killed and B cut off until leader A is alone in the
    ISR; with the bug A's high watermark then passes what only A holds,
    and consumers read it. A crashes losing what its disk had not written
    back and, the ISR never emptying, leads again without those records.
    A's disk is synced right after the cut, so only what A appended since
    can be lost: else the crash would lose records acknowledged by two
    replicas too, which only KIP-966's ELR (not in this broker) protects."""
    leader = settled(nemesis, 3)
    nemesis.require(leader, "partition 0 settled, 3 replicas in its ISR")
    a, b, c = order(nemesis, leader)
    nemesis.start(KillFault([c], broker_only=True))
    nemesis.require(nemesis.until(lambda: isr(nemesis) == sorted([a, b]), 15),
                    "the ISR down to A and B within 15 s of C's kill")
    nemesis.require(acknowledged(nemesis, 200, 20), "200 sends committed by A and B")
    cut = BrokerLinkCut(a, [b])
    nemesis.start(cut)
    command(nemesis.cluster.node(a), "sync")
    # The next appends come when producers give up on the stuck ones
    # (about 1.3 s); the gate writes them back 5 s later. A drops B after
    # 2 to 3 s: the crash comes a second after, while consumers read.
    nemesis.require(nemesis.until(lambda: isr(nemesis) == [a], 15) and nemesis.sleep(0.8),
                    "A alone in the ISR within 15 s of the cut")
    crash = DiskFault("lose-unsynced", [a], broker_only=True)
    nemesis.start(crash)
    nemesis.stop(crash)
    nemesis.stop(cut)


def dirty_read_then_failover(nemesis) -> None:
    """fetch-above-hw (dirty reads): the followers are cut off but stay in
    the ISR, so the leader's high watermark stands still while it appends;
    with the bug consumers read those records anyway. The leader is
    killed, a follower leads without them, and new records take their
    offsets."""
    leader = settled(nemesis, 3)
    nemesis.require(leader, "partition 0 settled, 3 replicas in its ISR")
    cut = BrokerLinkCut(leader.name, order(nemesis, leader)[1:])
    nemesis.start(cut)
    nemesis.require(nemesis.sleep(5), "5 s of appends with the followers cut off")
    nemesis.start(KillFault([leader.name], broker_only=True))
    nemesis.stop(cut)
    nemesis.require(nemesis.until(lambda: not leads(nemesis, leader.name), 15),
                    "a follower led within 15 s of the leader's kill")
