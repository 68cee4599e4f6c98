"""What every partition found, merged (`Collected`): the counts and examples
of each case type, the statistics and the families' errors; and the
contract a family keeps with the suite (`Family`): from those, and the
summary of the whole history, its result.

Plain Arrow and Python over the findings' rows (checkers/findings.py),
whichever engine brought them together (checkers/colocated.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa
import pyarrow.compute as pc

from checkers.findings import CASE_FIELDS, CASES, MERGE_MAX
from checkers.result import CheckResult
from checkers.summary import Summary


@dataclass
class Collected:
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[dict]] = field(default_factory=dict)
    stats: dict[str, dict[str, dict[int, int]]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, rows: pa.Table, max_examples: int) -> "Collected":
        """From every partition's findings (`OUTPUT` rows, the candidate
        values left out). Examples are chosen in a fixed order (their
        JSON text), so the same history always shows the same examples."""
        result = cls()
        stats = rows.filter(pc.equal(rows["type"], "stat")).group_by(["family", "stat", "key"]) \
            .aggregate([("amount", "sum"), ("amount", "max")])
        for row in stats.to_pylist():
            amount = row["amount_max"] if row["stat"] in MERGE_MAX else row["amount_sum"]
            result.stats.setdefault(row["family"], {}).setdefault(row["stat"], {})[row["key"]] = \
                amount
        result.counts = {type_: counts[0] for type_, counts in result.stats.pop(CASES, {}).items()
                         if counts.get(0)}
        cases = rows.filter(pc.is_in(rows["type"], pa.array(list(CASE_FIELDS))))
        texts: dict[str, list[tuple[str, dict]]] = {}
        for row in cases.to_pylist():      # at most max_examples per type and partition
            case = {name: row[name] for name in CASE_FIELDS[row["type"]]}
            texts.setdefault(row["type"], []).append((json.dumps(case), case))
        if max_examples:
            result.examples = {type_: [{"type": type_, **case}
                                       for _, case in sorted(found, key=lambda t: t[0])
                                       [:max_examples]]
                               for type_, found in texts.items()}
        for row in rows.filter(pc.equal(rows["type"], "error")).to_pylist():
            result.errors.setdefault(row["family"], row["error"])
        return result

    def plain(self, type_: str) -> list[dict]:
        """The examples of a type that is not an anomaly (an undecided
        case), as an `unknown` entry lists them: without the `type` key."""
        return [{k: v for k, v in case.items() if k != "type"}
                for case in self.examples.get(type_, [])]


class Family(Protocol):
    """A family of checks, as the suite asks for its result: each family
    module of checkers/ (lost.py, coverage.py, …) is one."""

    FAMILY: str

    def check(self, found: Collected, summary: Summary) -> CheckResult:
        """The family's result from what every partition found and the
        facts of the whole history; raises if the family cannot tell."""
        ...


class FamilyError(RuntimeError):
    """A family's check raised on some partition."""


def family_result(found: Collected, family: str, types: tuple[str, ...],
                  totals: tuple[str, ...] = ()) -> CheckResult:
    """A family's share of what was found: its counts and examples, and as
    `stats[family]` the `totals` it summed over the partitions; raises
    FamilyError if it failed on any partition."""
    if family in found.errors:
        raise FamilyError(found.errors[family])
    result = CheckResult()
    for type_ in types:
        result.add(type_, found.counts.get(type_, 0), found.examples.get(type_, []))
    if totals:
        stats = found.stats.get(family, {})
        result.stats[family] = {name: stats.get(name, {}).get(0, 0) for name in totals}
    return result
