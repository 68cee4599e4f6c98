"""`kchaos validate --kafka`: evidence on Apache Kafka itself.

Two kinds of row. The safe configuration (acks=all, replication factor 3,
min.insync.replicas=2, unclean election off) must be valid, with no fault
and under every fault kind, with Kafka's own timings and with the stress
profile's (validation/generic.py): an anomaly there is either a checker's
mistake or Kafka's, and is examined either way. Kafka's own unsafe
settings must be found, with the anomaly a user would expect of each.

Runs are kept as cells, as --generic keeps them (`STORE/validate-kafka/
cells.jsonl`, one per finished run, with the Kafka version as the cell's
profile), so the table fills over several sittings and reruns skip what
is there.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from cluster.addressing import DEFAULT_SUBNET
from cluster.kafka.dist import DEFAULT_VERSION
from kchaos.config import TestConfig
from validation.generic import Cell, read_cells, run_cells
from validation.profiles import NEMESES, PROFILES
from kchaos.progress import Progress
from validation.figures import DOCS, read_block, write_block
from workloads.clients import ClientSettings

CELLS_DIR = "validate-kafka"
TIME_LIMIT = 90.0
SAFE = ["min.insync.replicas=2", "unclean.leader.election.enable=false"]
# An acknowledged record that is gone: `lost-write` when a later read went
# past its offset, `unseen` (proven) when it was at the tail and the final
# reads reached the partition's end without it (docs/anomalies.md).
LOST = frozenset({"lost-write", "unseen"})
# Readers that read only in the final phase, as Jepsen's Kafka test does: a
# record lost before anyone read it shows as lost-write; one read first and
# then replaced by another at its offset shows as inconsistent-offsets.
# Kafka holds an empty group's first rebalance for
# group.initial.rebalance.delay.ms, at most the rebalance timeout
# (max.poll.interval.ms), so both outlast the main phase.
IDLE_POLL_MS = 300_000
IDLE_GROUPS = f"group.initial.rebalance.delay.ms={IDLE_POLL_MS}"


@dataclass(frozen=True)
class KafkaRow:
    key: str                        # `--switch` with --kafka; a cell's switch
    name: str
    faults: str                     # what the row does to Kafka, for the table
    settings: dict                  # TestConfig fields (flat, as TestConfig.build takes them)
    expected: frozenset[str] = frozenset()      # empty: every run must be valid
    seeds: int = 3
    time_limit: float = TIME_LIMIT
    why: str = ""

    @property
    def safe(self) -> bool:
        return not self.expected


def _safe(faults: bool, stress: bool) -> dict:
    """The safe configuration under every fault kind (or none), with the
    stress profile's settings or Kafka's own timings."""
    profile = PROFILES["stress-failover"]() if stress else dict(nemesis=NEMESES)
    broker = [*SAFE, *profile.pop("broker_config", [])]
    every_kind = profile.pop("nemesis")
    return dict(broker_config=broker, nemesis=every_kind if faults else [], nemesis_interval=10,
                crash_clients_every=30, final_time_limit=60, **profile)


def _idle_readers(broker_config: list[str], client: dict | None = None, **settings) -> dict:
    return dict(broker_config=[*broker_config, IDLE_GROUPS], final_time_limit=60,
                consumer_mode="subscribe", client_settings=ClientSettings(
                    max_poll_interval_ms=IDLE_POLL_MS, **(client or {})), **settings)


ROWS: list[KafkaRow] = [
    *[KafkaRow(f"safe-{'faults' if faults else 'clean'}{'-stress' if stress else ''}",
               f"safe, {'stress' if stress else 'Kafka timings'}",
               "every kind" if faults else "none", _safe(faults, stress), seeds=10,
               why="acks=all, RF 3, min.insync.replicas=2, unclean election off: "
                   "no anomaly allowed.")
      for faults in (False, True) for stress in (False, True)],
    KafkaRow("safe-faults-txn", "safe, transactions", "every kind",
             {**_safe(True, False), "transactions": True}, seeds=10,
             why="The safe configuration with transactional producers (a quarter of the "
                 "transactions aborted) and read_committed consumers: no aborted or "
                 "uncommitted read, no committed transaction lost or torn."),
    KafkaRow("acks-1", "acks=1", "partitions; the leader killed and paused", _idle_readers(
        ["unclean.leader.election.enable=false"], dict(acks="1", idempotence=False),
        nemesis=["partition", "kill", "pause"], fault_targets=["leader"], nemesis_interval=8),
        LOST, time_limit=60,
        why="The leader acknowledges before its followers have the records: a leader cut "
            "off from them goes on acknowledging until it learns of its successor, and "
            "truncates all of it then; a killed one loses what they had not fetched. "
            "Without idempotence (which needs acks=all) retried sends are duplicated too."),
    KafkaRow("unclean", "unclean.leader.election.enable=true", "followers out of the ISR, then "
             "the leader killed", _idle_readers(
                 ["unclean.leader.election.enable=true", "replica.lag.time.max.ms=4000"],
                 partitions=1, nemesis_script="lone-leader-acks-then-dies",
                 controller_node=True, recovery_time=3),
             LOST, time_limit=40,
             why="min.insync.replicas=1 (Kafka's default) lets the leader alone in the "
                 "ISR acknowledge acks=all sends; killed, an out-of-sync follower is "
                 "elected. The quorum runs on nodes of its own: paused voters in combined "
                 "mode would stop the ISR from shrinking."),
    KafkaRow("power-loss", "power loss (no fsync: Kafka's default)", "unsynced writes lost on a "
             "majority or every node", _idle_readers(SAFE, nemesis=["power-loss"],
                                                      nemesis_interval=10),
             LOST, time_limit=60,
             why="Kafka acknowledges before fsync: a correlated power loss takes records "
                 "every replica acknowledged."),
    KafkaRow("power-loss-flushed", "power loss, log.flush.interval.messages=1", "the same", _idle_readers(
        [*SAFE, "log.flush.interval.messages=1"], nemesis=["power-loss"],
        nemesis_interval=10), time_limit=60,
        why="Every append is synced before it is acknowledged: the same faults lose "
            "nothing."),
    KafkaRow("no-idempotence", "enable.idempotence=false, retries", "pause and packet loss", dict(
        broker_config=SAFE, nemesis=["pause", "packet-loss"],
        nemesis_interval=8,
        client_settings=ClientSettings(idempotence=False, request_timeout_ms=1000)),
        frozenset({"duplicate"}), time_limit=60,
        why="A send whose response was lost is sent again and appended twice."),
]
BY_KEY = {row.key: row for row in ROWS}


def kafka_config(row: KafkaRow, *, seed: int, store: Path, version: str = DEFAULT_VERSION,
                 subnet: str = DEFAULT_SUBNET) -> TestConfig:
    return TestConfig.build(**row.settings, time_limit=row.time_limit, db="kafka",
                            kafka_version=version, seed=seed, store=store, subnet=subnet,
                            name=f"kafka-{row.key}")


def profile_of(version: str) -> str:
    return f"kafka-{version}"


def fill(rows: list[KafkaRow], spark, store: Path, *, version: str = DEFAULT_VERSION,
         seeds: int | None = None, subnet: str = DEFAULT_SUBNET,
         progress: Progress | None = None, on_cell=lambda cell, skipped: None) -> list[Cell]:
    """Run every row's seeds not in the store yet (`seeds` overrides each
    row's own count); the cells of this Kafka version."""
    plan = [(row.key, seed, row.time_limit) for row in rows
            for seed in range(1, (seeds or row.seeds) + 1)]
    cells = run_cells(plan, lambda key, seed, _: kafka_config(
        BY_KEY[key], seed=seed, store=store / CELLS_DIR, version=version, subnet=subnet),
        spark, store, profile=profile_of(version), cells_dir=CELLS_DIR, progress=progress,
        on_cell=on_cell)
    return [c for c in cells if c.profile == profile_of(version)]


def cells(store: Path, version: str = DEFAULT_VERSION) -> list[Cell]:
    return [c for c in read_cells(store, CELLS_DIR) if c.profile == profile_of(version)]


@dataclass
class Outcome:
    row: KafkaRow
    runs: int = 0
    as_expected: int = 0            # safe: valid runs; unsafe: runs that found an expected type
    unknown: int = 0
    types: dict[str, int] = field(default_factory=dict)     # anomaly type → runs
    median_detection: float | None = None

    @property
    def ok(self) -> bool:
        """Safe: every run valid. Unsafe: found in at least 2 of 3 runs."""
        if self.row.safe:
            return self.runs > 0 and self.as_expected == self.runs
        return self.runs > 0 and 3 * self.as_expected >= 2 * self.runs


def outcomes(cells: list[Cell], rows: list[KafkaRow] = ROWS) -> list[Outcome]:
    out = []
    for row in rows:
        mine = [c for c in cells if c.switch == row.key and c.time_limit == row.time_limit]
        outcome = Outcome(row, runs=len(mine),
                          unknown=sum(1 for c in mine if c.valid == "unknown"))
        found = []
        for c in mine:
            for t in c.counts:
                outcome.types[t] = outcome.types.get(t, 0) + 1
            if row.safe and c.valid is True:
                outcome.as_expected += 1
            elif not row.safe and c.valid is False and row.expected & set(c.counts):
                outcome.as_expected += 1
                found.append(c)
        times = [c.first_detection for c in found if c.first_detection is not None]
        outcome.median_detection = statistics.median(times) if times else None
        out.append(outcome)
    return out


def format_outcomes(table: list[Outcome]) -> str:
    lines = ["| setting | faults | run (s) | expected | as expected | anomaly types found "
             "(runs) | unknown | median time to first detection |",
             "|---|---|---|---|---|---|---|---|"]
    for o in table:
        expected = "valid" if o.row.safe else ", ".join(sorted(o.row.expected))
        verdict = ("not run" if not o.runs else
                   f"{o.as_expected}/{o.runs} {'valid' if o.row.safe else 'found'}"
                   + ("" if o.ok else " **(short)**")
                   + (f"; {o.row.seeds - o.runs} of {o.row.seeds} runs to go"
                      if o.runs < o.row.seeds else ""))
        types = ", ".join(f"{t} ({n})" for t, n in sorted(o.types.items())) or "—"
        median = "—" if o.median_detection is None else f"{o.median_detection:.0f} s"
        lines.append(f"| {o.row.name} | {o.row.faults} | {o.row.time_limit:g} | {expected} | "
                     f"{verdict} | {types} | {o.unknown} | {median} |")
    return "\n".join(lines)


def write_table(table: list[Outcome], cells: list[Cell], version: str,
                page: Path = DOCS / "validation.md") -> Path:
    """The table into docs/validation.md's Apache Kafka section. A row this
    store has no cell of keeps the line the page has for it, and the
    commits it names, so that rows measured on another machine (whose
    store is not here) are not written as not run."""
    before = read_block(page, "kafka-matrix")
    kept = {_row_of(line): line for line in before.splitlines() if line.startswith("| ")}
    lines = format_outcomes(table).splitlines()
    commits = {c.commit for c in cells}
    for i, o in enumerate(table, start=2):
        if not o.runs and _row_of(lines[i]) in kept:
            lines[i] = kept[_row_of(lines[i])]
            commits |= set(_COMMITS.findall(before.split("commit(s)")[-1]))
    write_block(page, "kafka-matrix", "\n".join(lines) + f"\n\n(Apache Kafka {version}; cells "
                f"measured on commit(s) {', '.join(sorted(commits)) or 'none'}.)")
    return page


_COMMITS = re.compile(r"\b[0-9a-f]{7,12}(?:-dirty)?\b")


def _row_of(line: str) -> str:
    """A table line's row: its setting and faults cells."""
    return " | ".join(line.split(" | ")[:2])
