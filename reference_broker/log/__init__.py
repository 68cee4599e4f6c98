"""The partition log: record batches kept as the bytes that arrived, in
segments with a sparse offset index, a leader epoch cache, and recovery
that cuts a torn tail (docs/broker.md, "Log").

`batch` reads and re-stamps batch headers; `segment` and `offset_index`
are one segment's files; `leader_epoch_cache` is KIP-101/279's epoch
cache; `partition_log` puts them together as one replica's log.
"""

from reference_broker.log.batch import (
    BatchHeader, CorruptRecordError, InvalidRecordError, parse_batches, validate_client_batches,
    with_offsets,
)
from reference_broker.log.partition_log import (
    AppendInfo, LogConfig, OffsetOutOfRange, PartitionLog, UnexpectedAppendOffset,
)

__all__ = [
    "AppendInfo", "BatchHeader", "CorruptRecordError", "InvalidRecordError", "LogConfig",
    "OffsetOutOfRange", "PartitionLog", "UnexpectedAppendOffset", "parse_batches",
    "validate_client_batches", "with_offsets",
]
