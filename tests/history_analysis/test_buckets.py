"""The per-partition tables in buckets of (topic, partition)
(history_analysis/buckets.py): where a row lands, what is written, and how
a folder of tables is read back. The check over many buckets is judged
against one bucket (and against the anomalies injected) in
tests/cli/test_spark_cluster.py."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from history_analysis import buckets
from history_analysis.buckets import (
    TableWriter, bucket_count, bucket_folders, buckets_of, write_tables,
)
from history_analysis.ingest import tables_from_events
from history_analysis.tables import PER_PARTITION, TABLES, TableError

SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "queue-sample" / "history.jsonl"


@pytest.fixture(scope="module")
def sample() -> dict[str, pa.Table]:
    """The held history's tables, its two partitions' rows copied into 24
    (partition p + 2k, for k < 12) so that they span many buckets."""
    tables = tables_from_events([json.loads(line) for line in SAMPLE.read_text().splitlines()])
    for table in PER_PARTITION:
        rows = tables[table.name]
        at = rows.schema.get_field_index("partition")
        tables[table.name] = pa.concat_tables(
            rows.set_column(at, rows.schema.field(at),
                            pc.add(rows["partition"], 2 * k).cast(rows.schema.field(at).type))
            for k in range(12))
    return tables


def test_a_row_lands_by_the_crc_of_its_topic_plus_its_partition():
    rows = pa.table({"topic": ["a", "a", "b", None, "a"], "partition": [0, 5, 2, 1, None]})
    want = [(zlib.crc32(t.encode()) + p) % 7 for t, p in
            [("a", 0), ("a", 5), ("b", 2), ("", 1), ("a", 0)]]
    assert buckets_of(rows, 7).tolist() == want
    assert buckets_of(rows, 1).tolist() == [0] * 5
    # A topic's partitions, no more of them than buckets, each in its own.
    spread = pa.table({"topic": ["t"] * 16, "partition": list(range(16))})
    assert len(set(buckets_of(spread, 16).tolist())) == 16


def test_the_bucket_count_grows_with_the_history_up_to_its_cap():
    assert [bucket_count(n) for n in (0, 1, 1_000_000, 1_000_001, 10**8, 10**10)] == \
        [1, 1, 1, 2, 100, buckets.MAX_BUCKETS]


def test_every_partition_is_written_whole_into_one_bucket(sample, tmp_path, monkeypatch):
    monkeypatch.setattr(buckets, "HELD_ROWS", 50)      # several row groups per file
    monkeypatch.setattr(buckets, "BUCKET_ROWS", 20)
    writer = TableWriter(tmp_path, 5)
    half = {name: rows.num_rows // 2 for name, rows in sample.items()}
    writer.write({name: rows.slice(0, half[name]) for name, rows in sample.items()})
    writer.write({name: rows.slice(half[name]) for name, rows in sample.items()})
    writer.close()

    assert dict(writer.rows) == {name: rows.num_rows for name, rows in sample.items()}
    for table in TABLES.values():
        if table not in PER_PARTITION:
            assert pq.read_table(tmp_path / table.name / "part-0.parquet") == sample[table.name]
            continue
        seen: dict[tuple, str] = {}
        for folder in sorted((tmp_path / table.name).iterdir()):
            rows = ds.dataset(folder, format="parquet").to_table()
            for key in set(zip(rows["topic"].to_pylist(), rows["partition"].to_pylist())):
                assert seen.setdefault(key, folder.name) == folder.name, (table.name, key)
                mine = rows.filter(pc.equal(rows["topic"], key[0]))
                whole = sample[table.name].filter(pc.equal(
                    sample[table.name]["topic"], key[0]))
                if key[1] is not None:          # its rows, in history order
                    assert _of(mine, key[1]) == _of(whole, key[1])
        assert ds.dataset(tmp_path / table.name, format="parquet").count_rows() \
            == sample[table.name].num_rows
    assert pq.ParquetFile(next((tmp_path / "reads").glob("bucket-*/part-0.parquet"))) \
        .num_row_groups > 1


def test_an_empty_table_keeps_its_schema_on_disk(sample, tmp_path):
    write_tables(tmp_path, {name: rows.schema.empty_table() for name, rows in sample.items()},
                 buckets=4)
    for table in PER_PARTITION:
        empty = pq.read_table(tmp_path / table.name / "bucket-0" / "part-0.parquet")
        assert empty.schema == table.schema and empty.num_rows == 0
    assert bucket_folders(tmp_path) == ["bucket-0"]


def test_a_folder_of_tables_is_read_as_buckets_or_as_one(sample, tmp_path):
    bucketed = tmp_path / "bucketed"
    write_tables(bucketed, sample, buckets=12)
    folders = bucket_folders(bucketed)
    numbers = [int(f.removeprefix("bucket-")) for f in folders]
    assert numbers == sorted(numbers) and len(numbers) > 1 and max(numbers) >= 10

    flat = tmp_path / "flat"            # as another tool may write them
    for name, rows in sample.items():
        (flat / name).mkdir(parents=True)
        pq.write_table(rows, flat / name / "part-0.parquet")
    assert bucket_folders(flat) == [""]

    (bucketed / "reads" / "part-0.parquet").write_bytes(
        (flat / "reads" / "part-0.parquet").read_bytes())
    with pytest.raises(TableError, match="both in bucket-\\* folders and beside them"):
        bucket_folders(bucketed)
    for folder in (flat / "sends").iterdir():
        folder.unlink()
    (flat / "sends" / "bucket-0").mkdir()
    pq.write_table(sample["sends"], flat / "sends" / "bucket-0" / "part-0.parquet")
    with pytest.raises(TableError, match="are not in buckets and the others are"):
        bucket_folders(flat)


def _of(rows: pa.Table, partition: int) -> list[int]:
    return rows.filter(pc.equal(rows["partition"], partition))["op_index"].to_pylist()
