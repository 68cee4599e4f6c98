"""Where ingest's time goes: each stage of the fast pass, run alone.

    python benchmarks/ingest_stages.py RUN_DIR

Ingest overlaps its stages (the next block parses while this one is
checked, and the tables are written on a thread of their own), so its wall
time hides what each costs. This runs them one after another over the
blocks of RUN_DIR/history.jsonl — reading, Arrow's parse, the column rules,
pairing, deriving the tables, writing Parquet (to a scratch directory) —
and prints the seconds and events/s of each, the sum, and the time of one
real `ingest` for comparison. Any history.jsonl will do; checker_scale.py
--jsonl writes large ones.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

# benchmarks/ is not an installed package: import from the repository.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from history_analysis.history.blocks import parse, read_blocks  # noqa: E402
from history_analysis.history.pairing import Carry, pair  # noqa: E402
from history_analysis.history.scan import BLOCK_BYTES  # noqa: E402
from history_analysis.history.vectorised import (  # noqa: E402
    Envelope, envelope_faults, value_faults,
)
from history_analysis.buckets import (  # noqa: E402
    JSONL_BYTES_PER_EVENT, TableWriter, bucket_count,
)
from history_analysis.ingest import ingest  # noqa: E402
from history_analysis.tables import derive  # noqa: E402


def stages(source: Path, scratch: Path) -> tuple[dict[str, float], int]:
    seconds: dict[str, float] = defaultdict(float)
    writer = TableWriter(scratch / "history",
                         bucket_count(source.stat().st_size // JSONL_BYTES_PER_EVENT))
    carry, events = Carry(), 0

    def timed(stage: str, step, *args):
        start = time.perf_counter()
        value = step(*args)
        seconds[stage] += time.perf_counter() - start
        return value

    with open(source, "rb") as handle:
        blocks = read_blocks(handle, BLOCK_BYTES)
        while (block := timed("read blocks", next, blocks, None)) is not None:
            table = timed("Arrow parse", parse, block)
            if table is None:
                sys.exit(f"{source}: Arrow refused the block at line {block.first_line}; "
                         "validate the history first (kchaos validate-history)")
            envelope = timed("envelope rules", Envelope.of, table)
            timed("envelope rules", envelope_faults, envelope, carry.next_index,
                  carry.last_time)
            timed("value shapes", value_faults, envelope, table["value"].combine_chunks())
            paired = timed("pairing + echo rule", pair, table, envelope, carry, block)
            carry, events = paired.carry, events + table.num_rows
            derived = timed("derive tables", derive, paired.operations)
            timed("write Parquet", writer.write, derived)
    timed("write Parquet", writer.close)
    return seconds, events


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args()
    source = args.run_dir / "history.jsonl"
    size = source.stat().st_size
    print(f"{source}: {size / 1e6:,.0f} MB; load average {os.getloadavg()[0]:.2f} on "
          f"{os.cpu_count()} cores; blocks of {BLOCK_BYTES >> 20} MB")
    scratch = Path(tempfile.mkdtemp(prefix="kchaos-ingest-stages-"))
    try:
        seconds, events = stages(source, scratch)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    for stage, spent in seconds.items():
        print(f"  {stage:22} {spent:7.1f} s  {events / spent:>13,.0f} events/s")
    total = sum(seconds.values())
    print(f"  {'sum, one at a time':22} {total:7.1f} s  {events / total:>13,.0f} events/s")
    start = time.perf_counter()
    result = ingest(args.run_dir)
    wall = time.perf_counter() - start
    print(f"  {'ingest (overlapped)':22} {wall:7.1f} s  {result.events / wall:>13,.0f} events/s")


if __name__ == "__main__":
    main()
