"""The small facts of a whole history that every partition's check and the
verdict need: operations per (f, type) with their count and first and last
completion time, fault operations per type, the members of each group, the
subscriptions (topic-wide rows), which processes reported an `assigned`
callback for a topic, and when each applied fault was in force.

They are read with Arrow on the driver, a batch at a time, from the few
columns they need (no Spark job: for a small run that is most of the
cost, and for a large one a scan of four narrow columns).
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from history_analysis.faults import faults_of

SERIES_BUCKETS = 100  # at most this many points in a time series


@dataclass(frozen=True)
class Summary:
    operations: dict[tuple[str, str], tuple[int, int | None, int | None]]
    faults: dict[str, int]                       # nemesis ops but heal, per type
    members: frozenset[tuple[str, int]]          # (group, process)
    subscriptions: tuple[tuple, ...]  # (topic, op_index, invoke_index, process, group)
    assigned_topics: frozenset[tuple[int, str]]  # (process, topic)
    # (start verb, from, to) in ns of each applied fault
    # (history_analysis/faults.py: the start's invocation to the stop's completion).
    fault_spans: tuple[tuple[str, int, int], ...] = ()

    @classmethod
    def of(cls, tables: dict) -> "Summary":
        """From the tables, each an Arrow table or a pyarrow dataset."""
        ops = _aggregate(tables["ops"], ["f", "type"],
                         [("op_index", "count"), ("time", "min"), ("time", "max")])
        faults = _aggregate(tables["nemesis"], ["type"], [("op_index", "count")],
                            where=pc.field("f") != "heal")
        a = _read(tables["assignments"], ["kind", "group", "process", "topic", "op_index",
                                          "invoke_index"])
        members = _aggregate(tables["commits"], ["group", "process"], [])
        grouped = a.filter(pc.is_valid(a["group"]))
        subscribed = a.filter(pc.equal(a["kind"], "subscribe"))
        assigned = a.filter(pc.equal(a["kind"], "assigned"))
        ends = [r["time_max"] for r in ops.to_pylist() if r["time_max"] is not None]
        nemesis = _read(tables["nemesis"], ["f", "type", "invoke_time", "time", "value_json"])
        spans = tuple((f.f, int(f.start), int(f.end)) for f in faults_of(
            nemesis.to_pylist(), max(ends, default=0)) if f.applied)
        return cls(
            operations={(r["f"], r["type"]): (r["op_index_count"], r["time_min"],
                                              r["time_max"]) for r in ops.to_pylist()},
            faults={r["type"]: r["op_index_count"] for r in faults.to_pylist()},
            members=frozenset(zip(members["group"].to_pylist(), members["process"].to_pylist()))
            | frozenset(zip(grouped["group"].to_pylist(), grouped["process"].to_pylist())),
            subscriptions=tuple(sorted(zip(*(subscribed[c].to_pylist() for c in (
                "topic", "op_index", "invoke_index", "process", "group"))))),
            assigned_topics=frozenset(zip(assigned["process"].to_pylist(),
                                          assigned["topic"].to_pylist())),
            fault_spans=spans)

    def series(self) -> tuple[int, int, int] | None:
        """(start, end, bucket width) in ns of the time series: the range of
        the acknowledgements and ok polls in SERIES_BUCKETS buckets; None
        with no ok send."""
        sent = [v for (f, t), v in self.operations.items() if f in ("send", "txn") and t == "ok"]
        if not sent:
            return None
        polled = [v for (f, t), v in self.operations.items()
                  if f in ("poll", "txn") and t == "ok"]
        start = min(first for _, first, _ in sent)
        end = max(last for _, _, last in sent + polled if last is not None)
        return start, end, (end - start) // SERIES_BUCKETS + 1


def _batches(table, columns: list[str], where=None):
    if isinstance(table, ds.Dataset):
        yield from table.to_batches(columns=columns, filter=where)
    else:
        if where is not None:
            table = table.filter(where)
        yield from table.select(columns).to_batches()


def _read(table, columns: list[str]) -> pa.Table:
    batches = list(_batches(table, columns))
    return pa.Table.from_batches(batches) if batches else pa.table(
        {c: pa.array([], table.schema.field(c).type) for c in columns})


def _aggregate(table, keys: list[str], aggregations: list[tuple[str, str]],
               where=None) -> pa.Table:
    """group_by(keys).aggregate(aggregations), a batch at a time; the
    partial results merge (counts add, minima and maxima combine)."""
    merge = {"count": "sum", "min": "min", "max": "max"}
    columns = sorted({*keys, *(c for c, _ in aggregations)})
    parts = [pa.Table.from_batches([b]).group_by(keys).aggregate(aggregations)
             for b in _batches(table, columns, where) if b.num_rows]
    if not parts:
        return pa.table({k: pa.array([], table.schema.field(k).type) for k in keys} | {
            f"{c}_{a}": pa.array([], pa.int64()) for c, a in aggregations})
    partial = pa.concat_tables(parts)
    merged = partial.group_by(keys).aggregate(
        [(f"{c}_{a}", merge[a]) for c, a in aggregations])
    return pa.table({**{k: merged[k] for k in keys},
                     **{f"{c}_{a}": merged[f"{c}_{a}_{merge[a]}"] for c, a in aggregations}})
