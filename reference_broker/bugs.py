"""Bug switches: `--bug NAME` re-creates one historical Kafka bug by flipping
exactly one rule (docs/broker.md's catalogue).

Only switches that change the running broker are listed here: a name that
is accepted but does nothing would let a test believe it exercised a bug.
Each entry says what it breaks and which incident it re-creates.
"""

from __future__ import annotations

from dataclasses import dataclass

from reference_broker.replication import (
    ACKS_ALL_IGNORES_MIN_ISR, EPOCH_LOOKUP_V0, HW_ADVANCES_UNDER_MIN_ISR,
    ISR_EXPAND_BELOW_EPOCH_START, STALE_HW_AFTER_FAILOVER, TRUNCATE_TO_LOCAL_HW,
)


@dataclass(frozen=True)
class Bug:
    name: str
    rule_broken: str
    recreates: str


DEDUP_WINDOW_ONE = "dedup-window-one"
NO_GENERATION_FENCING = "no-generation-fencing"
NO_IDEMPOTENT_DEDUP = "no-idempotent-dedup"
NO_LEADER_EPOCH_FENCING = "no-leader-epoch-fencing"
FETCH_ABOVE_HW = "fetch-above-hw"
OFFSETS_COMMIT_ACKS_ONE = "offsets-commit-acks-one"
COORDINATOR_PARTIAL_LOAD = "coordinator-partial-load"
LSO_INCLUSIVE = "lso-inclusive"
TXN_EXPIRY_NO_BUMP = "txn-expiry-no-bump"
TXN_OFFSETS_WRONG_COORDINATOR = "txn-offsets-wrong-coordinator"

CATALOGUE: dict[str, Bug] = {bug.name: bug for bug in (
    Bug(ACKS_ALL_IGNORES_MIN_ISR,
        "acks=all is answered by whatever the ISR is, even the leader alone "
        "(min.insync.replicas ignored)",
        "pre-0.8.2, KAFKA-1555"),
    Bug(TRUNCATE_TO_LOCAL_HW,
        "a new follower cuts its log at its own high watermark and fetches without epochs",
        "KAFKA-1211 / KIP-101"),
    Bug(EPOCH_LOOKUP_V0,
        "the leader answers a follower's epoch lookup with an offset only, "
        "not the epoch it belongs to",
        "KAFKA-6361 / KIP-279"),
    Bug(ISR_EXPAND_BELOW_EPOCH_START,
        "a follower rejoins the ISR at the high watermark even below the leader's "
        "epoch start offset",
        "KAFKA-7128"),
    Bug(STALE_HW_AFTER_FAILOVER,
        "a new leader answers ListOffsets(latest) with its stale high watermark",
        "KAFKA-2334 / KIP-207"),
    Bug(HW_ADVANCES_UNDER_MIN_ISR,
        "the high watermark advances while the ISR is below min.insync.replicas",
        "KAFKA-15583 / KIP-966"),
    Bug(FETCH_ABOVE_HW,
        "consumers read up to the log end, past the high watermark",
        "dirty reads"),
    Bug(OFFSETS_COMMIT_ACKS_ONE,
        "OffsetCommit is answered after the coordinator's own append, not the ISR's",
        "commits not replicated"),
    Bug(COORDINATOR_PARTIAL_LOAD,
        "a new group coordinator replays only the first offsets.load.buffer.size bytes "
        "of its partition",
        "KAFKA-5600"),
    Bug(DEDUP_WINDOW_ONE,
        "the idempotent producer's dedup window keeps the last batch only, not 5",
        "Kafka 0.11.0's single-batch cache"),
    Bug(NO_GENERATION_FENCING,
        "OffsetCommit is not fenced by member id and generation",
        "zombie commits from a replaced group member"),
    Bug(NO_IDEMPOTENT_DEDUP,
        "a retried idempotent batch is written again instead of answered with its offsets",
        "Redpanda #3039"),
    Bug(LSO_INCLUSIVE,
        "read_committed fetches read up to and including the last stable offset, the first "
        "record of the earliest open transaction",
        "Redpanda PR #3036, Jepsen 2022's aborted reads"),
    Bug(TXN_EXPIRY_NO_BUMP,
        "the coordinator aborts a timed-out transaction at the producer's epoch, not a "
        "bumped one: the producer is not fenced, and its next AddPartitionsToTxn opens a "
        "new transaction that commits without the aborted records",
        "KAFKA-6119"),
    Bug(TXN_OFFSETS_WRONG_COORDINATOR,
        "a group coordinator that loads __consumer_offsets resolves the transactional "
        "offset commits still pending there as aborted, as if it had asked a transaction "
        "coordinator that did not know the transaction, instead of waiting for their "
        "marker: a committed transaction's consumed offsets are lost, and a "
        "consume-transform-produce pipeline processes its input again",
        "Redpanda #10669 / PR #10670"),
    Bug(NO_LEADER_EPOCH_FENCING,
        "leader epochs are neither told to clients (Metadata) nor checked when a request "
        "names one (Fetch, ListOffsets, OffsetForLeaderEpoch): stale requests are served "
        "and consumers cannot detect a truncated log",
        "KAFKA-6880 / KIP-320"),
)}


class UnknownBug(ValueError):
    pass


def parse_bugs(names: list[str]) -> frozenset[str]:
    """The switches named on the command line; an unknown name is an error
    that lists the known ones."""
    unknown = [n for n in names if n not in CATALOGUE]
    if unknown:
        known = ", ".join(sorted(CATALOGUE)) or "none yet"
        raise UnknownBug(f"--bug {unknown[0]!r}: no such bug switch; known: {known} "
                         "(see --list-bugs)")
    return frozenset(names)


def describe() -> str:
    """One line per switch, for --list-bugs."""
    if not CATALOGUE:
        return "no bug switches are wired into this broker yet"
    width = max(map(len, CATALOGUE))
    return "\n".join(f"{b.name:<{width}}  {b.rule_broken} ({b.recreates})"
                     for b in sorted(CATALOGUE.values(), key=lambda b: b.name))
