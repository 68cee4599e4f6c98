"""EndTxn: commit or abort. Answered once the coordinator has written
PrepareCommit/PrepareAbort; the markers follow (txn/coordinator.py)."""

from __future__ import annotations

from reference_broker.protocol import producer_fenced
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    error = await broker.transactions.end_txn(request.transactional_id, request.producer_id,
                                              request.producer_epoch, request.committed)
    return shape("EndTxnResponse",
                 error_code=producer_fenced.for_version(error, request.__version__, 2))
