"""JoinGroup: the adapter over GroupCoordinator.join_group (the response
waits for the rebalance to complete)."""

from __future__ import annotations

from reference_broker.protocol.client import client_host
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    session_ms = int(request.session_timeout.total_seconds() * 1000)
    # JoinGroup v0 has no rebalance timeout: the session timeout bounds it.
    rebalance = getattr(request, "rebalance_timeout", None)
    rebalance_ms = int(rebalance.total_seconds() * 1000) if rebalance is not None else session_ms
    result = await broker.coordinator.join_group(
        request.group_id, member_id=request.member_id,
        group_instance_id=getattr(request, "group_instance_id", None),
        require_known_member_id=shape.version >= 4,  # KIP-394
        client_id=header.client_id or "", client_host=client_host(),
        session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
        protocol_type=request.protocol_type,
        protocols=[(p.name, p.metadata) for p in request.protocols])
    members = tuple(shape("JoinGroupResponseMember", member_id=m.member_id,
                          group_instance_id=m.group_instance_id, metadata=m.metadata)
                    for m in result.members)
    return shape("JoinGroupResponse", error_code=result.error,
                 generation_id=result.generation_id, protocol_name=result.protocol_name or "",
                 leader=result.leader_id, member_id=result.member_id, members=members)
