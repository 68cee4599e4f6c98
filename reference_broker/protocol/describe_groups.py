"""DescribeGroups: state, protocol and members (with assignments) of groups."""

from __future__ import annotations

from reference_broker.protocol.shapes import Shapes

# Authorized operations are not computed (no ACLs): Kafka's "not requested" value.
_NO_OPERATIONS = -2147483648


async def handle(broker, header, request):
    shape = Shapes(request)
    return shape("DescribeGroupsResponse", groups=tuple(
        shape("DescribedGroup", error_code=g.error, group_id=g.group_id, group_state=g.state,
              protocol_type=g.protocol_type, protocol_data=g.protocol,
              authorized_operations=_NO_OPERATIONS, members=tuple(
                  shape("DescribedGroupMember", member_id=m.member_id,
                        group_instance_id=m.group_instance_id, client_id=m.client_id,
                        client_host=m.client_host, member_metadata=m.metadata,
                        member_assignment=m.assignment) for m in g.members))
        for g in broker.coordinator.describe_groups(request.groups)))
