"""Hypothesis strategies for valid histories, with the table rows they imply.

A history is built as a model run: processes invoke operations of every `f` and
complete them in any interleaving, following docs/history.md's discipline (one
outstanding operation per process, an `info` completion ends a process, the
nemesis is process -1). Alongside the events it counts the rows each Parquet
table must get, so tests can compare ingest against the model.
"""

from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass, field

from hypothesis import strategies as st

from history_analysis.history.schema import NEMESIS_FS

TOPICS = ("jt0", "jt1")


@dataclass
class ModelHistory:
    events: list[tuple] = field(default_factory=list)  # (process, type, f, value, extra)
    rows: Counter = field(default_factory=Counter)

    def expected_rows(self) -> dict[str, int]:
        from history_analysis.tables import TABLES
        return {name: self.rows[name] for name in TABLES}


partitions = st.lists(st.builds(lambda t, p: {"topic": t, "partition": p},
                                st.sampled_from(TOPICS), st.integers(0, 3)), max_size=3)


@st.composite
def _read(draw):
    read = {"topic": draw(st.sampled_from(TOPICS)), "partition": draw(st.integers(0, 3)),
            "offset": draw(st.integers(0, 2**62))}
    if draw(st.booleans()):
        read["value"] = draw(st.integers(-(2**63), 2**63 - 1))
    else:
        read["value"] = None
        read["raw"] = base64.b64encode(draw(st.binary(max_size=8))).decode()
    if draw(st.booleans()):
        read["epoch"] = draw(st.integers(0, 2**31 - 1))
    return read


@st.composite
def _operation(draw, process: int, values: list[int]):
    """(f, asked, completion type, done, extra) for one client operation."""
    f = draw(st.sampled_from(("send", "poll", "txn", "assign", "subscribe", "commit",
                              "committed", "crash", "end-offsets")))
    type_ = "info" if f == "crash" else draw(st.sampled_from(("ok", "ok", "fail", "info")))
    extra = {"phase": "final"} if draw(st.integers(0, 5)) == 0 else {}
    if type_ != "ok" and f != "crash" and draw(st.booleans()):
        extra["error"] = draw(st.sampled_from(("timed out", "NOT_LEADER_OR_FOLLOWER")))
    if f in ("send", "txn"):
        sends = []
        for _ in range(draw(st.integers(0, 3))):
            values[0] += 1
            sends.append({"topic": draw(st.sampled_from(TOPICS)),
                          "partition": draw(st.integers(0, 3)), "value": values[0],
                          "offset": None})
        done_sends = [dict(s, offset=draw(st.none() | st.integers(0, 10**6))
                           if type_ != "fail" else None) for s in sends]
        if f == "send":
            return f, {"sends": sends}, type_, {"sends": done_sends}, extra
        reads = draw(st.lists(_read(), max_size=3))
        return (f, {"sends": sends, "polls": draw(st.booleans())}, type_,
                {"sends": done_sends, "reads": reads}, extra)
    if f == "poll":
        if type_ != "ok" and draw(st.booleans()):
            return f, {}, type_, {}, extra  # an echo of the invocation
        rebalances = draw(st.lists(st.fixed_dictionaries({
            "kind": st.sampled_from(("assigned", "revoked", "lost")),
            "group": st.sampled_from(("g0", "g1")), "partitions": partitions}), max_size=2))
        return f, {}, type_, {"reads": draw(st.lists(_read(), max_size=4)),
                              "rebalances": rebalances}, extra
    if f == "assign":
        asked = {"partitions": draw(partitions), "seek_to_beginning": draw(st.booleans())}
        return f, asked, type_, asked, extra
    if f == "subscribe":
        asked = {"group": "g0", "topics": draw(st.lists(st.sampled_from(TOPICS), max_size=2))}
        return f, asked, type_, asked, extra
    if f == "commit":
        asked = {"group": "g0", "offsets": [dict(p, offset=draw(st.integers(0, 10**6)))
                                            for p in draw(partitions)]}
        return f, asked, type_, asked, extra
    if f == "committed":
        asked = {"group": "g1", "partitions": draw(partitions)}
        if type_ != "ok" and draw(st.booleans()):
            return f, asked, type_, asked, extra
        offsets = [dict(p, offset=draw(st.none() | st.integers(0, 10**6)))
                   for p in asked["partitions"]]
        return f, asked, type_, {"group": "g1", "offsets": offsets}, extra
    if f == "crash":
        return f, {}, "info", {}, extra
    asked = {"partitions": draw(partitions)}
    return f, asked, type_, {"offsets": [dict(p, offset=draw(st.integers(0, 10**6)),
                                              **({"epoch": draw(st.integers(0, 10))}
                                                 if draw(st.booleans()) else {}))
                                         for p in asked["partitions"]]}, extra


def _count_rows(rows: Counter, f: str, type_: str, asked: dict, done: dict | None) -> None:
    """The rows docs/history.md's tables get for one operation (done None: unmatched)."""
    value = done if done is not None else asked
    rows["ops"] += 1
    if f in ("send", "txn"):
        rows["sends"] += len(value["sends"])
    if f in ("poll", "txn") and done is not None:
        rows["reads"] += len(done.get("reads", []))
    if f == "poll" and done is not None:
        rows["assignments"] += sum(len(r["partitions"]) for r in done.get("rebalances", []))
    if f == "commit":
        rows["commits"] += len(value["offsets"])
    if f == "committed" and done is not None:
        rows["committed"] += len(done.get("offsets", []))
    if f == "assign" and type_ != "fail":
        rows["assignments"] += len(asked["partitions"])
    if f == "subscribe" and type_ != "fail":
        rows["assignments"] += len(asked["topics"])
    if f == "end-offsets" and type_ == "ok":
        rows["end_offsets"] += len(done["offsets"])
    if f in NEMESIS_FS:
        rows["nemesis"] += 1


@st.composite
def histories(draw, max_steps: int = 40) -> ModelHistory:
    model = ModelHistory()
    values = [0]
    outstanding: dict[int, tuple] = {}
    idle: list[int] = []
    next_process = 0
    for _ in range(draw(st.integers(0, max_steps))):
        if outstanding and draw(st.booleans()):
            process = draw(st.sampled_from(sorted(outstanding)))
            f, asked, type_, done, extra = outstanding.pop(process)
            model.events.append((process, type_, f, done, extra))
            _count_rows(model.rows, f, type_, asked, done)
            if process >= 0 and type_ != "info":
                idle.append(process)  # after info the worker goes on as a new process
            continue
        if -1 not in outstanding and draw(st.integers(0, 6)) == 0:
            f = draw(st.sampled_from(NEMESIS_FS))
            asked = {"nodes": draw(st.lists(st.sampled_from(["n1", "n2", "n3"]), max_size=3))}
            type_ = draw(st.sampled_from(("info", "fail")))
            outstanding[-1] = (f, asked, type_, dict(asked, done=True), {})
            model.events.append((-1, "invoke", f, asked, {}))
            continue
        if idle and draw(st.booleans()):
            process = idle.pop(draw(st.integers(0, len(idle) - 1)))
        else:
            process, next_process = next_process, next_process + 1
        f, asked, type_, done, extra = draw(_operation(process, values))
        outstanding[process] = (f, asked, type_, done, extra)
        invoke_extra = {"phase": extra["phase"]} if "phase" in extra else {}
        model.events.append((process, "invoke", f, asked, invoke_extra))
    for process, (f, asked, type_, _, _) in outstanding.items():
        _count_rows(model.rows, f, "info", asked, None)
    return model
