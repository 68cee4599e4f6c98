"""What a run's own outcome (test.json, written by `kchaos run`) says about
its verdict: a run whose broker died unasked, whose heal failed, whose
nemesis raised, whose nemesis script's precondition did not happen, or
whose nemesis was asked for faults and applied none did not test what it
was meant to. None of that is in the history, so the
checkers cannot see it; each becomes an `unknown` entry (with a one-line
`summary` and a `reason`), as checkers/coverage.py's do for what the
history shows.
"""

from __future__ import annotations

import json
from pathlib import Path

from history_analysis.run_dir import TEST_FILE


def outcome_unknowns(run_dir: Path) -> dict[str, dict]:
    """The `unknown` entries test.json's outcome calls for (none without one)."""
    try:
        test = json.loads((Path(run_dir) / TEST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    outcome = test.get("outcome") or {}
    unknown: dict[str, dict] = {}
    if outcome.get("node_failures"):
        failures = outcome["node_failures"]
        unknown["node-failures"] = {
            "summary": f"{len(failures)} broker failure(s) nobody asked for",
            "reason": "a broker died without the nemesis killing it, so the run did not "
                      "test the faults it meant to: " + "; ".join(failures),
            "failures": failures}
    if outcome.get("heal_problems"):
        problems = outcome["heal_problems"]
        unknown["heal-failed"] = {
            "summary": f"heal failed ({len(problems)} problem(s))",
            "reason": "healing did not return every node to its baseline, so the final "
                      "reads ran on a cluster still faulted: " + "; ".join(problems),
            "problems": problems}
    if outcome.get("nemesis_error"):
        unknown["nemesis-failed"] = {
            "summary": "the nemesis raised",
            "reason": "the nemesis stopped with an error, so the faults after it were never "
                      f"applied: {outcome['nemesis_error']}",
            "error": outcome["nemesis_error"]}
    if outcome.get("precondition_unmet"):
        unknown["precondition-unmet"] = {
            "summary": "the nemesis script's precondition did not happen",
            "reason": "the cluster never reached the state the nemesis script needed, so "
                      "the run did not test the fault it was written for: "
                      f"{outcome['precondition_unmet']}",
            "precondition": outcome["precondition_unmet"]}
    asked = bool(test.get("nemesis_plan")) or bool((test.get("config") or {}).get(
        "nemesis_script"))
    applied = [e for e in outcome.get("nemesis") or []
               if e.get("type") == "info" and e.get("f") != "heal"]
    if asked and not applied:
        unknown["no-fault-applied"] = {
            "summary": "no fault applied",
            "reason": "faults were scheduled, and none was applied, so the run tested no "
                      "fault",
            "realised": outcome.get("nemesis") or []}
    return unknown
