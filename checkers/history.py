"""The history as checkers see it: the Parquet tables as Spark frames, plus
what the checks derive from them once per history.

Derived frames are built by whichever check asks first and kept (memory,
spilling to disk) for the others; derived values (small results already on
the driver) are kept too. `release` drops both when the suite is done.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import pyarrow.dataset as ds

from pyspark.sql import DataFrame, SparkSession

from checkers.summary import Summary
from history_analysis.buckets import bucket_folders, write_tables
from history_analysis.spark import FIXED_SHUFFLE_PARTITIONS, SHUFFLE_PARTITIONS
from history_analysis.tables import TABLES, read_tables

# Shuffle partitions: about 48 MiB of Parquet input each, but one per core
# as long as each still gets 4 MiB (a small run gets one, so its check is
# not a hundred near-empty tasks; a mid-sized one still uses every core) —
# unless the session was given spark.sql.shuffle.partitions.
BYTES_PER_SHUFFLE_PARTITION = 48 << 20
MIN_BYTES_PER_SHUFFLE_PARTITION = 4 << 20


def shuffle_partitions(input_bytes: int, cores: int) -> int:
    by_size = input_bytes // BYTES_PER_SHUFFLE_PARTITION + 1
    by_cores = min(cores, input_bytes // MIN_BYTES_PER_SHUFFLE_PARTITION + 1)
    return max(1, min(400, max(by_size, by_cores)))


class History:
    def __init__(self, spark: SparkSession, tables_dir: Path, frames: dict[str, DataFrame],
                 arrow: dict, buckets: list[str], input_bytes: int = 0,
                 scratch: tempfile.TemporaryDirectory = None):
        self.spark = spark
        self.tables_dir = tables_dir
        self.buckets = buckets  # the per-partition tables' (history_analysis/buckets.py)
        self._frames = frames
        self._arrow = arrow     # the same tables as pyarrow datasets
        self._scratch = scratch
        self._memo: dict[Any, Any] = {}
        fixed = spark.conf.get(FIXED_SHUFFLE_PARTITIONS, "false") == "true"
        self.shuffle_partitions = spark.conf.get(SHUFFLE_PARTITIONS) if fixed else \
            str(shuffle_partitions(input_bytes, spark.sparkContext.defaultParallelism))

    @classmethod
    def open(cls, spark: SparkSession, tables_dir, scratch=None) -> "History":
        tables_dir = Path(tables_dir).resolve()
        frames = read_tables(spark, tables_dir)       # each checked first
        buckets = bucket_folders(tables_dir)
        size = sum(p.stat().st_size for p in tables_dir.rglob("*.parquet"))
        arrow = {name: ds.dataset(tables_dir / name, format="parquet") for name in TABLES}
        return cls(spark, tables_dir, frames, arrow, buckets, size, scratch)

    @classmethod
    def from_arrow(cls, spark: SparkSession, tables: dict) -> "History":
        """A history from in-memory Arrow tables (history_analysis.tables),
        written to a scratch directory that `release` removes."""
        scratch = tempfile.TemporaryDirectory(prefix="kchaos-history-")
        write_tables(Path(scratch.name), tables)
        return cls.open(spark, scratch.name, scratch)

    def __getitem__(self, table: str) -> DataFrame:
        return self._frames[table]

    def summary(self) -> Summary:
        return self.memo("summary", lambda: Summary.of(self._arrow))

    def memo(self, key: Any, build: Callable[[], Any]) -> Any:
        """build()'s result, made once; a failure is kept too, so the
        families that share it fail at once rather than each running it."""
        if key not in self._memo:
            self.spark.conf.set(SHUFFLE_PARTITIONS, self.shuffle_partitions)
            try:
                self._memo[key] = (build(), None)
            except Exception as e:  # noqa: BLE001 — re-raised to every caller
                self._memo[key] = (None, e)
        value, error = self._memo[key]
        if error is not None:
            raise error
        return value

    def release(self) -> None:
        self._memo.clear()
        if self._scratch is not None:
            self._scratch.cleanup()
