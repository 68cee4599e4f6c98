"""PRODUCER_FENCED (90) is KIP-588's: before it, a fenced producer was told
INVALID_PRODUCER_EPOCH (47), and Kafka still tells older request versions
so (KafkaApis: InitProducerId below v4, AddPartitionsToTxn, AddOffsetsToTxn
and EndTxn below v2)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


def for_version(error: ErrorCode, version: int, first_version: int) -> ErrorCode:
    if error == ErrorCode.producer_fenced and version < first_version:
        return ErrorCode.invalid_producer_epoch
    return error
