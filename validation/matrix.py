"""The validation matrix: does kchaos find every bug switch, and only then?

For each recipe (validation/recipes/), runs with the switch ON, seeds 1, 2, ...
until one shows an expected anomaly or the recipe's attempts run out, then
the same seeds with the switch OFF, each of which must be valid — a
switch counts as validated only when both hold. A soak runs every fault
together on the correct broker for minutes and must be valid too.

The table (`format_table`) is what docs/validation.md shows; `kchaos
validate` prints it and exits 1 when a switch was missed or a clean run
raised an alarm.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from cluster.addressing import DEFAULT_SUBNET
from history_analysis.history.reader import HistoryReader
from history_analysis.ingest import HISTORY_FILE
from kchaos.config import TestConfig
from kchaos.progress import Progress
from kchaos.run import RunResult, run_and_check
from validation.figures import DOCS, write_block
from validation.profiles import DEFAULT_PROFILE, every_fault_config
from validation.recipes import RECIPES, Recipe


CLEAN_RUNS = 3          # conclusive runs with the switch off a switch needs
EXTRA_TRIES = 3         # inconclusive runs tolerated on each side before giving up


@dataclass
class Row:
    switch: str
    expected: list[str]
    attempts: int                           # conclusive runs allowed to find it
    detected_in: int | None = None          # the conclusive ON run (1-based) that found it
    on_seconds: list[float] = field(default_factory=list)
    found: dict[str, int] = field(default_factory=dict)     # counts of the detecting run
    clean_runs: int = 0                     # conclusive OFF runs
    clean_needed: int = CLEAN_RUNS
    false_alarms: list[str] = field(default_factory=list)   # "seed 2: lost-write 3"
    inconclusive: list[str] = field(default_factory=list)   # "on, seed 3: <precondition>"
    failures: list[str] = field(default_factory=list)       # the recipe itself broke
    run_dirs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (self.detected_in is not None and not self.false_alarms and not self.failures
                and self.clean_runs >= self.clean_needed)


def recipe_config(recipe: Recipe, *, on: bool, seed: int, store: Path,
                  subnet: str = DEFAULT_SUBNET) -> TestConfig:
    return TestConfig.build(**recipe.config, bugs=[recipe.switch] if on else [], seed=seed,
                            store=store, subnet=subnet,
                            name=f"validate-{recipe.switch}-{'on' if on else 'off'}",
                            nemesis_script=recipe.script,
                            allow=sorted(recipe.allowed))


def validate_recipe(recipe: Recipe, spark, store: Path, *, first_seed: int = 1,
                    clean_runs: int = CLEAN_RUNS, extra_tries: int = EXTRA_TRIES,
                    progress: Progress | None = None, subnet: str = DEFAULT_SUBNET) -> Row:
    """The switch ON with seeds first_seed, first_seed + 1, ... until a
    conclusive run shows a sign of it or `recipe.attempts` conclusive runs
    did not; then OFF from first_seed until `clean_runs` conclusive runs.
    A run is conclusive when the recipe's script reached every
    precondition it states (nemesis/runner.py, Unmet); an inconclusive run
    is retried with the next seed (at most `extra_tries` of them per side)
    and never counts as a detection or a clean run. A recipe whose nemesis
    raised or whose fault did not apply is a failure of the recipe."""
    signs = {*recipe.expected, *([_error_sign(recipe)] if recipe.error else [])}
    row = Row(recipe.switch, sorted(signs), recipe.attempts, clean_needed=clean_runs)

    def conclusive(result: RunResult, side: str, seed: int) -> bool:
        row.run_dirs.append(str(result.run_dir))
        broke = failure(result)
        if broke:
            row.failures.append(f"{side}, seed {seed}: {broke}")
        elif result.outcome.precondition_unmet:
            row.inconclusive.append(f"{side}, seed {seed}: {result.outcome.precondition_unmet}")
        return not broke and not result.outcome.precondition_unmet

    tried, seed, on_runs = 0, first_seed, 0
    while row.detected_in is None and on_runs < recipe.attempts \
            and tried < recipe.attempts + extra_tries:
        started = time.monotonic()
        result = _run(recipe, True, seed, store, spark, progress, subnet)
        row.on_seconds.append(round(time.monotonic() - started, 1))
        tried, seed = tried + 1, seed + 1
        if not conclusive(result, "on", seed - 1):
            continue
        on_runs += 1
        found = _findings(recipe, result)
        if set(found) & signs:
            row.detected_in, row.found = on_runs, found
    tried, seed = 0, first_seed
    while row.clean_runs < clean_runs and tried < clean_runs + extra_tries:
        result = _run(recipe, False, seed, store, spark, progress, subnet)
        tried, seed = tried + 1, seed + 1
        if not conclusive(result, "off", seed - 1):
            continue
        row.clean_runs += 1
        found = _findings(recipe, result)
        if result.valid is not True or (recipe.error and _error_sign(recipe) in found):
            listed = ", ".join(f"{t} {n}" for t, n in found.items())
            row.false_alarms.append(f"seed {seed - 1}: {result.valid} ({listed or 'no anomaly'})")
    return row


def failure(result: RunResult) -> str | None:
    """Why the recipe itself broke in this run: its nemesis raised, or a
    fault it started did not apply (None: neither)."""
    if result.outcome.nemesis_error:
        return f"the nemesis raised: {result.outcome.nemesis_error}"
    failed = [e for e in result.outcome.nemesis if e.get("type") == "fail"]
    if failed:
        return "; ".join(f"{e['f']} did not apply: {e.get('error') or 'no error given'}"
                         for e in failed)
    return None


def _error_sign(recipe: Recipe) -> str:
    return f"client error {recipe.error}"


def _findings(recipe: Recipe, result: RunResult) -> dict[str, int]:
    """The run's anomaly counts, and how often the recipe's client error
    ended a client operation (when it names one and it was seen)."""
    found = {t: n for t, n in sorted(result.counts.items()) if n}
    errors = client_errors(result.run_dir, recipe.error)
    if errors:
        found[_error_sign(recipe)] = errors
    return found


def client_errors(run_dir: Path, error: str | None) -> int:
    """How many client operations of the run ended with `error` in their
    error (0 when the recipe names none)."""
    if error is None:
        return 0
    return sum(1 for event in HistoryReader(run_dir / HISTORY_FILE)
               if event["process"] >= 0 and event["type"] != "invoke"
               and error in (event.get("error") or ""))


def _run(recipe: Recipe, on: bool, seed: int, store: Path, spark,
         progress: Progress | None, subnet: str) -> RunResult:
    config = recipe_config(recipe, on=on, seed=seed, store=store, subnet=subnet)
    return run_and_check(config, spark, progress=progress or Progress.quiet())


def soak_config(*, minutes: float, seed: int, store: Path,
                subnet: str = DEFAULT_SUBNET) -> TestConfig:
    """Every fault together on the correct broker."""
    return every_fault_config(name="soak", seed=seed, store=store, subnet=subnet,
                              time_limit=60 * minutes, final_time_limit=120)


def selected(switches: list[str], fast: bool) -> list[Recipe]:
    unknown = [s for s in switches if s not in RECIPES]
    if unknown:
        raise ValueError(f"--switch {unknown[0]!r}: no recipe; choose from "
                         f"{', '.join(sorted(RECIPES))}")
    recipes = [RECIPES[s] for s in switches] if switches else list(RECIPES.values())
    return [r for r in recipes if r.fast] if fast else recipes


def format_table(rows: list[Row]) -> str:
    """A Markdown table: one line per switch. "runs needed" counts
    conclusive runs; inconclusive ones and the recipe's own failures have
    columns of their own, never counted as found or clean."""
    lines = ["| switch | expected | detected | runs needed | time per run (s) | "
             "clean runs valid | inconclusive (not counted) | found (detecting run) |",
             "|---|---|---|---|---|---|---|---|"]
    for row in rows:
        detected = "yes" if row.detected_in else "**no**"
        if row.failures:
            detected += " — **recipe failed**: " + "; ".join(row.failures)
        needed = f"{row.detected_in} of {row.attempts}" if row.detected_in \
            else f"— of {row.attempts}"
        seconds = ", ".join(f"{s:.0f}" for s in row.on_seconds)
        clean = f"{row.clean_runs - len(row.false_alarms)}/{row.clean_runs}" + \
            (f" (**{row.clean_needed} needed**)" if row.clean_runs < row.clean_needed else "") + \
            ("" if not row.false_alarms else " — " + "; ".join(row.false_alarms))
        inconclusive = "; ".join(row.inconclusive) or "none"
        found = ", ".join(f"{t} {n}" for t, n in row.found.items()) or "—"
        lines.append(f"| `{row.switch}` | {', '.join(row.expected)} | {detected} | {needed} | "
                     f"{seconds} | {clean} | {inconclusive} | {found} |")
    return "\n".join(lines)


def write_docs_table(lines: list[str], *, block: str, measured_on: str) -> Path:
    """The table (and the soak's line) into docs/validation.md's `block`,
    stamped with `measured_on` (validation.figures.stamp() when the runs
    started: the code that ran). The whole matrix, the fast subset and
    other subsets have blocks of their own, so a partial run never passes
    for the matrix."""
    page = DOCS / "validation.md"
    text = "\n".join(lines).strip() + f"\n\n({measured_on}.)"
    write_block(page, block, text)
    return page


def write_generic_table(table: str, commits: list[str], profile: str,
                        checked: list[str] = ()) -> Path:
    """A profile's generic nemesis table (validation/generic.py) into
    docs/validation.md, with the commits its cells were measured on (and
    those whose checkers judged them again, if any)."""
    page = DOCS / "validation.md"
    block = "generic-matrix" if profile == DEFAULT_PROFILE else f"generic-matrix-{profile}"
    again = f"; judged again by the checkers of {', '.join(checked)}" if checked else ""
    write_block(page, block, f"{table}\n\n(profile `{profile}`; cells measured on commit(s) "
                f"{', '.join(commits) or 'none'}{again}.)")
    return page
