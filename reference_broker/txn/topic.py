"""`__transaction_state`: the transaction coordinator's log, an internal
topic (internal_topic.py) created as Kafka creates it (TransactionLog):
transaction.state.log.num.partitions partitions, its replication factor
and min.insync.replicas from the broker's settings, appends acks=all
waiting up to request.timeout.ms."""

from __future__ import annotations

from reference_broker.internal_topic import TopicSettings

TRANSACTION_TOPIC = "__transaction_state"
TRANSACTION_STATE = TopicSettings(
    TRANSACTION_TOPIC, "transaction.state.log.num.partitions",
    "transaction.state.log.replication.factor", "request.timeout.ms",
    min_isr="transaction.state.log.min.isr")
