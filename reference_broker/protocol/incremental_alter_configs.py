"""IncrementalAlterConfigs (KIP-339, v0–v1): a topic's configs changed by
SET, DELETE, APPEND or SUBTRACT — decided by the controller, which checks
the result as it checks CreateTopics' configs (topic_configs.changed), and
answered once this broker's metadata shows it. On a controller-only node
`broker` is the controller service, which answers at once.

Broker settings are static here (`--config` at start): changing a BROKER
resource answers INVALID_CONFIG naming the keys, as Kafka answers a
setting it cannot update dynamically; another resource type answers
INVALID_REQUEST.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes
from reference_broker.topic_configs import ConfigChange
from reference_broker.topic_names import topic_name_error

TOPIC, BROKER = 2, 4    # ConfigResource.Type


async def handle(broker, header, request):
    shape = Shapes(request)
    responses = []
    for resource in request.resources:
        error, message = ErrorCode.none, None
        if resource.resource_type == TOPIC:
            message = topic_name_error(resource.resource_name)
            if message:
                error = ErrorCode.invalid_topic_exception
            else:
                error, message = await broker.alter_topic_configs(
                    resource.resource_name,
                    [ConfigChange(c.name, c.config_operation, c.value) for c in resource.configs],
                    request.validate_only)
        elif resource.resource_type == BROKER:
            if resource.configs:
                error = ErrorCode.invalid_config
                message = ("Cannot update these configs dynamically: "
                           + ", ".join(c.name for c in resource.configs)
                           + " (the reference broker's settings are fixed by --config at start)")
        else:
            error = ErrorCode.invalid_request
            message = f"Unsupported resource type: {resource.resource_type}"
        responses.append(shape("AlterConfigsResourceResponse", error_code=error,
                               error_message=message, resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    return shape("IncrementalAlterConfigsResponse", responses=tuple(responses))
