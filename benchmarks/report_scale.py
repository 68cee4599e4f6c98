"""How long the report of a big run takes, and how big it gets (issue
target: a run of 10⁶+ operations reported in seconds, the page under its
cap).

    python benchmarks/report_scale.py [--events 2500000] [--out DIR] [--repeat 3] [--write-docs]

The run is benchmarks/checker_scale.py's synthetic one (generated, with
history.jsonl, ingested and checked, when OUT has no results.json yet):
a correct base run with 3 injected cases of every anomaly type, so the
report has every kind of section to fill. Then `write_report` runs REPEAT
times; printed: operations, the median time, the page's size against
MAX_BYTES, the plots' size, and the timeline's share (with --write-docs
also into docs/performance.md, benchmarks/figures.py).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq

from history_analysis.report import MAX_BYTES, write_report
from history_analysis.run_dir import PLOTS_DIR, RESULTS_FILE, TABLES_DIR

from figures import machine, write_block


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_500_000,
                        help="history events, about (two per operation)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the figures into docs/performance.md")
    args = parser.parse_args()
    out = args.out or Path(f"store/report-scale-N{args.events}")
    if not (out / RESULTS_FILE).is_file():
        subprocess.run([sys.executable, str(Path(__file__).with_name("checker_scale.py")),
                        "--events", str(args.events), "--anomalies", "3", "--jsonl",
                        "--reuse", "--out", str(out)], check=False)
    if not (out / RESULTS_FILE).is_file():
        print(f"{out}: no checked run to report on", file=sys.stderr)
        return 3
    operations = pq.ParquetFile(next((out / TABLES_DIR / "ops").glob("*.parquet"))) \
        .metadata.num_rows
    counts = json.loads((out / RESULTS_FILE).read_text())["counts"]
    measured_on = machine()       # after the generation: the report alone is measured
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        path = write_report(out)
        times.append(time.perf_counter() - start)
    page = path.stat().st_size
    plots = sum(p.stat().st_size for p in (out / PLOTS_DIR).iterdir())
    html = path.read_text()
    timeline = len(html) - html.index('id="timeline"') if 'id="timeline"' in html else 0
    figures = (
        "| run | `write_report` | page | plots |\n|---|---|---|---|\n"
        f"| {operations:,} operations, {sum(counts.values())} anomaly cases of "
        f"{len(counts)} types | median {statistics.median(times):.1f} s over {args.repeat} "
        f"(min {min(times):.1f}, max {max(times):.1f}) | {page / 1e6:.2f} MB of the "
        f"{MAX_BYTES / 1e6:.1f} MB cap (the operation timeline {timeline / 1e6:.2f} MB) "
        f"| {plots / 1e6:.2f} MB |\n\n"
        f"Measured on {measured_on}; target: a run of 10⁶+ operations reported in "
        "seconds, under the cap.")
    print(figures)
    if args.write_docs:
        write_block("report-scale", figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
