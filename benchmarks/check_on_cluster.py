"""The checker suite on local[*] and on a Spark standalone cluster of N
workers started here, on the same generated history, side by side.

    python benchmarks/check_on_cluster.py --events 10000000 [--workers 2] [--write-docs]

Runs benchmarks/checker_scale.py twice on one history (the second run
reuses the first's): once on local[*], once with --workers N (the machine's
cores shared among the workers). Both must find exactly the injected
anomalies. Prints a table of the check's seconds and events/s; with
--write-docs also into docs/performance.md (check-on-cluster). On one
machine the cluster costs what its extra JVMs and the driver-to-executor
hops cost; the figure says what a cluster adds, not what many machines buy.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.figures import machine, write_block  # noqa: E402

SCALE = Path(__file__).resolve().parent / "checker_scale.py"


def run(out: Path, events: int, seed: int, extra: list[str]) -> dict:
    subprocess.run([sys.executable, str(SCALE), "--events", str(events), "--anomalies", "1",
                    "--seed", str(seed), "--out", str(out), "--reuse", *extra], check=True)
    return json.loads((out / "benchmark.json").read_text())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="6g")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the table into docs/performance.md")
    args = parser.parse_args()
    measured_on = machine()
    out = args.out or Path(f"store/check-on-cluster-N{args.events}-S{args.seed}")
    rows = [("local[*]", run(out, args.events, args.seed, [])),
            (f"standalone, {args.workers} workers",
             run(out, args.events, args.seed, ["--workers", str(args.workers),
                                               "--worker-memory", args.worker_memory]))]
    events = rows[0][1]["events"]
    # Another job that starts meanwhile shows here, where the start's
    # figure would call the machine idle.
    lines = [f"{events:,} events (seed {args.seed}), one case of every anomaly type; "
             f"{measured_on}, {os.getloadavg()[0]:.2f} at the end.", "",
             "| Spark | check (s) | events/s | found exactly the injected |",
             "|---|---:|---:|---|"]
    for name, figures in rows:
        check = figures["check"]
        lines.append(f"| {name} | {check['seconds']:.1f} | {check['events_per_second']:,} | "
                     f"{'yes' if figures['exact'] else 'NO'} |")
    table = "\n".join(lines)
    print("\n" + table)
    if args.write_docs:
        write_block("check-on-cluster", table)
    return 0 if all(figures["exact"] for _, figures in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
