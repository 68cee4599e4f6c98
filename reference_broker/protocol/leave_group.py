"""LeaveGroup: one member (v0–v2) or a batch of members (v3+, KIP-345)."""

from __future__ import annotations

from reference_broker.group import LeavingMember
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    if shape.version < 3:
        leaving = [LeavingMember(request.member_id)]
    else:
        leaving = [LeavingMember(m.member_id, m.group_instance_id) for m in request.members]
    result = await broker.coordinator.leave_group(request.group_id, leaving)
    if shape.version < 3:
        return shape("LeaveGroupResponse", error_code=result.single_error)
    return shape("LeaveGroupResponse", error_code=result.error, members=tuple(
        shape("MemberResponse", member_id=m.member_id, group_instance_id=m.group_instance_id,
              error_code=m.error) for m in result.members))
