"""FindCoordinator: the leader of the group's `__consumer_offsets`
partition (the topic is created on first use, as Kafka does). While that
partition has no leader the answer is COORDINATOR_NOT_AVAILABLE and the
client asks again. Transaction coordinators do not exist here."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.group import partition_for
from reference_broker.offsets_topic import OFFSETS_TOPIC
from reference_broker.protocol.shapes import Shapes

GROUP = 0


async def handle(broker, header, request):
    shape = Shapes(request)
    if getattr(request, "key_type", GROUP) != GROUP:
        return shape("FindCoordinatorResponse", error_code=ErrorCode.coordinator_not_available,
                     error_message="transactions are not implemented",
                     node_id=-1, host="", port=-1)
    await broker.offsets.ensure()
    index = partition_for(request.key, broker.config["offsets.topic.num.partitions"])
    state = broker.image.partition(OFFSETS_TOPIC, index)
    leader = None if state is None else broker.image.brokers.get(state.leader)
    if leader is None or leader.fenced:
        return shape("FindCoordinatorResponse", error_code=ErrorCode.coordinator_not_available,
                     error_message=f"{OFFSETS_TOPIC}-{index} has no leader",
                     node_id=-1, host="", port=-1)
    # Kafka's answer without error carries "NONE" as its message
    # (KafkaApis.handleFindCoordinatorRequest: Errors.NONE.message()).
    return shape("FindCoordinatorResponse", error_code=ErrorCode.none, error_message="NONE",
                 node_id=leader.broker_id, host=leader.host, port=leader.port)
