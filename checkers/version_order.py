"""The version order of each partition (docs/anomalies.md): offset → values,
from acknowledged sends (`ok` with an offset) and from every record any
poll read, whatever the poll's completion type (a broker must never return
a record that is not in its log). Gaps in offsets are legal (transaction
markers, compaction), so skips are judged on the dense order: the rank of
an offset among the offsets that hold values (`Partition.value_offsets`).
Everything is sized by records, never by the largest offset.

This family reports no anomaly of its own: statistics of the version
order, which the other families build on (checkers/partition.py).
"""

from __future__ import annotations

from checkers.collected import Collected, family_result
from checkers.findings import Findings
from checkers.partition import Partition
from checkers.result import CheckResult
from checkers.summary import Summary

FAMILY = "version-order"
TYPES = ()


def findings(part: Partition, out: Findings) -> None:
    offsets = len(part.value_offsets)
    out.stat(FAMILY, "partitions", 1 if offsets else 0)
    out.stat(FAMILY, "offsets_with_values", offsets)
    out.stat(FAMILY, "longest_partition", offsets)


def check(found: Collected, summary: Summary) -> CheckResult:
    return family_result(found, FAMILY, TYPES,
                         totals=("partitions", "offsets_with_values", "longest_partition"))
