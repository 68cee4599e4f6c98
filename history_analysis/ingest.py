"""Ingest: `history.jsonl` → the Parquet tables of `history/` (docs/history.md).

The fast pass (history/scan.py) validates the history a block at a time and
pairs each invocation with its completion; `tables.derive` turns each
block's operations into rows of every table, written as
history_analysis/buckets.py lays them out (the per-partition tables in
buckets of (topic, partition), as many as the file's size calls for).
Needs no Spark; memory is bounded by the block and the rows held for the
buckets, whatever the size of the history.

Tables are built in a scratch directory and swapped in whole, so a re-run
replaces them (idempotent) and a failed ingest keeps the old ones.
`history/_ingest.json` records what was ingested from which source.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa

from history_analysis.buckets import JSONL_BYTES_PER_EVENT, TableWriter, bucket_count
from history_analysis.history.blocks import read_blocks
from history_analysis.run_dir import HISTORY_FILE, TABLES_DIR
from history_analysis.history.scan import BLOCK_BYTES, scan, scan_blocks
from history_analysis.tables import TABLES, derive

MANIFEST = "_ingest.json"
LAYOUT = {name: table.columns for name, table in TABLES.items()}


class IngestError(ValueError):
    """The run directory cannot be ingested; the message says why and where."""


@dataclass
class IngestResult:
    run_dir: str
    source_size: int
    source_mtime_ns: int
    events: int
    unmatched: int
    truncated_line: int | None
    rows: dict[str, int] = field(default_factory=dict)
    buckets: int = 1                # of the per-partition tables (buckets.py)
    # Each table's columns as written: tables of an older layout are stale.
    layout: dict[str, list[str]] = field(default_factory=lambda: dict(LAYOUT))

    def summary(self) -> str:
        rows = ", ".join(f"{name} {n}" for name, n in self.rows.items())
        text = f"{self.run_dir}: ingested {self.events} events → {rows}"
        if self.unmatched:
            text += f"; {self.unmatched} unmatched invocations as info"
        if self.truncated_line:
            text += f"; truncated last line {self.truncated_line} ignored"
        return text


def ingest(run_dir: str | os.PathLike) -> IngestResult:
    """Validate `RUN_DIR/history.jsonl` and (re)write `RUN_DIR/history/`.
    Raises IngestError for a missing run directory or history, HistoryError
    at the first broken rule (the old tables are kept)."""
    run_dir = Path(run_dir)
    source = run_dir / HISTORY_FILE
    if not run_dir.is_dir():
        raise IngestError(f"{run_dir}: no such run directory")
    if not source.is_file():
        raise IngestError(f"{run_dir}: no {HISTORY_FILE} in this run directory; "
                          "a run directory holds the history a run wrote (docs/history.md)")
    stat = source.stat()
    scratch = run_dir / f".{TABLES_DIR}.ingest-{os.getpid()}"
    shutil.rmtree(scratch, ignore_errors=True)
    buckets = bucket_count(stat.st_size // JSONL_BYTES_PER_EVENT)
    try:
        with _TableFiles(scratch, buckets) as files:
            report = scan(source, files.append)
        result = IngestResult(os.fspath(run_dir), stat.st_size, stat.st_mtime_ns,
                              report.events, len(report.unmatched),
                              report.truncated.line if report.truncated else None,
                              dict(files.writer.rows), buckets)
        (scratch / MANIFEST).write_text(json.dumps(asdict(result), indent=2) + "\n")
        _swap_in(scratch, run_dir / TABLES_DIR)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result


def tables_from_events(events: list[dict]) -> dict[str, pa.Table]:
    """The tables of a history given as event dicts (index, time, process,
    type, f, value, maybe error and phase, taken as given), validated and
    paired exactly as ingest does a file: HistoryError at line position + 1
    on a broken rule."""
    data = "".join(json.dumps(e, separators=(",", ":")) + "\n" for e in events).encode()
    parts: list[dict[str, pa.Table]] = []
    scan_blocks("<events>", read_blocks(io.BytesIO(data), BLOCK_BYTES),
                lambda operations: parts.append(derive(operations)))
    return {name: pa.concat_tables([t.schema.empty_table(), *(p[name] for p in parts)])
            for name, t in TABLES.items()}


def read_manifest(run_dir: str | os.PathLike) -> dict | None:
    """What the last ingest of this run directory recorded, or None."""
    try:
        return json.loads((Path(run_dir) / TABLES_DIR / MANIFEST).read_text())
    except (OSError, ValueError):
        return None


def tables_are_stale(run_dir: str | os.PathLike) -> bool:
    """True when `history/_ingest.json` is missing, names another size or
    mtime of `history.jsonl` than the file has now, or another layout of
    the tables than this version writes (a column added since, or tables
    from before buckets)."""
    run_dir = Path(run_dir)
    source = run_dir / HISTORY_FILE
    if not source.is_file():
        return False
    manifest = read_manifest(run_dir)
    if manifest is None:
        return True
    stat = source.stat()
    return (manifest.get("source_size"), manifest.get("source_mtime_ns"),
            manifest.get("layout")) != (stat.st_size, stat.st_mtime_ns, LAYOUT) \
        or "buckets" not in manifest


class _TableFiles:
    """The tables under `root` (buckets.TableWriter), each block of
    operations derived and written on a thread of its own while the fast
    pass goes on with the next (Parquet encodes and compresses without the
    GIL)."""

    def __init__(self, root: Path, buckets: int):
        self.root, self.buckets = root, buckets
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="write")
        self.writing: Future | None = None

    def __enter__(self) -> _TableFiles:
        self.writer = TableWriter(self.root, self.buckets)
        return self

    def append(self, operations: pa.Table) -> None:
        self._written()                      # one block in writing at a time
        self.writing = self.thread.submit(lambda: self.writer.write(derive(operations)))

    def _written(self) -> None:
        if self.writing is not None:
            writing, self.writing = self.writing, None
            writing.result()

    def __exit__(self, error_type, *_) -> None:
        try:
            if error_type is None:
                self._written()
        finally:
            self.thread.shutdown(wait=True)
            self.writer.close(complete=error_type is None)


def _swap_in(scratch: Path, target: Path) -> None:
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    scratch.rename(target)
    shutil.rmtree(old, ignore_errors=True)
