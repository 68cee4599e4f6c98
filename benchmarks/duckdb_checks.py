"""The anchor the checker is measured against: DuckDB's answer to the three
core checks (duplicate, inconsistent offsets, lost write) on the same
Parquet tables, in SQL, following the definitions of docs/anomalies.md as
kchaos's checkers read them.

DuckDB is a benchmark extra (`pip install .[bench]`), not a dependency of
kchaos: `available()` says whether it is installed.
"""

from __future__ import annotations

import time
from pathlib import Path

# The version order: acknowledged sends (ok with an offset) and every read
# of a value; a record is a distinct (topic, partition, offset, value).
_RECORDS = """
records AS (
  SELECT DISTINCT topic, "partition", "offset", value FROM (
    SELECT topic, "partition", "offset", value FROM sends
    WHERE type = 'ok' AND "offset" IS NOT NULL
    UNION ALL
    SELECT topic, "partition", "offset", value FROM reads WHERE value IS NOT NULL))"""

QUERIES = {
    "duplicate": f"""WITH {_RECORDS}
        SELECT count(*) FROM (SELECT value FROM records GROUP BY value HAVING count(*) > 1)""",
    "inconsistent-offsets": f"""WITH {_RECORDS}
        SELECT count(*) FROM (SELECT topic, "partition", "offset" FROM records
                              GROUP BY ALL HAVING count(*) > 1)""",
    # A send that must have happened (ok, or its value read) that no ok poll
    # read, while an ok poll read a value at a higher offset of its partition;
    # its position: the acknowledged offset, else the lowest offset it was read at.
    "lost-write": """WITH
        read_values AS (
          SELECT topic, "partition", value, min("offset") AS read_offset,
                 bool_or(type = 'ok') AS read_ok
          FROM reads WHERE value IS NOT NULL GROUP BY ALL),
        sent AS (
          SELECT s.topic, s."partition", s.type, rv.read_offset,
                 coalesce(rv.read_ok, false) AS read_ok,
                 CASE WHEN s.type = 'ok' AND s."offset" IS NOT NULL THEN s."offset"
                      ELSE rv.read_offset END AS position
          FROM sends s LEFT JOIN read_values rv USING (topic, "partition", value)),
        highest AS (
          SELECT topic, "partition", max("offset") AS top FROM reads
          WHERE type = 'ok' AND value IS NOT NULL GROUP BY ALL)
        SELECT count(*) FROM sent JOIN highest USING (topic, "partition")
        WHERE (type = 'ok' OR read_offset IS NOT NULL) AND NOT read_ok
          AND position IS NOT NULL AND position < top""",
}


def available() -> bool:
    try:
        import duckdb  # noqa: F401
    except ImportError:
        return False
    return True


def run(tables_dir: Path) -> tuple[float, dict[str, int]]:
    """Seconds for the three queries (views over the Parquet files, one
    connection, every core), and each count."""
    import duckdb
    connection = duckdb.connect()
    for table in ("sends", "reads"):
        connection.execute(f"CREATE VIEW {table} AS SELECT * FROM "
                           f"read_parquet('{Path(tables_dir) / table}/**/*.parquet')")
    start = time.perf_counter()
    counts = {name: connection.execute(sql).fetchone()[0] for name, sql in QUERIES.items()}
    return time.perf_counter() - start, counts
