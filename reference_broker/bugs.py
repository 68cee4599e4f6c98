"""Bug switches: `--bug NAME` re-creates one historical Kafka bug by flipping
exactly one rule (BROKER.md's catalogue).

Only switches that change the running broker are listed here: a name that
is accepted but does nothing would let a test believe it exercised a bug.
Each entry says what it breaks and which incident it re-creates.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bug:
    name: str
    rule_broken: str
    recreates: str


DEDUP_WINDOW_ONE = "dedup-window-one"
NO_GENERATION_FENCING = "no-generation-fencing"
NO_IDEMPOTENT_DEDUP = "no-idempotent-dedup"
NO_LEADER_EPOCH_FENCING = "no-leader-epoch-fencing"

CATALOGUE: dict[str, Bug] = {bug.name: bug for bug in (
    Bug(DEDUP_WINDOW_ONE,
        "the idempotent producer's dedup window keeps the last batch only, not 5",
        "Kafka 0.11.0's single-batch cache"),
    Bug(NO_GENERATION_FENCING,
        "OffsetCommit is not fenced by member id and generation",
        "zombie commits from a replaced group member"),
    Bug(NO_IDEMPOTENT_DEDUP,
        "a retried idempotent batch is written again instead of answered with its offsets",
        "Redpanda #3039"),
    Bug(NO_LEADER_EPOCH_FENCING,
        "Fetch, ListOffsets and OffsetForLeaderEpoch ignore the client's current leader epoch",
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
