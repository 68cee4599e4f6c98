"""Statistics that are not anomalies: operations by type, and realtime lag.

Realtime lag (docs/anomalies.md): for each poll and partition it read, how far
behind the latest acknowledged offset it started — the highest offset of an
`ok` send completed before the poll was invoked, minus the first offset the
poll read there (0 when it was not behind). Each partition counts its lags
(a histogram: lags repeat), and the percentiles come from the merged counts.
"""

from __future__ import annotations

import numpy as np

from checkers.collected import Collected, family_result
from checkers.findings import Findings
from checkers.grouping import NONE, order, starts
from checkers.partition import OK, Partition
from checkers.result import CheckResult
from checkers.summary import Summary

FAMILY = "stats"
TYPES = ()
PERCENTILES = (0.5, 0.9, 0.99)


def findings(part: Partition, out: Findings) -> None:
    s, r = part.sends, part.reads
    acked = (s.type == OK) & (s.offset != NONE)
    by = order(s.time[acked], s.offset[acked])
    ack_time = s.time[acked][by]
    highest = np.maximum.accumulate(s.offset[acked][by]) if acked.any() else ack_time
    polls = r.where(~r.final)
    by = order(polls.op, polls.pos)
    first = starts(polls.op[by])
    first_offset = polls.offset[by][first]
    invoked = polls.invoke_time[by][first]
    # Acknowledgements at the same instant as a poll's invocation come first.
    before = np.searchsorted(ack_time, invoked, side="right") - 1
    latest = np.where(before >= 0, highest[np.maximum(before, 0)] if len(highest) else NONE, NONE)
    lag = np.where(before >= 0, np.maximum(latest - first_offset, 0), 0)
    lags, counts = np.unique(lag, return_counts=True)
    out.stats(FAMILY, "lag", lags, counts)


def percentiles(histogram: dict[int, int]) -> dict:
    """The realtime-lag statistics from merged counts: for each percentile
    q, the smallest lag with at least q of all polls at or below it."""
    polls = sum(histogram.values())
    if not polls:
        return {"polls": 0}
    lags = np.array(sorted(histogram), dtype=np.int64)
    cumulative = np.cumsum([histogram[lag] for lag in lags])
    picked = {f"p{int(q * 100)}": int(lags[np.searchsorted(cumulative, q * polls)])
              for q in PERCENTILES}
    return {"polls": polls, "unit": "offsets", **picked, "max": int(lags[-1])}


def by_f(ops_counts: dict[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    by_f: dict[str, dict[str, int]] = {}
    for (f, type_), count in sorted(ops_counts.items()):
        by_f.setdefault(f, {})[type_] = count
    return by_f




def check(found: Collected, summary: Summary) -> CheckResult:
    result = family_result(found, FAMILY, TYPES)
    counts = {key: count for key, (count, _, _) in summary.operations.items()}
    result.stats["ops"] = by_f(counts)
    result.stats["realtime_lag"] = percentiles(found.stats.get(FAMILY, {}).get("lag", {}))
    return result
