"""Nemesis scripts: faults driven by hand at the moment the cluster's state
decides (the ISR has shrunk to the leader, the coordinator is known), which
a timed schedule cannot promise. `kchaos run --nemesis-script NAME` runs
one in place of the schedule (nemesis/runner.py); the validation recipes
(validation/recipes/) name theirs.
"""

from __future__ import annotations

from nemesis.runner import Script
from nemesis.scripts import clients, replication

SCRIPTS: dict[str, Script] = {
    "lone-leader-acks-then-dies": replication.lone_leader_acks_then_dies,
    "crash-follower-then-leader": replication.crash_follower_then_leader,
    "alternating-epochs": replication.alternating_epochs,
    "premature-isr-join": replication.premature_isr_join,
    "stale-end-after-failover": replication.stale_end_after_failover,
    "last-replica-loses-its-tail": replication.last_replica_loses_its_tail,
    "dirty-read-then-failover": replication.dirty_read_then_failover,
    "stall-acks": clients.stall_acks,
    "lose-unreplicated-commits": clients.lose_unreplicated_commits,
    "fail-over-coordinator": clients.fail_over_coordinator,
    "strand-pending-offsets": clients.strand_pending_offsets,
    "truncate-under-readers": clients.truncate_under_readers,
}
# Scripts whose faults need the data directories on disk gates (nemesis/disk).
DISK_SCRIPTS = frozenset({"last-replica-loses-its-tail"})
