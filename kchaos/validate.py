"""The validation matrix: does kchaos find every bug switch, and only then?

For each recipe (kchaos/recipes/), runs with the switch ON, seeds 1, 2, ...
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
from kchaos.recipes import RECIPES, Recipe
from kchaos.run import RunResult, run_and_check

SOAK_NEMESES = ["partition", "pause", "kill", "restart-all", "disk", "packet-loss"]


@dataclass
class Row:
    switch: str
    expected: list[str]
    attempts: int
    detected_in: int | None = None          # the ON run (1-based) that found it
    on_seconds: list[float] = field(default_factory=list)
    found: dict[str, int] = field(default_factory=dict)     # counts of the detecting run
    clean_runs: int = 0
    false_alarms: list[str] = field(default_factory=list)   # "seed 2: lost-write 3"
    run_dirs: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.detected_in is not None and not self.false_alarms


def recipe_config(recipe: Recipe, *, on: bool, seed: int, store: Path,
                  subnet: str = DEFAULT_SUBNET) -> TestConfig:
    return TestConfig.build(**recipe.config, bugs=[recipe.switch] if on else [], seed=seed,
                            store=store, subnet=subnet,
                            name=f"validate-{recipe.switch}-{'on' if on else 'off'}",
                            nemesis_script=recipe.switch if recipe.script else None)


def validate_recipe(recipe: Recipe, spark, store: Path, *, first_seed: int = 1,
                    progress: Progress | None = None, subnet: str = DEFAULT_SUBNET) -> Row:
    signs = {*recipe.expected, *([_error_sign(recipe)] if recipe.error else [])}
    row = Row(recipe.switch, sorted(signs), recipe.attempts)
    seeds = []
    for attempt in range(recipe.attempts):
        seed = first_seed + attempt
        seeds.append(seed)
        started = time.monotonic()
        result = _run(recipe, True, seed, store, spark, progress, subnet)
        row.on_seconds.append(round(time.monotonic() - started, 1))
        row.run_dirs.append(str(result.run_dir))
        found = _findings(recipe, result)
        if set(found) & signs:
            row.detected_in = attempt + 1
            row.found = found
            break
    for seed in seeds:
        result = _run(recipe, False, seed, store, spark, progress, subnet)
        row.run_dirs.append(str(result.run_dir))
        row.clean_runs += 1
        found = _findings(recipe, result)
        if result.valid is not True or (recipe.error and _error_sign(recipe) in found):
            listed = ", ".join(f"{t} {n}" for t, n in found.items())
            row.false_alarms.append(f"seed {seed}: {result.valid} ({listed or 'no anomaly'})")
    return row


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
    return run_and_check(config, spark,
                         allowed=recipe.allowed, progress=progress or Progress.quiet())


def soak_config(*, minutes: float, seed: int, store: Path,
                subnet: str = DEFAULT_SUBNET) -> TestConfig:
    """Every fault together on the correct broker, acks=all with two
    in-sync replicas required (as Jepsen's Kafka tests run it)."""
    return TestConfig.build(name="soak", seed=seed, store=store, subnet=subnet,
                            time_limit=60 * minutes, nemesis=list(SOAK_NEMESES),
                            nemesis_interval=10,
                            broker_config=["min.insync.replicas=2"], crash_clients_every=30,
                            final_time_limit=120)


def selected(switches: list[str], fast: bool) -> list[Recipe]:
    unknown = [s for s in switches if s not in RECIPES]
    if unknown:
        raise ValueError(f"--switch {unknown[0]!r}: no recipe; choose from "
                         f"{', '.join(sorted(RECIPES))}")
    recipes = [RECIPES[s] for s in switches] if switches else list(RECIPES.values())
    return [r for r in recipes if r.fast] if fast else recipes


def format_table(rows: list[Row]) -> str:
    """A Markdown table: one line per switch."""
    lines = ["| switch | expected | detected | runs needed | time per run (s) | "
             "clean runs valid | found (detecting run) |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        detected = "yes" if row.detected_in else "**no**"
        needed = f"{row.detected_in} of {row.attempts}" if row.detected_in \
            else f"— of {row.attempts}"
        seconds = ", ".join(f"{s:.0f}" for s in row.on_seconds)
        clean = f"{row.clean_runs - len(row.false_alarms)}/{row.clean_runs}" + \
            ("" if not row.false_alarms else " — " + "; ".join(row.false_alarms))
        found = ", ".join(f"{t} {n}" for t, n in row.found.items()) or "—"
        lines.append(f"| `{row.switch}` | {', '.join(row.expected)} | {detected} | {needed} | "
                     f"{seconds} | {clean} | {found} |")
    return "\n".join(lines)
