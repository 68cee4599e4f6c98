"""The history as checkers see it: the Parquet tables plus derived frames.

Derived frames (the version order, positions …) are built once per run by
whichever checker asks first and kept (memory, spilling to disk) for the
others, then released when the suite is done.
"""

from __future__ import annotations

from typing import Callable

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession

from history_analysis.tables import read_tables


class History:
    def __init__(self, spark: SparkSession, frames: dict[str, DataFrame]):
        self.spark = spark
        self._frames = frames
        self._derived: dict[str, DataFrame] = {}

    @classmethod
    def open(cls, spark: SparkSession, tables_dir) -> "History":
        return cls(spark, read_tables(spark, tables_dir))

    def __getitem__(self, table: str) -> DataFrame:
        return self._frames[table]

    def derived(self, key: str, build: Callable[["History"], DataFrame]) -> DataFrame:
        if key not in self._derived:
            self._derived[key] = build(self).persist(StorageLevel.MEMORY_AND_DISK)
        return self._derived[key]

    def release(self) -> None:
        for frame in self._derived.values():
            frame.unpersist()
        self._derived.clear()
