"""Ingest: `history.jsonl` → the Parquet tables of `history/` (docs/history.md).

The fast pass (history/scan.py) validates the history a block at a time and
pairs each invocation with its completion; `tables.derive` turns each
block's operations into rows of every table, appended to one Parquet file
per table (`history/<table>/part-0.parquet`, a row group per block: Spark
reads a table as its directory). Needs no Spark; memory is bounded by the
block, whatever the size of the history.

Tables are built in a scratch directory and swapped in whole, so a re-run
replaces them (idempotent) and a failed ingest keeps the old ones.
`history/_ingest.json` records what was ingested from which source.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from history_analysis.history.blocks import read_blocks
from history_analysis.run_dir import HISTORY_FILE, TABLES_DIR
from history_analysis.history.scan import BLOCK_BYTES, scan, scan_blocks
from history_analysis.tables import TABLES, derive

MANIFEST = "_ingest.json"
LAYOUT = {name: table.columns for name, table in TABLES.items()}
# zstd without dictionaries: of pyarrow's choices measured on a reads
# table, among the fastest to write (0.19 s per 500,000 rows) and the
# smallest (3.4 MB, against 11 MB with snappy).
_PARQUET = {"compression": "zstd", "use_dictionary": False}


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
    try:
        with _TableFiles(scratch) as files:
            report = scan(source, files.append)
        result = IngestResult(os.fspath(run_dir), stat.st_size, stat.st_mtime_ns,
                              report.events, len(report.unmatched),
                              report.truncated.line if report.truncated else None,
                              dict(files.rows))
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
    the tables than this version writes (a column added since)."""
    run_dir = Path(run_dir)
    source = run_dir / HISTORY_FILE
    if not source.is_file():
        return False
    manifest = read_manifest(run_dir)
    if manifest is None:
        return True
    stat = source.stat()
    return (manifest.get("source_size"), manifest.get("source_mtime_ns"),
            manifest.get("layout")) != (stat.st_size, stat.st_mtime_ns, LAYOUT)


class _TableFiles:
    """One Parquet file per table under `root`, a row group per block of
    operations appended; every table gets its file, empty ones too. A block
    is derived and written on a thread of its own while the fast pass goes
    on with the next (Parquet encodes and compresses without the GIL)."""

    def __init__(self, root: Path):
        self.root = root
        self.rows: Counter = Counter({name: 0 for name in TABLES})
        self.writers: dict[str, pq.ParquetWriter] = {}
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="write")
        self.writing: Future | None = None

    def __enter__(self) -> _TableFiles:
        for name, table in TABLES.items():
            (self.root / name).mkdir(parents=True)
            self.writers[name] = pq.ParquetWriter(self.root / name / "part-0.parquet",
                                                  table.schema, **_PARQUET)
        return self

    def append(self, operations: pa.Table) -> None:
        self._written()                      # one block in writing at a time
        self.writing = self.thread.submit(self._write, operations)

    def _write(self, operations: pa.Table) -> None:
        for name, rows in derive(operations).items():
            if rows.num_rows:
                self.writers[name].write_table(rows)
                self.rows[name] += rows.num_rows

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
            for writer in self.writers.values():
                writer.close()


def _swap_in(scratch: Path, target: Path) -> None:
    old = target.with_name(target.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if target.exists():
        target.rename(old)
    scratch.rename(target)
    shutil.rmtree(old, ignore_errors=True)
