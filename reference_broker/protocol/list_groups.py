"""ListGroups: every group this coordinator serves."""

from __future__ import annotations

from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    result = broker.coordinator.list_groups()
    return shape("ListGroupsResponse", error_code=result.error, groups=tuple(
        shape("ListedGroup", group_id=g.group_id, protocol_type=g.protocol_type)
        for g in result.groups))
