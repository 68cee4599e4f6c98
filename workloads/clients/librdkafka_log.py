"""librdkafka's own log, and the one thing the history needs from it: the
positions a consumer restarts by itself.

librdkafka (2.16, the current release) re-runs a partition's offset lookup
whenever an earlier ListOffsets request comes back outdated, whatever the
partition is doing at that moment (`rd_kafka_toppar_handle_Offset` calls
`rd_kafka_toppar_offset_retry` on `RD_KAFKA_RESP_ERR__OUTDATED`). This
happens to a partition that started at `auto.offset.reset`'s offset (no
committed offset yet): it asked the old leader for that offset, then the
leader changed and it asked the new leader. The old leader's request then
times out, or the old leader answers late because it was paused. By then
the partition is fetching from the new leader, and the retry sends it back
to the reset offset. The consumer then returns, in the same assignment and
with no rebalance, records it has already returned. This is a client
behaviour, not a broker's: the broker's log and answers are correct.

librdkafka logs that retry only at debug level, in the `topic` context:
"<topic> [<partition>]: outdated offset response: (re)starting offset
query timer ...". So consumers turn that context on, and `PositionResets`
collects each such line. The rewind itself comes later (a lookup, then a
fetch), and records fetched before it may still be returned in between.
So `Rewinds` reports the reset (docs/history.md, `reset`) with the first
record of that partition that goes back after the line, and the
poll-order checker does not compare reads across it, as it does not across
a rebalance. A restart that never goes back (the partition had read
nothing yet) is forgotten after EXPIRY, so it cannot excuse a later rewind.
"""

from __future__ import annotations

import logging
import re
import threading
import time

LIBRDKAFKA_LOG = logging.getLogger("workloads.clients.librdkafka")
# The debug contexts consumers turn on: `topic` has the retry's line.
CONSUMER_DEBUG = "topic"
RESTARTED = re.compile(
    r"(?P<topic>\S+) \[(?P<partition>\d+)\]: outdated offset response: "
    r"\(re\)starting offset query timer")


class PositionResets(logging.Handler):
    """The (topic, partition) positions librdkafka restarted by itself,
    in the order its log said so, until taken."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self._seen: list[tuple[str, int]] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        found = RESTARTED.search(record.getMessage())
        if found:
            with self._guard:
                self._seen.append((found["topic"], int(found["partition"])))

    def take(self) -> list[tuple[str, int]]:
        with self._guard:
            seen, self._seen = self._seen, []
        return seen


EXPIRY = 30.0      # s a restart waits for its rewind


class Rewinds:
    """Places the restarts `resets` saw in a consumer's polls: with the
    poll whose records first go back on that partition. A poll in which the
    partition goes back after records of its own is cut there, and the rest
    of its records (with the reset) are the next poll's."""

    def __init__(self, resets: PositionResets):
        self.resets = resets
        self._pending: dict[tuple[str, int], float] = {}    # → when its line came
        self._last: dict[tuple[str, int], int] = {}         # the last offset returned

    def place(self, reads: list[dict], moved: set[tuple[str, int]]
              ) -> tuple[list[dict], list[tuple[str, int]], list[dict]]:
        """(this poll's reads, the resets it reports, the reads held for the
        next poll); `moved`: partitions this poll's rebalances moved."""
        now = time.monotonic()
        for tp in self.resets.take():
            self._pending[tp] = now
        for tp in [tp for tp, seen in self._pending.items() if now - seen > EXPIRY or tp in moved]:
            del self._pending[tp]
        for tp in moved:
            self._last.pop(tp, None)
        placed, here = [], set()
        for i, r in enumerate(reads):
            tp = (r["topic"], r["partition"])
            if tp in self._pending and r["offset"] <= self._last.get(tp, -1):
                if tp in here:
                    return reads[:i], placed, reads[i:]
                del self._pending[tp]
                placed.append(tp)
            here.add(tp)
            self._last[tp] = r["offset"]
        return reads, placed, []


def consumer_log(resets: PositionResets) -> logging.Logger:
    """A logger for one consumer: every line to `resets`, and the lines at
    info level and above on to LIBRDKAFKA_LOG (the run's log). It is not
    registered with logging.getLogger, so it goes when the consumer does."""
    logger = logging.Logger(LIBRDKAFKA_LOG.name, logging.DEBUG)
    logger.addHandler(resets)
    logger.addHandler(_Forward(logging.INFO))
    logger.propagate = False
    return logger


class _Forward(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        if LIBRDKAFKA_LOG.isEnabledFor(record.levelno):
            LIBRDKAFKA_LOG.handle(record)
