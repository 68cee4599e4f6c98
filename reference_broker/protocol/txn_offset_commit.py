"""TxnOffsetCommit (KIP-98, KIP-447): a transactional producer's consumed
offsets, sent to the group coordinator after AddOffsetsToTxn and written
as the producer's transactional batch in `__consumer_offsets`; they become
the group's offsets only when the transaction's COMMIT marker lands there.
From v3 the request names the consumer's generation and member, which
fence it as OffsetCommit is fenced.

Verified first (KAFKA-15449, KIP-890 part 1 for offsets): unless the
producer already has a transaction open on the group's `__consumer_offsets`
partition, the transaction coordinator is asked whether that partition is
in the producer's ongoing transaction, and a refusal is the answer, as the
partition writer's is in Kafka's group coordinator (a coordinator that
cannot be reached: COORDINATOR_NOT_AVAILABLE, which clients retry)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.group.records import partition_for
from reference_broker.offsets_topic import OFFSETS_TOPIC
from reference_broker.protocol.offset_commit import requested, respond
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    offsets, errors = requested(broker, request)
    refusal = await _verified(broker, request) if offsets else ErrorCode.none
    if refusal:
        errors.update({(o.topic, o.partition): refusal for o in offsets})
    elif offsets:
        errors.update(await broker.coordinator.txn_commit_offsets(
            request.group_id, request.producer_id, request.producer_epoch,
            getattr(request, "generation_id", -1), getattr(request, "member_id", ""),
            getattr(request, "group_instance_id", None), offsets))
    return respond(Shapes(request), "TxnOffsetCommit", request, errors)


async def _verified(broker, request) -> ErrorCode:
    index = partition_for(request.group_id, broker.config["offsets.topic.num.partitions"])
    partition = broker.partition(OFFSETS_TOPIC, index)
    if partition is None or not partition.is_leader \
            or partition.txns.is_open(request.producer_id):
        return ErrorCode.none       # not the coordinator (it says so), or verified already
    place = (OFFSETS_TOPIC, index)
    error = (await broker.verifier.verify(request.transactional_id, request.producer_id,
                                          request.producer_epoch, [place]))[place]
    # The group coordinator's normalizeException: a write that could not
    # be made is COORDINATOR_NOT_AVAILABLE to the client.
    return ErrorCode.coordinator_not_available if error == ErrorCode.not_enough_replicas \
        else error
