"""DescribeTransactions (KIP-664): each transactional id's state as its
coordinator holds it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reference_broker.protocol.shapes import Shapes
from reference_broker.txn.metadata import by_topic

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


async def handle(broker, header, request):
    shape = Shapes(request)
    states = []
    for transactional_id in request.transactional_ids:
        error, meta = broker.transactions.describe(transactional_id)
        topics = by_topic(meta.partitions if meta else ())
        states.append(shape(
            "TransactionState", error_code=error, transactional_id=transactional_id,
            transaction_state=meta.state.kafka_name if meta else "",
            transaction_timeout=timedelta(milliseconds=meta.timeout_ms if meta else 0),
            # An id without a transaction: -1, as Kafka answers (one
            # millisecond before the epoch). An unknown id (or an error):
            # every field its schema default, 0 — Kafka sets only the error
            # and the id (TransactionCoordinator.handleDescribeTransactions;
            # seen by tests/conformance/).
            transaction_start_time=_EPOCH + timedelta(milliseconds=meta.start_ms if meta else 0),
            producer_id=meta.producer_id if meta else 0,
            producer_epoch=meta.producer_epoch if meta else 0,
            topics=tuple(shape("TopicData", topic=topic, partitions=tuple(indexes))
                         for topic, indexes in topics.items())))
    return shape("DescribeTransactionsResponse", transaction_states=tuple(states))
