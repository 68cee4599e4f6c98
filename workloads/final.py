"""The final phase: after healing and a recovery wait, learn where every
partition ends (`end-offsets`, the high watermark) and read every partition
from the beginning until each read reaches its end — so a record that was
acknowledged but is never read is lost, not merely unread (docs/anomalies.md:
`unseen` is proven lost only where the final reads reached the end).

Fresh clients, assign mode, seek to beginning; on an indeterminate poll the
reader becomes a new process with a new client and starts over from the
beginning, until the ends are reached or `time_limit` runs out.
"""

from __future__ import annotations

import time

from history_analysis.history import schema as h
from history_analysis.history.writer import HistoryWriter
from workloads.clients import ClientSettings, Outcome, make_consumer
from workloads.clients.base import partitions_value
from workloads.queue import close_quietly

PHASE = "final"


class FinalReader:
    def __init__(self, history: HistoryWriter, *, bootstrap: str, library: str,
                 settings: ClientSettings, partitions: list[tuple[str, int]],
                 first_process: int, process_step: int):
        self.history = history
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

    def _client(self):
        return make_consumer(self.library, self.bootstrap, self.settings,
                             f"kchaos-final-{self.process}", None)

    def run(self, time_limit: float) -> dict:
        """Read to the ends. Returns {"ends": {...}, "reached": bool,
        "processes": n} for the run's summary."""
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
                return {"ends": None, "reached": False, "processes": processes}
            reached = self._read_to(client, ends, deadline)
            while not reached and time.monotonic() < deadline:
                # Really repeating: a new process, a new client, from the start.
                client, processes = self._replace(client, processes)
                reached = self._read_to(client, ends, deadline)
            return {"ends": {f"{t}-{p}": o for (t, p), o in ends.items()},
                    "reached": reached, "processes": processes}
        finally:
            close_quietly(client)

    def _replace(self, client, processes: int):
        close_quietly(client)
        self.process += self.step
        return self._client(), processes + 1

    def _read_to(self, client, ends: dict[tuple[str, int], int], deadline: float) -> bool:
        """Assign all, seek to beginning, poll until every position reaches
        its end; False on an indeterminate poll or the deadline."""
        outcome = self._op("assign", h.invocation("assign",
                                                  partitions=partitions_value(self.partitions),
                                                  seek_to_beginning=True),
                           lambda: client.assign(self.partitions, True))
        if outcome.type != "ok":
            return False
        positions = {tp: 0 for tp in self.partitions}

        def done() -> bool:
            return all(positions[tp] >= end for tp, end in ends.items())

        while not done() and time.monotonic() < deadline:
            outcome = self._op("poll", h.invocation("poll"), lambda: client.poll(1.0))
            for read in outcome.value.get("reads", ()):
                tp = (read["topic"], read["partition"])
                positions[tp] = max(positions.get(tp, 0), read["offset"] + 1)
            if outcome.type == "info":
                return False
        return done()
