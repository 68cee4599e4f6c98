"""FindCoordinator: the leader of the `__consumer_offsets` partition of a
group (key type 0) or of the `__transaction_state` partition of a
transactional id (key type 1, KIP-98); the topic is created on first use,
as Kafka does. While that partition has no leader the answer is
COORDINATOR_NOT_AVAILABLE and the client asks again."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.group import partition_for
from reference_broker.protocol.shapes import Shapes

GROUP, TRANSACTION = 0, 1


async def handle(broker, header, request):
    shape = Shapes(request)
    key_type = getattr(request, "key_type", GROUP)
    if key_type not in (GROUP, TRANSACTION):
        return shape("FindCoordinatorResponse", error_code=ErrorCode.invalid_request,
                     error_message=f"unknown key type {key_type}",
                     node_id=-1, host="", port=-1)
    topic = broker.offsets if key_type == GROUP else broker.transaction_state
    await topic.ensure()
    index = partition_for(request.key, topic.partitions)
    leader = topic.leader(index)
    if leader is None:
        return shape("FindCoordinatorResponse", error_code=ErrorCode.coordinator_not_available,
                     error_message=f"{topic.name}-{index} has no leader",
                     node_id=-1, host="", port=-1)
    # Kafka's answer without error carries "NONE" as its message
    # (KafkaApis.handleFindCoordinatorRequest: Errors.NONE.message()).
    return shape("FindCoordinatorResponse", error_code=ErrorCode.none, error_message="NONE",
                 node_id=leader.broker_id, host=leader.host, port=leader.port)
