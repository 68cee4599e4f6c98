"""The report's plots: PNGs drawn with matplotlib (Agg, no display), every
one on the same time axis (seconds since the run started) with the faults
shaded and labelled, so that a dip in one lines up with a fault in another.

Each function draws one figure from arrays the caller computed
(history_analysis/report/series.py) and writes it to `path`. Big runs are
thinned before drawing (`thin`): a plot shows at most MAX_POINTS raw points
per series, picked by a seeded sample, and says so in its title.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")   # no display; must precede pyplot

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from history_analysis.faults import Fault  # noqa: E402

MAX_POINTS = 20_000
WIDTH, DPI = 11.0, 90
FAULT_COLOURS = {"start-partition": "#d62728", "pause": "#9467bd", "kill": "#8c564b",
                 "lose-unsynced": "#e377c2", "stall-disk": "#7f7f7f",
                 "disk-errors": "#bcbd22", "packet-loss": "#17becf"}
OUTCOME_COLOURS = {"ok": "#2ca02c", "info": "#ff7f0e", "fail": "#d62728"}


def fault_colour(f: str) -> str:
    return FAULT_COLOURS.get(f, "#aaaaaa")


def thin(n: int, keep: np.ndarray | None = None, seed: int = 0) -> np.ndarray:
    """Indexes of at most MAX_POINTS of n points (all when fewer), always
    including those in `keep` (a boolean mask)."""
    if n <= MAX_POINTS:
        return np.arange(n)
    chosen = np.zeros(n, bool)
    chosen[np.random.default_rng(seed).choice(n, MAX_POINTS, replace=False)] = True
    if keep is not None:
        chosen |= keep
    return np.flatnonzero(chosen)


def _figure(height: float = 3.0):
    fig, ax = plt.subplots(figsize=(WIDTH, height), dpi=DPI)
    ax.grid(True, alpha=0.3)
    return fig, ax


def _shade(ax, faults: list[Fault], end: float) -> None:
    """Each applied fault as a band, its label at the top, in lanes so that
    overlapping faults do not print over each other."""
    lanes: list[float] = []
    for fault in (f for f in faults if f.applied):
        ax.axvspan(fault.start, fault.end, color=fault_colour(fault.f), alpha=0.12, lw=0)
        lane = next((i for i, free in enumerate(lanes) if free <= fault.start), len(lanes))
        if lane == len(lanes):
            lanes.append(0.0)
        lanes[lane] = fault.end + end * 0.08
        ax.text(fault.start, 1.0 - 0.09 * (lane + 1), fault.label, transform=ax.get_xaxis_transform(),
                fontsize=7, color=fault_colour(fault.f), clip_on=True)


def _save(fig, ax, path: Path, faults: list[Fault], end: float, title: str,
          ylabel: str) -> Path:
    _shade(ax, faults, end)
    ax.set_xlim(0, max(end, 1e-3))
    ax.set_xlabel("seconds since the run started")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10, loc="left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def latency(path: Path, series: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
            quantiles: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]],
            faults: list[Fault], end: float) -> Path:
    """series: f → (invoke times, latencies, outcomes); quantiles: f →
    (bucket middles, p50, p99). Raw points by outcome, quantile lines by f."""
    fig, ax = _figure(3.6)
    thinned = False
    colours = plt.get_cmap("tab10")
    for i, (f, (times, seconds, outcomes)) in enumerate(sorted(series.items())):
        chosen = thin(len(times), seed=i)
        thinned |= len(chosen) < len(times)
        for outcome, colour in OUTCOME_COLOURS.items():
            mask = outcomes[chosen] == outcome
            if mask.any():
                ax.scatter(times[chosen][mask], seconds[chosen][mask] * 1e3, s=2, alpha=0.35,
                           color=colour, marker="o" if f == "send" else "x" if f == "poll" else
                           ".", rasterized=True, lw=0.4)
    for i, (f, (middles, p50, p99)) in enumerate(sorted(quantiles.items())):
        ax.plot(middles, p50 * 1e3, color=colours(i), lw=1.2, label=f"{f} p50")
        ax.plot(middles, p99 * 1e3, color=colours(i), lw=1.2, ls="--", label=f"{f} p99")
    # Limits set first: latencies all equal, or none above 0, still get an axis.
    positive = np.concatenate([s[s > 0] for _, s, _ in series.values()] + [np.ones(0)])
    ax.set_ylim(*((positive.min() * 1e3 / 2, positive.max() * 1e3 * 2) if len(positive)
                  else (0.1, 10)))
    ax.set_yscale("log")
    ax.legend(fontsize=7, loc="upper right", ncol=4)
    note = f" (raw points thinned to {MAX_POINTS:,} per operation)" if thinned else ""
    return _save(fig, ax, path, faults, end, "Latency: each operation (o send, x poll, . "
                 "other; green ok, orange info, red fail) and quantiles" + note,
                 "latency (ms)")


def throughput(path: Path, middles: np.ndarray, rates: dict[str, np.ndarray],
               faults: list[Fault], end: float) -> Path:
    fig, ax = _figure()
    for outcome, colour in OUTCOME_COLOURS.items():
        if outcome in rates:
            ax.plot(middles, rates[outcome], color=colour, lw=1.2, label=outcome)
    ax.legend(fontsize=8, loc="upper right")
    return _save(fig, ax, path, faults, end, "Throughput: completed operations per second "
                 "by outcome", "operations / s")


def unseen(path: Path, times: np.ndarray, counts: np.ndarray, faults: list[Fault],
           end: float) -> Path:
    fig, ax = _figure()
    ax.step(times, counts, where="post", color="#1f77b4", lw=1.2)
    return _save(fig, ax, path, faults, end, "Unseen: acknowledged values no poll had read "
                 "yet", "values")


def peaks(times: np.ndarray, values: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    """A line of more than `bins` points as the highest point of each of
    `bins` equal runs of points: a thinned line keeps its peaks."""
    if len(times) <= bins:
        return times, values
    starts = np.linspace(0, len(times), bins, endpoint=False).astype(np.int64)
    highest = np.maximum.reduceat(values, starts)
    # The time of each run's highest point: its first index where the value is the max.
    run = np.repeat(np.arange(bins), np.diff(np.r_[starts, len(times)]))
    at = np.flatnonzero(values == highest[run])
    first = np.unique(run[at], return_index=True)[1]
    return times[at[first]], highest


def lag(path: Path, lines: dict[str, tuple[np.ndarray, np.ndarray]], faults: list[Fault],
        end: float) -> Path:
    fig, ax = _figure()
    bins = max(MAX_POINTS // max(len(lines), 1), 100)
    thinned = False
    for name, (times, seconds) in sorted(lines.items()):
        thinned |= len(times) > bins
        times, seconds = peaks(times, seconds, bins)
        ax.plot(times, seconds, lw=0.9, label=name, drawstyle="steps-post")
    if lines:
        ax.legend(fontsize=7, loc="upper right", ncol=min(6, len(lines)))
    note = f" (each line thinned to the highest of {bins:,} runs of polls)" if thinned else ""
    return _save(fig, ax, path, faults, end, "Realtime lag per consumer: how long the oldest "
                 "record it had not read yet had been acknowledged" + note, "seconds")


def timeline(path: Path, nodes: list[str], faults: list[Fault], end: float) -> Path:
    """One row per node, a bar per fault that hit it (all nodes when the
    fault names none)."""
    rows = nodes or sorted({n for f in faults for n in f.nodes}) or ["cluster"]
    fig, ax = _figure(max(1.6, 0.7 + 0.35 * len(rows)))    # room for the title and axis
    for fault in (f for f in faults if f.applied):
        for node in fault.nodes or rows:
            if node in rows:
                y = rows.index(node)
                ax.broken_barh([(fault.start, max(fault.end - fault.start, end * 0.002))],
                               (y - 0.35, 0.7), color=fault_colour(fault.f), alpha=0.8)
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(-0.6, len(rows) - 0.4)
    ax.invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=fault_colour(f)) for f in
               sorted({f.f for f in faults if f.applied})]
    if handles:
        ax.legend(handles, sorted({f.f for f in faults if f.applied}), fontsize=7,
                  loc="upper right", ncol=len(handles))
    ax.set_xlim(0, max(end, 1e-3))
    ax.set_xlabel("seconds since the run started")
    ax.set_title("Faults: which node each fault hit, and when", fontsize=10, loc="left")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


def offsets(path: Path, title: str, writes: tuple[np.ndarray, np.ndarray, np.ndarray],
            reads: tuple[np.ndarray, np.ndarray, np.ndarray], marked: np.ndarray,
            faults: list[Fault], end: float, cut: str = "") -> Path:
    """writes, reads: (times, offsets, processes); marked: the offsets of
    the anomalies, drawn as red lines."""
    fig, ax = _figure(3.8)
    colours = plt.get_cmap("tab20")
    for (times, offs, procs), marker, size, label in (
            (reads, ".", 4, "read (colour: process)"),
            (writes, "^", 14, "acknowledged send (colour: process)")):
        if len(times):
            ax.scatter(times, offs, c=colours(procs % 20), s=size, marker=marker,
                       rasterized=True, lw=0, label=label)
    for offset in marked:
        ax.axhline(offset, color="red", lw=0.8, alpha=0.7)
    ax.legend(fontsize=7, loc="upper left")
    return _save(fig, ax, path, faults, end, title + (f" ({cut})" if cut else ""), "offset")
