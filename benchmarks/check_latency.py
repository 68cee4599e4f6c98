"""How long a small history takes to check, against the floor Spark sets.

    python benchmarks/check_latency.py [RUN_DIR] [--repeat 3]

Times, each in a fresh process (a cold JVM, nothing cached), alternating:

- bare: a Python process that starts kchaos's Spark session and counts the
  lines of RUN_DIR/history.jsonl with Spark (the anchor: what any Spark job
  on this file costs at least);
- check: `kchaos check RUN_DIR` with the Parquet tables removed first, so
  ingest is included.

Prints the median of each and their ratio (issue 16's target: at most 2).
Without RUN_DIR, runs `kchaos run` with its defaults first (the history
`make run` writes), and also prints how long after the final reads that
run's verdict came (test.json's check.seconds_to_verdict).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
BARE = """
import sys
from history_analysis.spark import spark_session
spark = spark_session()
print(spark.read.text(sys.argv[1]).count())
spark.stop()
"""


def timed(command: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    # kchaos check exits 0 valid, 1 invalid, 2 unknown: all a completed check.
    if done.returncode not in (0, 1, 2):
        sys.exit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def default_run(store: Path) -> Path:
    subprocess.run([str(BIN / "kchaos"), "run", "--store", str(store)], check=False)
    runs = sorted(p.parent for p in store.glob("*/*/history.jsonl"))
    if not runs:
        sys.exit(f"kchaos run wrote no history under {store}")
    return runs[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", nargs="?", type=Path)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    scratch = None
    run_dir = args.run_dir
    if run_dir is None:
        scratch = Path(tempfile.mkdtemp(prefix="kchaos-latency-"))
        run_dir = default_run(scratch / "store")
    try:
        measure(run_dir, args.repeat)
    finally:
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def measure(run_dir: Path, repeat: int) -> None:
    history = run_dir / "history.jsonl"
    lines = sum(1 for _ in history.open("rb"))
    print(f"{run_dir}: {lines} lines, {history.stat().st_size / 1e6:.1f} MB")
    bare, check = [], []
    for _ in range(repeat):
        bare.append(timed([sys.executable, "-c", BARE, str(history)]))
        shutil.rmtree(run_dir / "history", ignore_errors=True)
        check.append(timed([str(BIN / "kchaos"), "check", str(run_dir)]))
        print(f"  bare Spark count {bare[-1]:5.1f} s   kchaos check {check[-1]:5.1f} s")
    b, c = statistics.median(bare), statistics.median(check)
    print(f"median of {repeat}: bare Spark count {b:.1f} s, kchaos check (cold, with "
          f"ingest) {c:.1f} s: {c / b:.2f}x the bare session")
    outcome = json.loads((run_dir / "test.json").read_text()) \
        if (run_dir / "test.json").is_file() else {}
    latency = outcome.get("check", {}).get("seconds_to_verdict")
    if latency is not None:
        print(f"in the run: verdict {latency:.1f} s after the final reads ended")


if __name__ == "__main__":
    main()
