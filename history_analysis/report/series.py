"""The time series the plots draw, computed from a run's tables with Arrow
and numpy (no Python loop over operations: a run of millions of operations
takes seconds).

- latency: each client operation's (invoke time, latency, outcome), and
  the 50th and 99th percentile in BUCKETS buckets;
- throughput: completions per second by outcome;
- unseen: at each moment, the acknowledged values no `ok` poll had yet
  read (docs/anomalies.md, `unseen`);
(realtime lag per consumer: history_analysis/report/lag.py).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.report.run_data import RunData

BUCKETS = 100
SAMPLES = 400       # points of the unseen curve


def _np(column) -> np.ndarray:
    return column.to_numpy(zero_copy_only=False) if len(column) else np.zeros(0)


def _buckets(end: float) -> tuple[np.ndarray, float]:
    width = max(end, 1e-3) / BUCKETS
    return np.arange(BUCKETS) * width + width / 2, width


def latency(data: RunData):
    ops = data.ops.filter(pc.and_(pc.greater_equal(data.ops["process"], 0),
                                  pc.is_valid(data.ops["time"])))
    series, quantiles = {}, {}
    middles, width = _buckets(data.seconds)
    for f in pc.unique(ops["f"]).to_pylist():
        rows = ops.filter(pc.equal(ops["f"], f))
        start = _np(rows["invoke_time"]).astype(float)
        seconds = _np(rows["time"]).astype(float) - start
        series[f] = (start, seconds, _np(rows["type"]).astype(str))
        if f in ("send", "poll", "txn") and len(start):
            bucket = np.minimum((start / width).astype(int), BUCKETS - 1)
            order = np.lexsort((seconds, bucket))
            bounds = np.searchsorted(bucket[order], np.arange(BUCKETS + 1))
            p50, p99 = np.full(BUCKETS, np.nan), np.full(BUCKETS, np.nan)
            for b in range(BUCKETS):
                chunk = seconds[order][bounds[b]:bounds[b + 1]]
                if len(chunk):
                    p50[b], p99[b] = chunk[len(chunk) // 2], chunk[int(len(chunk) * 0.99)]
            quantiles[f] = (middles, p50, p99)
    return series, quantiles


def throughput(data: RunData) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    ops = data.ops.filter(pc.and_(pc.greater_equal(data.ops["process"], 0),
                                  pc.is_valid(data.ops["time"])))
    middles, width = _buckets(data.seconds)
    rates = {}
    for outcome in ("ok", "info", "fail"):
        times = _np(ops.filter(pc.equal(ops["type"], outcome))["time"]).astype(float)
        counts = np.bincount(np.minimum((times / width).astype(int), BUCKETS - 1),
                             minlength=BUCKETS)
        rates[outcome] = counts / width
    return middles, rates


def acknowledged(data: RunData) -> pa.Table:
    """The ok sends with an offset: topic, partition, offset, value, time, process."""
    sends = data.sends
    return sends.filter(pc.and_(pc.equal(sends["type"], "ok"), pc.is_valid(sends["offset"])))


def unseen(data: RunData) -> tuple[np.ndarray, np.ndarray]:
    sent = data.sends.filter(pc.equal(data.sends["type"], "ok")).select(["value", "time"])
    reads = data.reads.filter(pc.and_(pc.equal(data.reads["type"], "ok"),
                                      pc.is_valid(data.reads["value"])))
    first = reads.group_by("value").aggregate([("time", "min")]).rename_columns(
        ["value", "seen"])
    joined = sent.join(first, "value", join_type="left outer")
    acked = _np(joined["time"]).astype(float)
    seen = _np(pc.fill_null(joined["seen"], np.inf)).astype(float)
    seen = np.maximum(seen, acked)
    end = max(data.seconds, 1e-3)
    times = np.linspace(0, end, SAMPLES)
    counts = (np.searchsorted(np.sort(acked), times, side="right")
              - np.searchsorted(np.sort(seen), times, side="right"))
    return times, counts
