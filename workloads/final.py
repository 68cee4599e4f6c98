"""The final phase: after healing and a recovery wait, learn where every
partition ends (`end-offsets`, the high watermark) and read every partition
from the beginning until each read reaches its end — so a record that was
acknowledged but is never read is lost, not merely unread (docs/anomalies.md:
`unseen` is proven lost only where the final reads reached the end).

With transactions (`stable_within`), the phase first waits for every
partition's last stable offset to meet its high watermark: it asks both ends
(end-offsets under read_uncommitted, then read_committed) until they agree
or `stable_within` seconds have passed. The producers are gone by then, so
every transaction still open must be aborted by its coordinator within its
timeout plus one abort sweep; an end pair still apart at the last asking is
a hanging transaction (`stuck-lso`, checkers/transactions.py).

Fresh clients, assign mode, seek to beginning; on an indeterminate poll the
reader becomes a new process with a new client and starts over from the
beginning, until the ends are reached or `time_limit` runs out.

A partition's position is the highest offset read + 1, or the client's
own position where that is further: past transaction markers and aborted
records, which no poll returns. Reaching the recorded ends is not where
reading stops: the reader goes on
until EMPTY_POLLS polls in a row return nothing, so the reads do not depend
on an end that was stale when it was asked for (a high watermark a new
leader had not caught up yet, or that a broker under-reports). What it read
past the recorded ends is counted per partition (`past_end`).
"""

from __future__ import annotations

import dataclasses
import time

from history_analysis.history import schema as h
from history_analysis.history.writer import HistoryWriter
from workloads.clients import ClientSettings, Outcome, make_consumer
from workloads.clients.base import partitions_value
from workloads.open_transactions import open_transactions
from workloads.worker import close_quietly
from workloads.queue_config import QueueConfig

PHASE = "final"
SETTLE_MARGIN_S = 5.0       # for the abort markers to reach the partition leaders
DESCRIBE_TIMEOUT = 10.0     # for asking who holds a last stable offset


def stable_within(workload: QueueConfig) -> float | None:
    """How long the final phase waits for the last stable offsets (None
    without transactions): a transaction open when its producer stopped is
    aborted within its timeout and one abort sweep."""
    if not workload.transactions:
        return None
    return workload.transaction_expiry_s() + SETTLE_MARGIN_S
# Polls in a row that must return nothing once every end is reached: each
# waits up to TAIL_POLL s, long enough for a fetch to every partition's
# leader (the clients' fetch wait is 500 ms), so three are several fetches.
EMPTY_POLLS, TAIL_POLL = 3, 0.6


class FinalReader:
    def __init__(self, history: HistoryWriter, *, bootstrap: str, library: str,
                 settings: ClientSettings, partitions: list[tuple[str, int]],
                 first_process: int, process_step: int, stable_within: float | None = None):
        self.history = history
        self.stable_within = stable_within
        self.bootstrap, self.library, self.settings = bootstrap, library, settings
        self.partitions = partitions
        self.process = first_process
        self.step = process_step

    def _op(self, f: str, value: dict, call) -> Outcome:
        self.history.append(self.process, "invoke", f, value, phase=PHASE)
        try:
            outcome = call()
        except Exception as e:  # noqa: BLE001 — a client that raises: unknown, start over
            outcome = Outcome("info", value, f"{type(e).__name__}: {e}")
        self.history.append(self.process, outcome.type, f, outcome.value, error=outcome.error,
                            phase=PHASE)
        return outcome

    def _client(self, settings: ClientSettings | None = None):
        return make_consumer(self.library, self.bootstrap, settings or self.settings,
                             f"kchaos-final-{self.process}", None)

    def _await_stable(self) -> list[tuple[str, int]]:
        """Ask both ends of every partition until the last stable offsets
        meet the high watermarks or `stable_within` runs out (whole: a pair
        apart at the last asking is an anomaly, so the wait is never cut
        short; the reads' own time limit starts after it). Each pair is
        recorded; a client that fails is replaced by a new process.
        Returns the partitions whose ends were apart at the last pair asked."""
        wanted = partitions_value(self.partitions)
        until = time.monotonic() + self.stable_within
        def client_for(level: str):
            return self._client(dataclasses.replace(self.settings, isolation_level=level))
        clients = {level: client_for(level) for level in ("read_uncommitted", "read_committed")}
        apart: list[tuple[str, int]] = []
        try:
            while time.monotonic() < until:
                ends = {}
                for level, client in clients.items():
                    outcome = self._op("end-offsets", h.invocation(
                        "end-offsets", partitions=wanted, isolation=level),
                        lambda: client.end_offsets(self.partitions, 10.0))
                    if outcome.type != "ok":
                        close_quietly(client)
                        self.process += self.step
                        clients[level] = client_for(level)
                        break
                    ends[level] = [o["offset"] for o in outcome.value["offsets"]]
                else:
                    apart = [tp for tp, high, stable in zip(
                        self.partitions, ends["read_uncommitted"], ends["read_committed"])
                        if stable != high]
                    if not apart:
                        return []
                time.sleep(1.0)
            return apart
        finally:
            for client in clients.values():
                close_quietly(client)

    def run(self, time_limit: float) -> dict:
        """Read to the ends and past them until the partitions are quiet.
        Returns {"ends": {...}, "reached": bool, "processes": n,
        "past_end": {partition: records read at or above its end}} for the
        run's summary, and "open_transactions" (workloads/open_transactions.py)
        when the last stable offsets did not meet the high watermarks."""
        held = {}
        if self.stable_within is not None:
            apart = self._await_stable()
            if apart:
                held = {"open_transactions": open_transactions(
                    self.bootstrap, self.settings, apart, DESCRIBE_TIMEOUT)}
        return {**self._read(time_limit), **held}

    def _read(self, time_limit: float) -> dict:
        deadline = time.monotonic() + time_limit
        wanted = partitions_value(self.partitions)
        ends: dict[tuple[str, int], int] | None = None
        client = self._client()
        processes = 1
        try:
            while ends is None and time.monotonic() < deadline:
                outcome = self._op("end-offsets", h.invocation("end-offsets", partitions=wanted),
                                   lambda: client.end_offsets(self.partitions, 10.0))
                if outcome.type == "ok":
                    ends = {(o["topic"], o["partition"]): o["offset"]
                            for o in outcome.value["offsets"]}
                else:
                    client, processes = self._replace(client, processes)
                    time.sleep(0.5)
            if ends is None:
                return {"ends": None, "reached": False, "processes": processes, "past_end": {}}
            past_end: dict[tuple[str, int], set[int]] = {}
            reached = self._read_to(client, ends, deadline, past_end)
            while not reached and time.monotonic() < deadline:
                # Really repeating: a new process, a new client, from the start.
                client, processes = self._replace(client, processes)
                reached = self._read_to(client, ends, deadline, past_end)
            return {"ends": {f"{t}-{p}": o for (t, p), o in ends.items()},
                    "reached": reached, "processes": processes,
                    "past_end": {f"{t}-{p}": len(offsets)
                                 for (t, p), offsets in sorted(past_end.items())}}
        finally:
            close_quietly(client)

    def _replace(self, client, processes: int):
        close_quietly(client)
        self.process += self.step
        return self._client(), processes + 1

    def _read_to(self, client, ends: dict[tuple[str, int], int], deadline: float,
                 past_end: dict[tuple[str, int], set[int]]) -> bool:
        """Assign all, seek to beginning, poll until every position reaches
        its end and then EMPTY_POLLS polls in a row read nothing; False on
        an indeterminate poll or the deadline. Offsets read at or above
        their partition's end go into past_end."""
        outcome = self._op("assign", h.invocation("assign",
                                                  partitions=partitions_value(self.partitions),
                                                  seek_to_beginning=True),
                           lambda: client.assign(self.partitions, True))
        if outcome.type != "ok":
            return False
        positions = {tp: 0 for tp in self.partitions}

        def done() -> bool:
            return all(positions[tp] >= end for tp, end in ends.items())

        empty = 0
        while empty < EMPTY_POLLS and time.monotonic() < deadline:
            tail = done()
            outcome = self._op("poll", h.invocation("poll"),
                               lambda: client.poll(TAIL_POLL if tail else 1.0))
            reads = outcome.value.get("reads", ())
            for read in reads:
                tp = (read["topic"], read["partition"])
                positions[tp] = max(positions.get(tp, 0), read["offset"] + 1)
                if read["offset"] >= ends.get(tp, read["offset"] + 1):
                    past_end.setdefault(tp, set()).add(read["offset"])
            if outcome.type == "info":
                return False
            if not reads and not done():
                # Transaction markers, and aborted records under
                # read_committed, take offsets no poll returns: the
                # client's position moves past them.
                for tp, offset in client.positions(list(ends)).items():
                    positions[tp] = max(positions.get(tp, 0), offset)
            empty = empty + 1 if tail and not reads else 0
        return done()
