"""One partition's next state: a target ISR plus a leader election.

One idea, Kafka's PartitionChangeBuilder (metadata/.../controller/
PartitionChangeBuilder.java) without reassignment and without ELR (KIP-966,
off by default): every controller decision about a partition — a broker
fenced, a broker unfenced, an AlterPartition — is "this ISR, and keep or
elect a leader", and yields either a new full state or nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from reference_broker.controller.records import PartitionState

NO_LEADER = -1


def elect_leader(state: PartitionState, target_isr: tuple[int, ...],
                 is_acceptable: Callable[[int], bool], unclean: bool) -> tuple[int, bool]:
    """(leader, elected uncleanly) — PartitionChangeBuilder.electAnyLeader.

    Keep the current leader while it is still valid; else the first replica
    in assignment order that is in the target ISR and acceptable
    (registered, unfenced); else, only with unclean.leader.election.enable
    (KIP-106: off by default since 0.11), the first acceptable replica
    whether in the ISR or not; else no leader.
    """
    def valid(replica: int) -> bool:
        return replica in target_isr and is_acceptable(replica)

    if valid(state.leader):
        return state.leader, False
    for replica in state.replicas:
        if valid(replica):
            return replica, False
    if unclean:
        for replica in state.replicas:
            if is_acceptable(replica):
                return replica, True
    return NO_LEADER, False


def change_partition(state: PartitionState, target_isr: tuple[int, ...],
                     is_acceptable: Callable[[int], bool], *,
                     unclean: bool) -> PartitionState | None:
    """The state after moving to `target_isr` and electing, or None when
    nothing changes (Kafka writes no record for a no-op change,
    PartitionChangeBuilder.changeRecordIsNoOp)."""
    leader, was_unclean = elect_leader(state, target_isr, is_acceptable, unclean)
    isr = state.isr
    if leader != state.leader and was_unclean:
        # tryElection: "If the election was unclean, we have to forcibly set
        # the ISR to just the new leader. This can result in data loss!"
        isr = (leader,)
    elif target_isr and target_isr != state.isr:
        # build(): without ELR an empty target ISR is never written — the
        # last member stays, so the ISR is never empty (KafkaReplication.tla's
        # LeaderInIsr; a leaderless partition waits for it to return).
        isr = target_isr
    if leader == state.leader and isr == state.isr:
        return None
    # PartitionRegistration.merge: a leader change (to -1 included) bumps the
    # leader epoch; every change bumps the partition epoch. An ISR shrink
    # alone leaves the leader epoch (metadata versions before 3.6 bumped it
    # to work around KAFKA-15021; triggerLeaderEpochBumpForIsrShrinkIfNeeded).
    return replace(state, leader=leader, isr=isr,
                   leader_epoch=state.leader_epoch + (leader != state.leader),
                   partition_epoch=state.partition_epoch + 1)
