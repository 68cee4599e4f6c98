"""Checker tests: hand-written histories → tables → one checker's result.

`Ops` builds events from compact operations; `run_checker` turns them into
the tables in memory (ingest's own validation and pairing, no JSONL file)
and runs one family of checks on them with the shared Spark session. `write_events`
writes them as a history.jsonl, for the tests of what reads files.
"""

from __future__ import annotations

import json

import pytest

from checkers.history import History
from checkers.result import CheckOptions
from checkers.suite import check_family
from history_analysis.ingest import tables_from_events

pytestmark = pytest.mark.spark


def write_events(run_dir, events) -> None:
    """events: dicts with process, type, f, value (and optional error/phase)."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "history.jsonl", "w") as out:
        for i, event in enumerate(events):
            out.write(json.dumps({"index": i, "time": 10 * i, **event}) + "\n")


class Ops:
    """Builds a history one operation at a time: each call appends the
    invocation and completion of one op (completion right after, unless
    `pending=True`, which leaves it to `complete`)."""

    def __init__(self):
        self.events: list[dict] = []
        self._pending: dict[int, dict] = {}
        self.last = -1  # history index of the last event appended

    def _append(self, event: dict) -> None:
        self.events.append(event)
        self.last = len(self.events) - 1

    def op(self, process, f, asked, done=None, type="ok", pending=False, **extra):
        self._append({"process": process, "type": "invoke", "f": f, "value": asked,
                      **({"phase": extra["phase"]} if "phase" in extra else {})})
        completion = {"process": process, "type": type, "f": f,
                      "value": asked if done is None else done, **extra}
        if pending:
            self._pending[process] = completion
        else:
            self._append(completion)
        return self

    def complete(self, process):
        self._append(self._pending.pop(process))
        return self

    # Shorthands for the common operations.
    def send(self, process, topic, partition, *values, offsets=None, type="ok", **kw):
        offsets = offsets if offsets is not None else [None] * len(values)
        asked = [{"topic": topic, "partition": partition, "value": v, "offset": None}
                 for v in values]
        done = [dict(s, offset=o) for s, o in zip(asked, offsets)]
        return self.op(process, "send", {"sends": asked}, {"sends": done}, type=type, **kw)

    def poll(self, process, *reads, rebalances=(), type="ok", **kw):
        """reads: (topic, partition, offset, value[, epoch]) tuples; epoch:
        the leader epoch the record was appended in."""
        done = {"reads": [{"topic": t, "partition": p, "offset": o, "value": v,
                           **({"epoch": epoch[0]} if epoch else {})}
                          for t, p, o, v, *epoch in reads], "rebalances": list(rebalances)}
        return self.op(process, "poll", {}, done, type=type, **kw)

    def assign(self, process, *partitions, seek_to_beginning=False, **kw):
        asked = {"partitions": [{"topic": t, "partition": p} for t, p in partitions],
                 "seek_to_beginning": seek_to_beginning}
        return self.op(process, "assign", asked, **kw)

    def subscribe(self, process, group, *topics, **kw):
        return self.op(process, "subscribe", {"group": group, "topics": list(topics)}, **kw)

    def commit(self, process, group, topic, partition, offset, **kw):
        asked = {"group": group, "offsets": [{"topic": topic, "partition": partition,
                                              "offset": offset}]}
        return self.op(process, "commit", asked, **kw)

    def committed(self, process, group, topic, partition, offset, **kw):
        asked = {"group": group, "partitions": [{"topic": topic, "partition": partition}]}
        done = {"group": group, "offsets": [{"topic": topic, "partition": partition,
                                             "offset": offset}]}
        return self.op(process, "committed", asked, done, **kw)

    def txn(self, process, *sends, type="ok", committing=None, offsets=None, **kw):
        """One transaction: sends (topic, partition, value, offset) tuples;
        committing: the history time it asked to commit (None: never);
        offsets: (group, [(topic, partition, offset)]), a pipeline's."""
        asked = [{"topic": t, "partition": p, "value": v, "offset": None}
                 for t, p, v, _ in sends]
        consumed = {} if offsets is None else {"group": offsets[0], "offsets": [
            {"topic": t, "partition": p, "offset": o} for t, p, o in offsets[1]]}
        done = {"sends": [dict(a, offset=o) for a, (*_, o) in zip(asked, sends)], "reads": [],
                **({} if committing is None else {"committing": committing}), **consumed}
        return self.op(process, "txn", {"sends": asked, "polls": False, **consumed}, done,
                       type=type, **kw)

    def end_offsets(self, process, *ends, phase="final", isolation=None, **kw):
        """ends: (topic, partition, offset[, epoch]), epoch: the answering
        leader's; phase None: asked in the main phase; isolation: asked
        under this level rather than the client's."""
        asked = {"partitions": [{"topic": t, "partition": p} for t, p, *_ in ends],
                 **({"isolation": isolation} if isolation else {})}
        done = {"offsets": [{"topic": t, "partition": p, "offset": o,
                             **({"epoch": epoch[0]} if epoch else {})}
                            for t, p, o, *epoch in ends]}
        return self.op(process, "end-offsets", asked, done,
                       **({"phase": phase} if phase else {}), **kw)



def history_of(spark, events) -> History:
    """The checkers' view of events (index and time filled in file order,
    10 ns apart), built in memory by ingest's own validation and pairing."""
    return History.from_arrow(spark, tables_from_events(
        [{"index": i, "time": 10 * i, **event} for i, event in enumerate(events)]))


@pytest.fixture
def run_checker(spark):
    """run_checker(family, ops_or_events, **options) -> CheckResult; family:
    a module of checkers/ (checkers.lost, say)."""
    def run(family, ops, **options):
        events = ops.events if isinstance(ops, Ops) else ops
        history = history_of(spark, events)
        try:
            return check_family(history, family, CheckOptions(**options))
        finally:
            history.release()
    return run
