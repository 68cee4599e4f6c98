"""Recipes for the transactional bug switches (issue 31's catalogue in
docs/broker.md): the workload's transactional producers (`transactions`)
under read_committed consumers — aborting half their transactions, or
stalling some past their timeout (`transaction_stall_probability`)."""

from __future__ import annotations

from validation.profiles import FAST_BROKERS
from validation.recipes.clients import ONE_COORDINATOR
from validation.recipes.recipe import Recipe

RECIPES: list[Recipe] = [
    Recipe(
        switch="lso-inclusive",
        expected=frozenset({"aborted-read", "precommitted-read"}),
        config=dict(time_limit=20, transactions=True, abort_probability=0.5,
                    consumer_mode="assign", recovery_time=3, final_time_limit=30),
        why="No fault is needed: consumers poll at the tail, so a read_committed fetch "
            "often meets a transaction still open, and the inclusive bound hands them its "
            "first record; half the transactions then abort, and that read is an aborted "
            "read (the record of a transaction that failed).",
    ),
    Recipe(
        switch="txn-expiry-no-bump",
        expected=frozenset({"lost-write", "torn-transaction"}),
        config=dict(time_limit=20, transactions=True, transaction_timeout_ms=2000,
                    transaction_stall_probability=0.1,
                    consumer_mode="assign", recovery_time=3, final_time_limit=30,
                    broker_config=[
                        "transaction.abort.timed.out.transaction.cleanup.interval.ms=500"]),
        why="No fault is needed (KAFKA-6119): a tenth of the transactions stall after "
            "their first partition's records, past the 2-s timeout, and the coordinator "
            "aborts them. The producer then sends to other partitions and commits; the "
            "bump would fence it, without it that commit is answered and its first "
            "records, aborted, are never read.",
    ),
    Recipe(
        switch="txn-offsets-wrong-coordinator",
        expected=frozenset({"eos-duplicate"}),
        # The duplicate outputs are also `duplicate`s, and the pipeline's
        # rewinds fetch the offsets the switch lost.
        allowed=frozenset({"duplicate", "stale-committed-offset"}),
        config=dict(time_limit=40, transactions=True, pipeline=True, concurrency=6,
                    abort_probability=0.5,
                    consumer_mode="assign", recovery_time=3, final_time_limit=30,
                    broker_config=FAST_BROKERS + ONE_COORDINATOR
                    + ["offsets.topic.replication.factor=2",
                       "transaction.state.log.num.partitions=1"]),
        script="strand-pending-offsets",
        why="Redpanda #10669: the group coordinator is cut off from the transaction "
            "coordinator (not a replica of the offsets, kept on two nodes) for 5 s, so "
            "committed transactions leave their offsets pending; then it is killed, and "
            "the follower that loads __consumer_offsets resolves them as aborted. The "
            "pipeline's next abort (half of them) rewinds to the offsets that are left, "
            "processes what it had processed again, and commits it a second time.",
    ),
]
