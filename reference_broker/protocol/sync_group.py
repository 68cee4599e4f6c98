"""SyncGroup: the leader's assignment in, each member's share out."""

from __future__ import annotations

from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    result = await broker.coordinator.sync_group(
        request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        assignments={a.member_id: a.assignment for a in request.assignments})
    return shape("SyncGroupResponse", error_code=result.error, assignment=result.assignment)
