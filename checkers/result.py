"""What a checker returns, and how verdicts merge (false > unknown > true).

A checker reports anomalies by type (a count and up to `max_examples` cases,
each a JSON object with `type`, where it happened, the offsets and values,
and `evidence`: the history indexes of the operations that prove it), things
it could not decide (`unknown`), and statistics. Whether a type makes the run
invalid is decided once, by `verdict`, from the options' allowed types.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

UNKNOWN = "unknown"
Verdict = Union[bool, str]

# The catalogue of docs/anomalies.md (without the transactional G0/G1c family).
ANOMALY_TYPES = (
    "lost-write", "unseen", "stale-end", "duplicate", "inconsistent-offsets", "garbage-read",
    "aborted-read", "nonmonotonic-send", "int-nonmonotonic-send", "int-send-skip",
    "nonmonotonic-poll", "poll-skip", "int-nonmonotonic-poll", "int-poll-skip",
    "stale-committed-offset", "zombie-commit", "group-lost", "resume-skip", "resume-rewind",
    "precommitted-read", "torn-transaction", "stuck-lso", "eos-duplicate", "eos-missing",
)

# docs/anomalies.md: reported, but normal for Kafka.
ALLOWED_BY_DEFAULT = frozenset({"int-send-skip", "resume-rewind"})
MAX_EXAMPLES = 32     # cases kept per anomaly type, unless a run says otherwise


@dataclass(frozen=True)
class CheckOptions:
    max_examples: int = MAX_EXAMPLES
    allowed: frozenset[str] = ALLOWED_BY_DEFAULT


@dataclass
class CheckResult:
    counts: dict[str, int] = field(default_factory=dict)
    anomalies: dict[str, list[dict]] = field(default_factory=dict)  # examples, capped
    unknown: dict[str, dict] = field(default_factory=dict)  # type -> {"count", "reason", ...}
    errors: list[dict] = field(default_factory=list)  # {"checker", "error"}
    stats: dict = field(default_factory=dict)

    def add(self, type_: str, count: int, examples: list[dict]) -> None:
        if count:
            self.counts[type_] = self.counts.get(type_, 0) + count
            self.anomalies.setdefault(type_, []).extend(examples)

    def merge(self, other: "CheckResult", max_examples: int) -> None:
        for type_, count in other.counts.items():
            self.add(type_, count, other.anomalies.get(type_, []))
            self.anomalies[type_] = self.anomalies[type_][:max_examples]
        self.unknown.update(other.unknown)
        self.errors.extend(other.errors)
        self.stats.update(other.stats)

    def verdict(self, allowed: frozenset[str]) -> Verdict:
        if any(n and t not in allowed for t, n in self.counts.items()):
            return False
        if self.unknown or self.errors:
            return UNKNOWN
        return True


def merge_verdicts(verdicts) -> Verdict:
    """false > unknown > true."""
    verdicts = list(verdicts)
    if False in verdicts:
        return False
    if UNKNOWN in verdicts:
        return UNKNOWN
    return True
