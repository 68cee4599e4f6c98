"""What the history shows was tested. A run in which something was not
tested cannot be `valid`: it is `unknown`, with the reason (Jepsen's stats
checker fails a run in which an operation type never succeeded).

Owns no anomaly type; adds `unknown` entries, each with a one-line
`summary` (the verdict line shows it) and a `reason`:

- `untested`: an operation the workload issued (any client `f` but `crash`,
  which by the contract never completes `ok`) never completed `ok`;
- `nothing-read-back`: no send was acknowledged, or no read returned an
  acknowledged record (the duplicates family counts both per partition):
  nothing went the whole way, so nothing could be found lost;
- `final-reads`: the final phase recorded a partition's end and its reads
  did not reach it (the rule of checkers/lost.py's docstring, without its
  unplaced-send condition);
- `no-fault-applied`: the nemesis asked for faults and none was applied
  (every fault operation but `heal` completed `fail`).

The run's own outcome (a broker that died unasked, a failed heal, a nemesis
that raised) is not in the history; kchaos/check.py adds those from
test.json.
"""

from __future__ import annotations

from checkers.collected import Collected
from checkers.duplicates import FAMILY as DUPLICATES
from checkers.findings import FINAL_READS_SHORT
from checkers.result import CheckResult
from checkers.summary import Summary
from history_analysis.history.schema import CLIENT_FS

FAMILY = "coverage"
TYPES = ()
NOT_ISSUED_OK = frozenset({"crash"})   # completes `info` by definition


def check(found: Collected, summary: Summary) -> CheckResult:
    result = CheckResult()
    ops = summary.operations
    issued: dict[str, dict[str, int]] = {}
    for (f, type_), (count, _, _) in ops.items():
        if f in CLIENT_FS and f not in NOT_ISSUED_OK:
            issued.setdefault(f, {})[type_] = count
    never_ok = {f: types for f, types in sorted(issued.items()) if not types.get("ok")}
    if never_ok:
        listed = ", ".join(f"{f} (0 of {sum(t.values())} ok)" for f, t in never_ok.items())
        result.unknown["untested"] = {
            "summary": f"never ok: {listed}",
            "reason": "operations the workload issued never completed ok, so what they "
                      f"would show was not tested: {listed}",
            "operations": never_ok}

    tested = found.stats.get(DUPLICATES, {})
    acknowledged = sum(tested.get("acknowledged", {}).values())
    read_back = sum(tested.get("acknowledged_read", {}).values())
    if not read_back:
        what = (f"none of the {acknowledged} acknowledged record(s) was read"
                if acknowledged else "no send was acknowledged")
        result.unknown["nothing-read-back"] = {
            "summary": what,
            "reason": f"{what}, so no record went the whole way from a producer's "
                      "acknowledgement to a consumer, and no loss, duplicate or reordering "
                      "could have been seen",
            "acknowledged": acknowledged}

    short = found.counts.get(FINAL_READS_SHORT, 0)
    if short:
        partitions = sorted(found.plain(FINAL_READS_SHORT),
                            key=lambda c: (c["topic"], c["partition"]))
        result.unknown["final-reads"] = {
            "summary": f"final reads short of the end in {short} partition(s)",
            "reason": "the final phase recorded where each partition ends, and its reads "
                      f"did not reach that end in {short} partition(s): what they did not "
                      "read was not checked",
            "count": short, "partitions": partitions}

    by_type = summary.faults
    if by_type and not by_type.get("info"):
        result.unknown["no-fault-applied"] = {
            "summary": f"no fault applied ({sum(by_type.values())} asked, all failed)",
            "reason": "the nemesis asked for faults and every one failed to apply, so the "
                      "run tested no fault",
            "operations": by_type}
    return result
