"""How the tables lie on disk: the per-partition ones in buckets of
(topic, partition), so that the check reads all of a partition's rows from
one bucket's files, in one task, with no shuffle and no sort by Spark
(checkers/colocated.py).

    history/<table>/part-0.parquet              ops, nemesis
    history/<table>/bucket-<b>/part-0.parquet   sends, reads, commits, committed,
                                                end_offsets, assignments

A row's bucket is (crc32(topic) + partition) mod B. CRC-32 is the same in
every process and on every machine (Python's hash of a str is not), and a
topic's partitions, numbered from 0, land in different buckets as long as
there are no more of them than buckets. B grows with the history, one per
million events, up to 512: a bucket is what one task holds in memory. Only
buckets that hold rows have a folder (an empty table has bucket 0, empty,
so that its schema is on disk).

Tables another tool wrote without buckets (their files directly in the
table's folder) read as one bucket; a mix of the two is an error.
"""

from __future__ import annotations

import zlib
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from history_analysis.tables import PER_PARTITION, TABLES, TableError

EVENTS_PER_BUCKET = 1_000_000
MAX_BUCKETS = 512
# What a kchaos history's JSONL takes per event (10M events in 2.5 GB), for
# ingest to size the buckets from the file before reading it.
JSONL_BYTES_PER_EVENT = 250
# A block's rows split over hundreds of buckets would make tiny row groups,
# so rows are held: a bucket's are written (a row group) once it holds
# BUCKET_ROWS of a table, and every bucket's once HELD_ROWS are held in all
# (memory stays bounded: about 100 bytes a row).
BUCKET_ROWS = 1 << 17
HELD_ROWS = 1 << 22
PREFIX = "bucket-"
FILE = "part-0.parquet"
# zstd without dictionaries: of pyarrow's choices measured on a reads
# table, among the fastest to write (0.19 s per 500,000 rows) and the
# smallest (3.4 MB, against 11 MB with snappy).
PARQUET = {"compression": "zstd", "use_dictionary": False}
_BUCKETED = frozenset(table.name for table in PER_PARTITION)


def bucket_count(events: int) -> int:
    """How many buckets a history of `events` events is written in."""
    return max(1, min(MAX_BUCKETS, -(-events // EVENTS_PER_BUCKET)))


def buckets_of(rows: pa.Table, count: int) -> np.ndarray:
    """Each row's bucket, from its topic and partition (a null partition,
    a subscription's, counts as 0)."""
    if count == 1:
        return np.zeros(rows.num_rows, dtype=np.int64)
    topics = pc.dictionary_encode(pc.fill_null(rows["topic"], "")).combine_chunks()
    crc = np.array([zlib.crc32(topic.encode()) for topic in topics.dictionary.to_pylist()],
                   dtype=np.int64)
    partition = np.asarray(pc.fill_null(rows["partition"], 0), dtype=np.int64)
    return (crc[np.asarray(topics.indices, dtype=np.int64)] + partition) % count


class TableWriter:
    """Writes every table's rows under `root` in the layout above: `write`
    takes each batch of rows `tables.derive` made, `close` finishes (or,
    with `complete=False`, only closes the files of a failed write). As a
    context manager it closes so: complete unless the block raised."""

    def __init__(self, root: Path, buckets: int):
        self.root, self.buckets = Path(root), buckets
        self.rows: Counter = Counter({name: 0 for name in TABLES})
        self._files: dict[tuple[str, int | None], pq.ParquetWriter] = {}
        self._held: dict[tuple[str, int], list[pa.Table]] = defaultdict(list)
        self._bucket_rows: Counter = Counter()      # held, per (table, bucket)
        self._held_rows = 0
        for name in TABLES:
            (self.root / name).mkdir(parents=True)
            if name not in _BUCKETED:
                self._open(name, None)

    def __enter__(self) -> TableWriter:
        return self

    def __exit__(self, error_type, *_) -> None:
        self.close(complete=error_type is None)

    def write(self, tables: dict[str, pa.Table]) -> None:
        for name, rows in tables.items():
            if not rows.num_rows:
                continue
            self.rows[name] += rows.num_rows
            if name not in _BUCKETED:
                self._files[(name, None)].write_table(rows)
                continue
            bucket = buckets_of(rows, self.buckets)
            by = np.argsort(bucket, kind="stable")      # keeps history order in a bucket
            ordered = bucket[by]
            rows = rows.take(pa.array(by))
            cuts = [0, *(np.flatnonzero(np.diff(ordered)) + 1).tolist(), len(by)]
            for start, end in zip(cuts[:-1], cuts[1:]):
                key = (name, int(ordered[start]))
                self._held[key].append(rows.slice(start, end - start))
                self._bucket_rows[key] += end - start
                self._held_rows += end - start
                if self._bucket_rows[key] >= BUCKET_ROWS:
                    self._write(key)
        if self._held_rows >= HELD_ROWS:
            self._write_held()

    def close(self, complete: bool = True) -> None:
        try:
            if complete:
                self._write_held()
                for name in _BUCKETED - {name for name, _ in self._files}:
                    self._open(name, 0)            # an empty table's schema
        finally:
            for file in self._files.values():
                file.close()

    def _write_held(self) -> None:
        for key in sorted(self._held):
            self._write(key)

    def _write(self, key: tuple[str, int]) -> None:
        parts = self._held.pop(key)
        file = self._files.get(key) or self._open(*key)
        file.write_table(pa.concat_tables(parts))
        self._held_rows -= self._bucket_rows.pop(key)

    def _open(self, name: str, bucket: int | None) -> pq.ParquetWriter:
        folder = self.root / name if bucket is None else self.root / name / f"{PREFIX}{bucket}"
        folder.mkdir(exist_ok=True)
        file = pq.ParquetWriter(folder / FILE, TABLES[name].schema, **PARQUET)
        self._files[(name, bucket)] = file
        return file


def write_tables(root: Path, tables: dict[str, pa.Table], buckets: int = 1) -> None:
    """Whole tables (as `tables.derive` makes them) written under `root`."""
    with TableWriter(root, buckets) as writer:
        writer.write(tables)


def bucket_folders(tables_dir: Path) -> list[str]:
    """The buckets of the per-partition tables under `tables_dir`, each as
    the folder that holds its rows in every such table (`bucket-7`), in
    bucket order; `[""]` for tables written without buckets."""
    flat, folders = [], set()
    for table in PER_PARTITION:
        path = Path(tables_dir) / table.name
        direct = any(p.suffix == ".parquet" for p in path.iterdir() if p.is_file())
        named = {p.name for p in path.iterdir()
                 if p.is_dir() and p.name.startswith(PREFIX) and p.name[len(PREFIX):].isdigit()}
        if direct:
            flat.append(table.name)
        if direct and named:
            raise TableError(f"{path}: table {table.name!r} has Parquet files both in "
                             f"{PREFIX}* folders and beside them; re-run `kchaos ingest`")
        folders |= named
    if flat and len(flat) < len(PER_PARTITION):
        raise TableError(f"{tables_dir}: tables {', '.join(flat)} are not in buckets and "
                         f"the others are (docs/history.md); re-run `kchaos ingest`")
    if flat:
        return [""]
    return sorted(folders, key=lambda name: int(name[len(PREFIX):]))
