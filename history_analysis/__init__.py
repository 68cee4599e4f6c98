"""The history: its contract (writer, reader, validator), ingest into Parquet
tables with Spark, and the Spark session every checker shares.

Importing this package does not import Spark: workers only need the writer.
"""
