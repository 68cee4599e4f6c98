"""What a run's own outcome (test.json, written by `kchaos run`) says about
its verdict: a run with no outcome to read, whose broker died unasked,
whose final reads did not finish, whose heal failed, whose nemesis raised,
whose nemesis script's precondition did not happen, or whose nemesis was
asked for faults and applied none did not test what it was meant to. None
of that is in the history, so the checkers cannot see it; each becomes an
`unknown` entry (with a one-line `summary` and a `reason`), as
checkers/coverage.py's do for what the history shows.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from history_analysis.run_dir import TEST_FILE


def outcome_unknowns(run_dir: Path) -> dict[str, dict]:
    """The `unknown` entries test.json's outcome calls for; `no-outcome`
    when there is none to read."""
    path = Path(run_dir) / TEST_FILE
    try:
        test = json.loads(path.read_text())
        outcome = test["outcome"]
        if not isinstance(outcome, dict):
            raise ValueError(f"outcome is {type(outcome).__name__}, not an object")
    except (OSError, ValueError, KeyError, TypeError) as e:
        # No outcome is not a clean one: whatever the run itself saw (a
        # death, a failed heal, final reads cut short) cannot be known.
        why = {FileNotFoundError: "there is no test.json", KeyError: "test.json has no outcome"}
        return {"no-outcome": {
            "summary": "no outcome of the run to read",
            "reason": f"{why.get(type(e), f'test.json cannot be read ({e})')}, so what the "
                      "run itself saw — a broker's death, a failed heal, final reads cut "
                      "short — is not known; `kchaos run` writes it when a run ends",
            "path": str(path)}}
    unknown: dict[str, dict] = {}
    if outcome.get("node_failures"):
        failures = outcome["node_failures"]
        unknown["node-failures"] = {
            "summary": f"{len(failures)} daemon death(s) nobody asked for",
            "reason": "a broker or controller died without the nemesis killing it, so the run "
                      "did not test the faults it meant to: " + "; ".join(failures),
            "failures": failures}
    final = outcome.get("final")
    if not (final or {}).get("reached"):
        # The history's own check (checkers/coverage.py `final-reads`) sees
        # only partitions whose end was recorded; this is the reader's word.
        unknown["final-reads-unfinished"] = {
            "summary": "the final reads did not finish",
            "reason": "the final reads did not reach every partition's end within "
                      "--final-time-limit" + ("" if final else " (none were made)")
                      + ", so records the main phase did not read may be lost unseen",
            "final": final}
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
    elif applied:
        missing = kinds_not_applied(test.get("nemesis_plan") or [], applied,
                                    outcome.get("dropped") or [])
        if missing:
            listed = "; ".join(f"{kind} ({why})" for kind, why in missing.items())
            unknown["fault-kind-not-applied"] = {
                "summary": f"never applied: {', '.join(missing)}",
                "reason": "the schedule planned these kinds of fault and none of their "
                          f"starts was applied, so the run did not test them: {listed}",
                "kinds": missing}
    return unknown


def kinds_not_applied(plan: list[dict], applied: list[dict],
                      dropped: list[dict]) -> dict[str, str]:
    """Each kind the plan starts none of whose starts was applied, with why:
    its starts failed (the history's `fail`s say how), or the main phase
    ended before they came (`dropped`)."""
    from nemesis.schedule import make_move
    done = {e.get("f") for e in applied}
    starts = [step["fault"] for step in plan if step.get("action") == "start"]
    planned = Counter(fault["fault"] for fault in starts)
    late = Counter(step["fault"]["fault"] for step in dropped)
    verbs: dict[str, set[str]] = {}
    for fault in starts:
        verbs.setdefault(fault["fault"], set()).update(make_move(fault).verbs)
    return {kind: (f"all {count} planned start(s) dropped: the main phase ended first"
                   if late[kind] == count else f"{count - late[kind]} start(s) failed"
                   + (f", {late[kind]} dropped" if late[kind] else ""))
            for kind, count in planned.items() if not verbs[kind] & done}
