"""FindCoordinator: this node, the leader of every `__consumer_offsets`
partition (created on first use, as Kafka does). Transaction coordinators
do not exist here."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes

GROUP = 0


async def handle(broker, header, request):
    shape = Shapes(request)
    if getattr(request, "key_type", GROUP) != GROUP:
        return shape("FindCoordinatorResponse", error_code=ErrorCode.coordinator_not_available,
                     error_message="transactions are not implemented",
                     node_id=-1, host="", port=-1)
    broker.offsets.ensure()
    host, port = broker.config.advertise
    return shape("FindCoordinatorResponse", error_code=ErrorCode.none, error_message=None,
                 node_id=broker.node_id, host=host, port=port)
