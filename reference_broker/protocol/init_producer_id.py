"""InitProducerId: a producer id and epoch.

Without a transactional id Kafka always hands out a new id with epoch 0,
whatever id and epoch the request carries (KIP-360 bumps only apply to
transactional producers; TransactionCoordinator.handleInitProducerId).
With one, the transaction coordinator bumps the id's epoch, fencing the
previous producer (txn/coordinator.py). A producer id without an epoch,
or the other way round, is INVALID_REQUEST either way.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol import producer_fenced
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    producer_id = getattr(request, "producer_id", -1)
    producer_epoch = getattr(request, "producer_epoch", -1)
    if (producer_id == -1) != (producer_epoch == -1):
        # KafkaApis.handleInitProducerIdRequest: a producer id without an
        # epoch, or an epoch without an id, before anything else (seen by
        # tests/conformance/).
        return shape("InitProducerIdResponse", error_code=ErrorCode.invalid_request,
                     producer_id=-1, producer_epoch=-1)
    if request.transactional_id is None:
        return shape("InitProducerIdResponse", error_code=ErrorCode.none,
                     producer_id=broker.producer_ids.allocate(), producer_epoch=0)
    result = await broker.transactions.init_producer_id(
        request.transactional_id, int(request.transaction_timeout.total_seconds() * 1000),
        producer_id, producer_epoch)
    return shape("InitProducerIdResponse",
                 error_code=producer_fenced.for_version(result.error, request.__version__, 4),
                 producer_id=result.producer_id, producer_epoch=result.producer_epoch)
