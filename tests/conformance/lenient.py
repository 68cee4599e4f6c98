"""Response schemas kio cannot read as both brokers write them, with the
offending field read as what it is on the wire.

DescribeTransactions' transaction_start_time is -1 for an id with no
transaction open (both brokers; TransactionMetadata.txnStartTimestamp),
which kio's datetime_i64 refuses ("Cannot parse negative timestamp"):
here it is a plain int64 of milliseconds. (No `from __future__ import
annotations`: kio reads the field types.)"""


from dataclasses import dataclass, field
from typing import ClassVar

from kio.schema.errors import ErrorCode
from kio.schema.response_header.v1.header import ResponseHeader
from kio.static.constants import EntityType
from kio.static.primitive import i16, i32, i32Timedelta, i64

from tests.conformance import requests as rq


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicData:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(rq.DESCRIBE_TRANSACTIONS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    topic: str = field(metadata={"kafka_type": "string"})
    partitions: tuple[i32, ...] = field(metadata={"kafka_type": "int32"}, default=())


@dataclass(frozen=True, slots=True, kw_only=True)
class TransactionState:
    __type__: ClassVar = EntityType.nested
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(rq.DESCRIBE_TRANSACTIONS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    error_code: ErrorCode = field(metadata={"kafka_type": "error_code"})
    transactional_id: str = field(metadata={"kafka_type": "string"})
    transaction_state: str = field(metadata={"kafka_type": "string"})
    transaction_timeout: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_start_time: i64 = field(metadata={"kafka_type": "int64"})
    producer_id: i64 = field(metadata={"kafka_type": "int64"})
    producer_epoch: i16 = field(metadata={"kafka_type": "int16"})
    topics: tuple[TopicData, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DescribeTransactionsResponse:
    __type__: ClassVar = EntityType.response
    __version__: ClassVar[i16] = i16(0)
    __flexible__: ClassVar[bool] = True
    __api_key__: ClassVar[i16] = i16(rq.DESCRIBE_TRANSACTIONS)
    __header_schema__: ClassVar[type[ResponseHeader]] = ResponseHeader
    throttle_time: i32Timedelta = field(metadata={"kafka_type": "timedelta_i32"})
    transaction_states: tuple[TransactionState, ...]


# (api key, version) -> the schema read instead of kio's
SCHEMAS = {(rq.DESCRIBE_TRANSACTIONS, 0): DescribeTransactionsResponse}
