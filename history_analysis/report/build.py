"""`report.html` for a run directory: the verdict and its reasons, the run's
settings, each anomaly type in words with its cases and their history
excerpts, the faults and how available the system was under each, plots on
one time axis, offset diagrams for the partitions with anomalies, and an
operation timeline.

The page is kept under MAX_BYTES: the timeline gets what the rest leaves,
and the page says what was cut. A report is an explanation, never a
verdict: `write_report_quietly` logs any failure and returns None, so a
report or plot error cannot change a run's verdict or exit code.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.report import explain, plots, series
from history_analysis.report.excerpts import read_lines, wanted
from history_analysis.report.faults import availability
from history_analysis.report.lag import lag
from history_analysis.report.page import (
    document, excerpt, plot, pre_json, table, text, verdict_badge,
)
from history_analysis.report.run_data import RunData
from history_analysis.report import timeline
from history_analysis.run_dir import HISTORY_FILE, PLOTS_DIR, REPORT_FILE

log = logging.getLogger("history_analysis.report")

MAX_BYTES = 4_000_000           # the page, plots aside
CASES_SHOWN = 5                 # per anomaly type; results.json keeps more
EVIDENCE_SHOWN = 4              # operations of a case's evidence excerpted
DIAGRAMS = 6                    # partitions with an offset diagram
_BYTES_PER_OPERATION = 260      # of the timeline, for its budget


def write_report_quietly(run_dir: str | os.PathLike) -> Path | None:
    try:
        return write_report(run_dir)
    except Exception:  # noqa: BLE001 — an explanation must not change a verdict
        log.exception("could not write the report of %s", run_dir)
        return None


def write_report(run_dir: str | os.PathLike) -> Path:
    run_dir = Path(run_dir)
    data = RunData.load(run_dir)
    scratch = run_dir / f".{PLOTS_DIR}.{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir()
    try:
        sections = [_header(data), _anomalies(data), _faults(data, scratch),
                    _plots(data, scratch), _diagrams(data, scratch), _files(data)]
        used = sum(len(s) for s in sections)
        sections.insert(-1, _timeline(data, max(0, MAX_BYTES - used)))
        final = run_dir / PLOTS_DIR
        shutil.rmtree(final, ignore_errors=True)
        scratch.rename(final)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    path = run_dir / REPORT_FILE
    page = document(f"kchaos — {data.test.get('name', run_dir.name)} {run_dir.name}", sections)
    partial = path.with_suffix(".html.tmp")
    partial.write_text(page, encoding="utf-8")
    partial.replace(path)
    return path


# -- sections -------------------------------------------------------------

def _final_reads(test: dict) -> str:
    """What the run's outcome says its final reads did, as a clause."""
    final = (test.get("outcome") or {}).get("final") or {}
    ends = final.get("ends") or {}
    if final.get("reached"):
        return (f"the final reads reached the end of each of the {len(ends)} partition(s) "
                f"they recorded" if ends else "the final reads reached every partition's end")
    return ("no final reads were recorded with this history (it has no outcome of "
            "<code>kchaos run</code>), so records no read saw were judged by the "
            "history alone")

def _header(data: RunData) -> str:
    test, results = data.test, data.results
    valid = None if results is None else results.get("valid")
    reasons = []
    if results is None:
        reasons.append("This run has not been checked: run <code>kchaos check "
                       f"{text(data.run_dir)}</code>, then <code>kchaos report</code>.")
    else:
        for type_ in results.get("invalid_types", []):
            reasons.append(f'<a href="#anomaly-{text(type_)}">{text(type_)}</a>: '
                           f'{text(results["counts"][type_])} case(s) — '
                           f'{text(explain.MEANING.get(type_, ""))}')
        for key, entry in (results.get("unknown") or {}).items():
            reasons.append(f"<b>unknown — {text(entry.get('summary', key))}</b>: "
                           f"{text(entry.get('reason', ''))}")
        for error in results.get("errors") or []:
            reasons.append(f"<b>checker {text(error.get('checker'))} failed</b>: "
                           f"{text(error.get('error'))}")
        if valid is True:
            reasons.append("Every operation type the workload issued succeeded at least once, "
                           f"{_final_reads(test)}, and no checker found an anomaly that is "
                           "not allowed.")
    config = test.get("config") or {}
    sut = test.get("sut") or {}
    versions = {"kchaos": test.get("kchaos_version"), **(test.get("versions") or {})}
    facts = [["run directory", data.run_dir], ["started", test.get("start_wall_time", "?")],
             ["seed", test.get("seed", "?")],
             ["command line", " ".join(test.get("command_line") or []) or "(not recorded)"],
             ["system under test", f"{sut.get('kind', '?')} {sut.get('version') or ''}"],
             ["bug switches", ", ".join(sut.get("bugs") or []) or "none"],
             ["nodes", ", ".join(test.get("nodes") or []) or "none (no faults possible)"],
             ["topics", ", ".join(test.get("topics") or {})],
             ["versions", ", ".join(f"{k} {v}" for k, v in versions.items() if v)],
             ["operations", f"{len(data.ops):,} in {data.seconds:.1f} s"]]
    return (f"<h1>{text(test.get('name', 'run'))} · {text(data.run_dir.name)} "
            f"{verdict_badge(valid)}</h1>"
            "<h2 id=\"verdict\">Verdict</h2><ul>" + "".join(f"<li>{r}</li>" for r in reasons)
            + "</ul><h2 id=\"run\">The run</h2>" + table([], facts)
            + "<details><summary>The whole configuration (test.json)</summary>"
            + pre_json(config) + "</details>")


def _anomalies(data: RunData) -> str:
    results = data.results or {}
    counts = results.get("counts") or {}
    if not counts:
        return ("<h2 id=\"anomalies\">Anomalies</h2><p>None found."
                + ("" if data.results else " (The run was not checked.)") + "</p>")
    allowed = set(results.get("allowed_types") or [])
    cases = {t: (results.get("anomalies") or {}).get(t, []) for t in counts}
    shown = [c for t in counts for c in cases[t][:CASES_SHOWN]]
    evidence = explain.Evidence(data, shown)
    invocations = _invocations(data, [i for c in shown
                                      for i in (c.get("evidence") or [])[:EVIDENCE_SHOWN]])
    plans = {id(c): wanted((c.get("evidence") or [])[:EVIDENCE_SHOWN], invocations)
             for c in shown}
    lines = read_lines(data.run_dir / HISTORY_FILE, {n for p in plans.values() for n in p})
    out = ["<h2 id=\"anomalies\">Anomalies</h2>",
           table(["type", "cases", "makes the run invalid"],
                 [[f'<a href="#anomaly-{text(t)}">{text(t)}</a>', text(n),
                   "no (allowed)" if t in allowed else "yes"] for t, n in counts.items()],
                 raw=True)]
    for type_, count in counts.items():
        out.append(f'<section id="anomaly-{text(type_)}" class="anomaly'
                   f'{" allowed" if type_ in allowed else ""}"><h3>{text(type_)} '
                   f"({text(count)})</h3><p>{text(explain.MEANING.get(type_, ''))}</p>")
        for case in cases[type_][:CASES_SHOWN]:
            hits = set((case.get("evidence") or [])[:EVIDENCE_SHOWN])
            out.append('<div class="case"><p>' + text(explain.sentence(type_, case, evidence))
                       + "</p><details><summary>the case as results.json records it"
                       "</summary>" + pre_json(case) + "</details>"
                       + excerpt(lines, plans[id(case)], hits) + "</div>")
        more = count - min(count, CASES_SHOWN)
        if more:
            out.append(f'<p class="note">{more:,} more case(s): results.json keeps '
                       f"{len(cases[type_]):,} of them; the count is of all.</p>")
        out.append("</section>")
    return "".join(out)


def _invocations(data: RunData, indexes: list[int]) -> dict[int, int]:
    ops = data.ops.filter(pc.is_in(data.ops["op_index"], pa.array(indexes, pa.int64())))
    return dict(zip(ops["op_index"].to_pylist(), ops["invoke_index"].to_pylist()))


def _faults(data: RunData, plots_dir: Path) -> str:
    out = ["<h2 id=\"faults\">Faults</h2>"]
    if not data.faults:
        planned = data.test.get("nemesis_plan") or (data.test.get("config") or {}).get(
            "nemesis_script")
        out.append("<p>No fault was " + ("applied, though some were planned." if planned
                                         else "asked for in this run.") + "</p>")
        return "".join(out)
    end = data.seconds
    plots.timeline(plots_dir / "faults.png", data.test.get("nodes") or [], data.faults, end)
    out.append(plot("faults.png", "which fault hit which node, and when"))
    out.append(table(["fault", "nodes", "from (s)", "to (s)", "what was done"], [
        [f.f + ("" if f.applied else " (failed: not applied)"), ", ".join(f.nodes) or "—",
         f"{f.start:.2f}", f"{f.end:.2f}" + ("" if f.stopped else " (healed)"),
         f.error or _short(f.what)] for f in data.faults]))
    dropped = ((data.test.get("outcome") or {}).get("dropped")) or []
    if dropped:
        out.append(f"<p>{len(dropped)} planned fault start(s) never came: the main phase "
                   "ended before them, as faults that were slow to apply pushed them back — "
                   + ", ".join(f"{text(step['fault'].get('fault', '?'))} at "
                               f"{float(step.get('at', 0)):.1f} s" for step in dropped)
                   + ".</p>")
    rows = availability(data.faults, data.times(("send", "txn")), data.polls_with_records(),
                        data.main_end)

    def seconds(value):
        return "—" if value is None else f"{value:.2f}"
    out.append("<h3>Availability per fault</h3><p class=\"note\">The longest stretch with no "
               "acknowledged send, and with no poll that returned records, during each fault "
               "and in the quiet time after it, in seconds: from its end, when no other fault is "
               "in force, until the next fault starts or the main phase ends (— when another "
               "fault outlasts it or the main phase ended with it).</p>")
    out.append(table(["fault", "no ok send, during", "no records polled, during",
                      "after: from–to", "no ok send, after", "no records polled, after"], [
        [r.fault.label, seconds(r.send_during), seconds(r.poll_during),
         "—" if r.after is None else f"{r.after[0]:.2f}–{r.after[1]:.2f}",
         seconds(r.send_after), seconds(r.poll_after)] for r in rows]))
    return "".join(out)


def _short(value: dict, limit: int = 300) -> str:
    text_ = ", ".join(f"{k}: {v}" for k, v in value.items())
    return text_ if len(text_) <= limit else text_[:limit] + " …"


def _plots(data: RunData, plots_dir: Path) -> str:
    end, faults = data.seconds, data.faults
    latency, quantiles = series.latency(data)
    plots.latency(plots_dir / "latency.png", latency, quantiles, faults, end)
    plots.throughput(plots_dir / "throughput.png", *series.throughput(data), faults, end)
    plots.unseen(plots_dir / "unseen.png", *series.unseen(data), faults, end)
    workers = ((data.test.get("config") or {}).get("workload") or {}).get("concurrency")
    plots.lag(plots_dir / "lag.png", lag(data, workers), faults, end)
    return ("<h2 id=\"plots\">Over time</h2><p class=\"note\">Faults are shaded, labelled "
            "with what they did and to which nodes.</p>"
            + plot("latency.png", "latency over time") + plot("throughput.png", "throughput")
            + plot("unseen.png", "unseen values over time")
            + plot("lag.png", "realtime lag per consumer")
            + "<p class=\"note\">Lag is measured at each successful poll (empty ones too), "
            "over the partitions the consumer held and had read since it got them: where a "
            "consumer starts is not in the history. A worker's processes count as one "
            "consumer.</p>")


def _anomalous_partitions(data: RunData) -> dict[tuple[str, int], list[int]]:
    """(topic, partition) → the offsets its anomaly cases name."""
    found: dict[tuple[str, int], list[int]] = {}
    for cases in ((data.results or {}).get("anomalies") or {}).values():
        for case in cases:
            places = case.get("places") or ([case] if case.get("topic") is not None else [])
            for place in places:
                key = (place.get("topic"), place.get("partition"))
                if key[0] is None or key[1] is None:
                    continue
                offsets = [place.get("offset"), *(case.get("offsets") or [])]
                found.setdefault(key, []).extend(o for o in offsets if o is not None)
    return found


def _diagrams(data: RunData, plots_dir: Path) -> str:
    partitions = _anomalous_partitions(data)
    if not partitions:
        return ""
    out = ["<h2 id=\"offsets\">Offsets of the partitions with anomalies</h2><p class=\"note\">"
           "Each acknowledged send (▲) and each read (•) at its offset and time, coloured by "
           "process; red lines mark the offsets the anomalies name.</p>"]
    for n, ((topic, partition), marked) in enumerate(sorted(partitions.items())[:DIAGRAMS]):
        writes, reads, cut = _offset_points(data, topic, partition, np.array(marked))
        name = f"offsets-{n}.png"
        plots.offsets(plots_dir / name, f"{topic}-{partition}", writes, reads,
                      np.unique(marked), data.faults, data.seconds, cut)
        out.append(f"<h3>{text(topic)}-{text(partition)}</h3>"
                   + plot(name, f"offsets of {topic}-{partition}"))
    if len(partitions) > DIAGRAMS:
        out.append(f'<p class="note">{len(partitions) - DIAGRAMS} more partition(s) with '
                   "anomalies have no diagram here.</p>")
    return "".join(out)


def _offset_points(data: RunData, topic: str, partition: int, marked: np.ndarray):
    """Writes and reads of one partition, thinned, points near the marked
    offsets always kept; and what was cut, in words."""
    out, cut = [], []
    for name, source in (("sends", series.acknowledged(data)), ("reads", data.reads)):
        rows = source.filter(pc.and_(pc.equal(source["topic"], topic),
                                     pc.equal(source["partition"], partition)))
        rows = rows.filter(pc.is_valid(rows["offset"]))
        offs = series._np(rows["offset"]).astype(np.int64)
        near = np.zeros(len(offs), bool)
        for offset in np.unique(marked)[:200]:
            near |= np.abs(offs - offset) <= 20
        chosen = plots.thin(len(offs), keep=near)
        if len(chosen) < len(offs):
            cut.append(f"{name} thinned to {len(chosen):,} of {len(offs):,}")
        out.append((series._np(rows["time"]).astype(float)[chosen], offs[chosen],
                    series._np(rows["process"]).astype(np.int64)[chosen]))
    return out[0], out[1], "; ".join(cut)


def _timeline(data: RunData, room: int) -> str:
    evidence = [i for cases in ((data.results or {}).get("anomalies") or {}).values()
                for c in cases[:CASES_SHOWN] for i in (c.get("evidence") or [])]
    centres = timeline.sample_centres(evidence, timeline.nemesis_indexes(data.ops))
    budget = min(timeline.MAX_OPERATIONS, room // _BYTES_PER_OPERATION)
    body, caption = timeline.render(data.ops, centres, budget)
    if budget < timeline.MAX_OPERATIONS and budget < len(data.ops):
        caption += f"; the page's size cap ({MAX_BYTES:,} bytes) left room for {budget:,}"
    return ("<h2 id=\"timeline\">Operations</h2><p class=\"note\">One column per process "
            "(the nemesis is -1), one bar per operation from invocation to completion: green "
            "ok, orange info (unknown outcome), red fail. Hover for details. "
            f"{text(caption)}.</p><div class=\"timeline-box\">{body}</div>")


def _files(data: RunData) -> str:
    names = [p.name + ("/" if p.is_dir() else "") for p in sorted(data.run_dir.iterdir())
             if not p.name.startswith(".")]
    return ("<h2 id=\"files\">Files of this run</h2><ul>"
            + "".join(f'<li><a href="{text(n)}">{text(n)}</a></li>' for n in names) + "</ul>")
