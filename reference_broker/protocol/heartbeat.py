"""Heartbeat: keeps a member's session alive; tells it when to rejoin."""

from __future__ import annotations

from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    error = await broker.coordinator.heartbeat(
        request.group_id, generation_id=request.generation_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None))
    return Shapes(request)("HeartbeatResponse", error_code=error)
