"""What every worker of the queue workload shares: a slot that is one
logical process at a time (docs/history.md), with its own random stream,
that invokes and completes operations in the history; and the counts the
progress display shows."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

from history_analysis.history.writer import HistoryWriter
from workloads.clients import Outcome
from workloads.queue_config import QueueConfig, Target

log = logging.getLogger("workloads.queue")


def close_quietly(client) -> None:
    """Close a client whose process is over; a client in a fatal state may
    raise on close, and nothing more is recorded of it."""
    try:
        client.close()
    except Exception as e:  # noqa: BLE001
        log.warning("closing %r raised %r", client, e)


@dataclass
class Stats:
    """Counts the progress display shows; updated by the workers."""
    ops: Counter = field(default_factory=Counter)       # completion type -> count
    by_f: Counter = field(default_factory=Counter)      # f -> count
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, f: str, outcome: Outcome) -> None:
        with self.lock:
            self.ops[outcome.type] += 1
            self.by_f[f] += 1

    def snapshot(self) -> tuple[int, int]:
        """(operations completed, of which fail or info)."""
        with self.lock:
            return sum(self.ops.values()), self.ops["fail"] + self.ops["info"]


class Worker:
    """One slot: a logical process at a time, one client, one random stream."""

    def __init__(self, slot: int, config: QueueConfig, target: Target, history: HistoryWriter,
                 stats: Stats, stop: threading.Event, phase: str | None = None):
        self.slot = slot
        self.config = config
        self.target = target
        self.history = history
        self.stats = stats
        self.stop = stop
        self.phase = phase
        self.process = slot
        self.rng = random.Random(f"{target.seed}/{slot}")

    def invoke(self, f: str, value: dict) -> None:
        self.history.append(self.process, "invoke", f, value, phase=self.phase)

    def call(self, f: str, value: dict, operation) -> Outcome:
        """Invoke, run `operation` (a client call) and complete. A client
        that raises instead of answering (a library's fatal error, a bug in
        an adapter) leaves the operation unknown: `info`, logged with the
        exception, and the worker goes on as a new process."""
        self.invoke(f, value)
        try:
            outcome = operation()
        except Exception as e:  # noqa: BLE001 — recorded as an indeterminate end
            log.warning("process %d: %s raised %r; recorded as info", self.process, f, e)
            outcome = Outcome("info", value, f"{type(e).__name__}: {e}")
        self.complete(f, outcome)
        return outcome

    def complete(self, f: str, outcome: Outcome) -> None:
        self.history.append(self.process, outcome.type, f, outcome.value, error=outcome.error,
                            phase=self.phase)
        self.stats.record(f, outcome)

    def started(self, start_once):
        """`start_once()` -> (client, outcome), repeated while it ends
        `info` (that ends its process too: the next one starts one pacing
        interval later), until the stop. The last client."""
        while True:
            client, outcome = start_once()
            if outcome.type != "info":
                return client
            close_quietly(client)
            self.next_process()
            if self.stop.wait(self.config.concurrency / self.config.rate):
                return client

    def next_process(self) -> None:
        """An indeterminate end: this process is over; the slot goes on."""
        self.process += self.config.concurrency

    def crash_now(self) -> bool:
        return self._now(self.config.crash_clients_every)

    def _now(self, every: float | None) -> bool:
        """One decision per operation, from the slot's stream: yes about
        every `every` seconds at this worker's share of the rate (never
        with None, and then nothing is drawn)."""
        if every is None:
            return False
        per_worker_rate = self.config.rate / self.config.concurrency
        return self.rng.random() < 1.0 / max(1.0, every * per_worker_rate)

    def paced(self):
        """Yield once per operation at this worker's share of the rate, until stopped."""
        interval = self.config.concurrency / self.config.rate
        next_at = time.monotonic() + self.rng.random() * interval
        while not self.stop.is_set():
            delay = next_at - time.monotonic()
            if delay > 0 and self.stop.wait(delay):
                return
            next_at = max(next_at + interval, time.monotonic() - interval)
            yield
