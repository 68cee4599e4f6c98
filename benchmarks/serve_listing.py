"""How fast `kchaos serve` lists a store of many runs (issue target: 1,000
runs in under a second).

    python benchmarks/serve_listing.py [--runs 1000] [--examples N] [--repeat 5] [--write-docs]

Builds a temporary store of RUNS run directories, each with a test.json
like `kchaos run` writes (a config and an outcome with faults) and a
results.json; every third run is invalid with EXAMPLES cases of three
anomaly types (results.json of about 40 KB, the size a run with many
anomalies writes), the others valid; every tenth has no results.json (a run
still going). Then times, over HTTP on 127.0.0.1, the first listing (every
file read) and the next ones (nothing changed: served from what was read),
median of REPEAT, and prints the figures (with --write-docs also into
docs/performance.md, benchmarks/figures.py).
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from checkers.result import MAX_EXAMPLES
from kchaos.serve import serve_in_thread

from figures import machine, write_block


def case(i: int) -> dict:
    return {"topic": "kchaos-t0", "partition": i % 8, "value": 10_000 + i, "offset": 400 + i,
            "send_type": "ok", "evidence": [1000 + 3 * i, 2000 + 5 * i, 3000 + 7 * i]}


def build_store(root: Path, runs: int, examples: int) -> None:
    nemesis = [{"f": "pause", "type": "info", "value": {"targets": "one", "nodes": ["n2"]}},
               {"f": "resume", "type": "info", "value": {"nodes": ["n2"]}}] * 10
    for i in range(runs):
        run_dir = root / f"test-{i % 7}" / f"20261125T{i // 60 % 24:02d}{i % 60:02d}00-{i}"
        run_dir.mkdir(parents=True)
        (run_dir / "test.json").write_text(json.dumps({
            "schema_version": 1, "name": f"test-{i % 7}", "seed": i,
            "start_wall_time": f"2026-11-25T{i // 60 % 24:02d}:{i % 60:02d}:00Z",
            "nodes": ["n1", "n2", "n3"], "config": {"time_limit": 60, "workload": {
                "partitions": 8, "concurrency": 8}, "nemesis": ["pause", "partition"]},
            "outcome": {"seconds": 80.0 + i % 30, "nemesis": nemesis, "final": {
                "reached": True}}}, indent=1))
        if i % 10 == 9:
            continue
        invalid = i % 3 == 0
        counts = {"lost-write": examples, "unseen": examples, "duplicate": examples} \
            if invalid else {}
        (run_dir / "results.json").write_text(json.dumps({
            "valid": not invalid, "counts": counts,
            "anomalies": {t: [case(j) for j in range(n)] for t, n in counts.items()},
            "unknown": {}, "errors": [], "stats": {"ops": {"send": {"ok": 9000}}}}, indent=2))


def get(url_host: str, port: int) -> tuple[float, int]:
    start = time.perf_counter()
    connection = http.client.HTTPConnection(url_host, port, timeout=60)
    connection.request("GET", "/")
    body = connection.getresponse().read()
    connection.close()
    return time.perf_counter() - start, len(body)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--examples", type=int, default=MAX_EXAMPLES,
                        help="cases per anomaly type in each run's results.json")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--write-docs", action="store_true",
                        help="also write the figures into docs/performance.md")
    args = parser.parse_args()
    measured_on = machine()
    root = Path(tempfile.mkdtemp(prefix="kchaos-serve-bench-"))
    try:
        build_store(root, args.runs, args.examples)
        size = sum(p.stat().st_size for p in root.rglob("*.json"))
        colds, warms = [], []
        for _ in range(args.repeat):
            server = serve_in_thread(root)      # a new server: nothing read yet
            host, port = server.server_address[:2]
            try:
                cold, length = get(host, port)
                warm, _ = get(host, port)
            finally:
                server.shutdown()
                server.server_close()
            colds.append(cold)
            warms.append(warm)
        figures = (
            "| store | first listing (every file read) | next listings (nothing changed) | page |\n"
            "|---|---|---|---|\n"
            f"| {args.runs:,} runs, {size / 2**20:.1f} MiB of test.json + results.json "
            f"| median {statistics.median(colds):.3f} s (min {min(colds):.3f}, max "
            f"{max(colds):.3f}) over {args.repeat} servers | median "
            f"{statistics.median(warms):.3f} s | {length / 1024:.0f} KiB |\n\n"
            f"Measured on {measured_on}; target: 1,000 runs listed in under 1 s.")
        print(figures)
        if args.write_docs:
            write_block("serve-listing", figures)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
