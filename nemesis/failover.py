"""`failover`: crash a leader in the seconds its followers have fallen
behind.

The classic way to lose acknowledged writes is a leader that acknowledges
what its followers do not have yet and then dies, so that a follower takes
over without those writes. Kafka acknowledges an acks=all write, and an
offset commit (GroupMetadataManager.appendForGroup, requiredAcks=-1), only
once every in-sync replica has it, so on a correct broker this crash loses
nothing that was acknowledged. Random kills and pauses seldom line up this
way: the crash has to hit the leader (or a group's coordinator) while its
followers lag, and before the leader drops them from its ISR. This fault
sets that moment up on purpose.

It is not a `Fault` of its own: it is made of a pause and a kill, applied
through the nemesis, so the history shows each part with the verbs that
every reader knows (`pause`, `kill`, `resume`, then `restart` at the end).
"""

from __future__ import annotations

from nemesis.core import choose_targets
from nemesis.process import KillFault, PauseFault

ROLES = ("leader", "coordinator")


class Failover:
    """Pause every node except the role's node for `hold` seconds, then kill
    that node and resume the others. The role's node is the leader of a
    random partition of the first topic, or the coordinator of one of the
    workload's groups. `hold` should be shorter than the broker's
    `replica.lag.time.max.ms`: then the paused followers are still in the
    ISR and one of them is elected. `end` restarts the killed node."""
    verbs = frozenset({PauseFault.start_f, KillFault.start_f})     # what its history shows

    def __init__(self, role: str, hold: float):     # the schedule draws both (HOLDS)
        if role not in ROLES:
            raise ValueError(f"role={role!r}: choose one of {', '.join(ROLES)}")
        self.role, self.hold = role, hold
        self.crash: KillFault | None = None

    def begin(self, nemesis) -> None:
        cluster = nemesis.cluster
        node = choose_targets(cluster, self.role, nemesis.rng)[0]
        held = PauseFault([n.name for n in cluster.nodes if n.name != node.name])
        if nemesis.start(held) is None:         # recorded as failed; nothing to crash after
            return
        try:
            if nemesis.sleep(self.hold):
                crash = KillFault([node.name])
                if nemesis.start(crash) is not None:
                    self.crash = crash
        finally:
            nemesis.stop(held)

    def end(self, nemesis) -> None:
        if self.crash is not None and self.crash in nemesis.active:
            nemesis.stop(self.crash)
