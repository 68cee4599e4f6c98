"""A model Kafka run for property tests of the checker suite.

`runs()` draws a correct run: per partition a model log (a list of values);
producers append batches (`ok` with their offsets, `info` sends that may or
may not have been written, `fail` sends that were not); a consumer in assign
mode reads its partitions in order; members of group g0 subscribe, get their
partitions through `assigned` callbacks, resume at the committed offsets,
commit after processing (sometimes not before crashing); observers read the
committed offsets; the final phase records the ends and reads everything.
Operations run one after another, so history order is real-time order.

mutations.py breaks one thing in such a run at a time.
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field

from hypothesis import strategies as st

TOPIC = "t"
GROUP = "g0"


@dataclass
class Op:
    process: int
    f: str
    asked: dict
    done: dict
    type: str = "ok"
    phase: str = "main"
    error: str | None = None


@dataclass
class Run:
    ops: list[Op] = field(default_factory=list)
    partitions: int = 1

    def events(self) -> list[dict]:
        events = []
        for op in self.ops:
            extra = {"phase": op.phase} if op.phase != "main" else {}
            events.append({"process": op.process, "type": "invoke", "f": op.f,
                           "value": op.asked, **extra})
            done = {"process": op.process, "type": op.type, "f": op.f, "value": op.done,
                    **extra}
            if op.error:
                done["error"] = op.error
            events.append(done)
        return events

    def reads(self, phase: str | None = None):
        """(op, read) for every read, in history order."""
        for op in self.ops:
            if op.f == "poll" and (phase is None or op.phase == phase):
                for read in op.done.get("reads", []):
                    yield op, read


def tp(p: int) -> dict:
    return {"topic": TOPIC, "partition": p}


@st.composite
def runs(draw, max_steps: int = 40) -> Run:
    run = Run(partitions=draw(st.integers(1, 3)))
    parts = range(run.partitions)
    logs: dict[int, list[int]] = {p: [] for p in parts}
    fresh = itertools.count()
    values = itertools.count(1)
    producers = [next(fresh), next(fresh)]
    assigned: dict[int, int] = {}  # the assign-mode consumer's positions
    assign_process = next(fresh)
    member: dict | None = None  # {"process", "positions", "new"}
    commits: dict[int, int] = {}  # what the group coordinator holds

    def send(slot: int, kind: str) -> None:
        p = draw(st.sampled_from(parts))
        batch = [next(values) for _ in range(draw(st.integers(1, 3)))]
        asked = [{"topic": TOPIC, "partition": p, "value": v, "offset": None} for v in batch]
        if kind == "ok":
            done = [dict(s, offset=len(logs[p]) + i) for i, s in enumerate(asked)]
            logs[p].extend(batch)
            run.ops.append(Op(producers[slot], "send", {"sends": asked}, {"sends": done}))
            return
        if kind == "info" and draw(st.booleans()):
            logs[p].extend(batch)  # written, but the client never heard back
        error = "timed out" if kind == "info" else "invalid config"
        run.ops.append(Op(producers[slot], "send", {"sends": asked},
                          {"sends": copy.deepcopy(asked)}, type=kind, error=error))
        if kind == "info":
            producers[slot] = next(fresh)  # an indeterminate op ends the process

    def read(positions: dict[int, int]) -> list[dict]:
        reads = []
        for p in sorted(positions):
            take = draw(st.integers(0, 3))
            for offset in range(positions[p], min(positions[p] + take, len(logs[p]))):
                reads.append({"topic": TOPIC, "partition": p, "offset": offset,
                              "value": logs[p][offset]})
            positions[p] = min(positions[p] + take, len(logs[p]))
        return reads

    for _ in range(draw(st.integers(8, max_steps))):
        action = draw(st.sampled_from(("send", "send", "send", "info-send", "fail-send",
                                       "poll-assigned", "poll-group", "poll-group",
                                       "poll-group", "committed", "committed",
                                       "crash-member", "crash-member")))
        if action.endswith("send"):
            send(draw(st.integers(0, 1)), {"send": "ok", "info-send": "info",
                                           "fail-send": "fail"}[action])
        elif action == "poll-assigned":
            if not assigned:
                chosen = sorted(set(draw(st.lists(st.sampled_from(parts), min_size=1))))
                asked = {"partitions": [tp(p) for p in chosen], "seek_to_beginning": True}
                run.ops.append(Op(assign_process, "assign", asked, copy.deepcopy(asked)))
                assigned = {p: 0 for p in chosen}
            run.ops.append(Op(assign_process, "poll", {},
                              {"reads": read(assigned), "rebalances": []}))
        elif action == "poll-group":
            rebalances = []
            if member is None:
                member = {"process": next(fresh),
                          "positions": {p: commits.get(p, 0) for p in parts}}
                asked = {"group": GROUP, "topics": [TOPIC]}
                run.ops.append(Op(member["process"], "subscribe", asked, copy.deepcopy(asked)))
                rebalances = [{"kind": "assigned", "group": GROUP,
                               "partitions": [tp(p) for p in parts]}]
            before = dict(member["positions"])
            reads = read(member["positions"])
            run.ops.append(Op(member["process"], "poll", {},
                              {"reads": reads, "rebalances": rebalances}))
            moved = [p for p in parts if member["positions"][p] != before[p]]
            if moved and draw(st.integers(0, 3)):  # usually commits what it processed
                offsets = [dict(tp(p), offset=member["positions"][p]) for p in moved]
                asked = {"group": GROUP, "offsets": offsets}
                run.ops.append(Op(member["process"], "commit", asked, copy.deepcopy(asked)))
                commits.update({p: member["positions"][p] for p in moved})
        elif action == "committed":
            asked = {"group": GROUP, "partitions": [tp(p) for p in parts]}
            done = {"group": GROUP, "offsets": [dict(tp(p), offset=commits.get(p))
                                                for p in parts]}
            run.ops.append(Op(next(fresh), "committed", asked, done))
        elif action == "crash-member" and member is not None:
            run.ops.append(Op(member["process"], "crash", {}, {}, type="info"))
            member = None

    final = next(fresh)
    ends = {"partitions": [tp(p) for p in parts]}
    run.ops.append(Op(final, "end-offsets", ends,
                      {"offsets": [dict(tp(p), offset=len(logs[p])) for p in parts]},
                      phase="final"))
    asked = {"partitions": [tp(p) for p in parts], "seek_to_beginning": True}
    run.ops.append(Op(final, "assign", asked, copy.deepcopy(asked), phase="final"))
    for p in parts:
        reads = [{"topic": TOPIC, "partition": p, "offset": o, "value": v}
                 for o, v in enumerate(logs[p])]
        run.ops.append(Op(final, "poll", {}, {"reads": reads, "rebalances": []},
                          phase="final"))
    return run
