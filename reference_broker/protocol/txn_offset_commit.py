"""TxnOffsetCommit (KIP-98, KIP-447): a transactional producer's consumed
offsets, sent to the group coordinator after AddOffsetsToTxn and written
as the producer's transactional batch in `__consumer_offsets`; they become
the group's offsets only when the transaction's COMMIT marker lands there.
From v3 the request names the consumer's generation and member, which
fence it as OffsetCommit is fenced."""

from __future__ import annotations

from reference_broker.protocol.offset_commit import requested, respond
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    offsets, errors = requested(broker, request)
    if offsets:
        errors.update(await broker.coordinator.txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            getattr(request, "generation_id", -1), getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None), offsets))
    return respond(Shapes(request), "TxnOffsetCommit", request, errors)
