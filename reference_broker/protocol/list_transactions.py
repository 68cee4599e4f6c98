"""ListTransactions (KIP-664): the transactional ids this broker
coordinates, filtered by state names, producer ids and (v1, KIP-994)
minimum running time."""

from __future__ import annotations

import time

from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes
from reference_broker.txn.metadata import TxnState

_NAMES = {state.kafka_name for state in TxnState}


async def handle(broker, header, request):
    shape = Shapes(request)
    states = set(request.state_filters)
    producers = set(request.producer_id_filters)
    duration_ms = getattr(request, "duration_filter", -1)
    now_ms = int(time.time() * 1000)
    listed = [meta for meta in broker.transactions.list()
              if (not states or meta.state.kafka_name in states)
              and (not producers or meta.producer_id in producers)
              # As TransactionStateManager.listTransactionStates: `now -
              # start > duration`, so an id with no transaction open (start
              # -1) passes every duration filter (seen by tests/conformance/).
              and (duration_ms < 0 or now_ms - meta.start_ms > duration_ms)]
    return shape("ListTransactionsResponse", error_code=ErrorCode.none,
                 unknown_state_filters=tuple(sorted(states - _NAMES)),
                 transaction_states=tuple(shape(
                     "TransactionState", transactional_id=meta.transactional_id,
                     producer_id=meta.producer_id, transaction_state=meta.state.kafka_name)
                     for meta in listed))
