"""InitProducerId: a fresh producer id for an idempotent producer.

Without a transactional id Kafka always hands out a new id with epoch 0,
whatever id and epoch the request carries (KIP-360 bumps only apply to
transactional producers; TransactionCoordinator.handleInitProducerId).
Transactions are not implemented, so a transactional id is refused.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    if request.transactional_id is not None:
        return shape("InitProducerIdResponse",
                     error_code=ErrorCode.transactional_id_authorization_failed,
                     producer_id=-1, producer_epoch=-1)
    return shape("InitProducerIdResponse", error_code=ErrorCode.none,
                 producer_id=broker.producer_ids.allocate(), producer_epoch=0)
