"""IncrementalAlterConfigs (KIP-339, v0–v1): a topic's configs changed by
SET, DELETE, APPEND or SUBTRACT — decided by the controller, which checks
the result as it checks CreateTopics' configs (topic_configs.changed), and
answered once this broker's metadata shows it. On a controller-only node
`broker` is the controller service, which answers at once.

Before anything is forwarded, the request is checked as Kafka's broker
checks it (ConfigAdminManager.preprocess): a resource named twice, a key
named twice in one resource, or a null value for anything but DELETE is
INVALID_REQUEST for that resource.

Broker settings are static here (`--config` at start). A BROKER resource
must name this broker or be empty (the cluster default), else
INVALID_REQUEST. Changing a setting Kafka cannot change dynamically either
answers INVALID_REQUEST as Kafka does; changing any other (one Kafka's
DynamicBrokerConfig would take, or a name it does not know and would
store) answers INVALID_CONFIG naming the keys — a known divergence
(docs/broker.md). DELETE alone removes no dynamic value, since there is
none: NONE. Another resource type answers INVALID_REQUEST.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.config import SETTINGS
from reference_broker.protocol.shapes import Shapes
from reference_broker.topic_configs import DELETE, ConfigChange
from reference_broker.topic_names import topic_name_error

TOPIC, BROKER = 2, 4    # ConfigResource.Type
# The settings this broker honours that Kafka 4 can change without a
# restart (DynamicBrokerConfig: the log configs, message.max.bytes, and
# min.insync.replicas as a cluster default). The others are
# "Cannot update these configs dynamically" there too.
KAFKA_DYNAMIC = frozenset({
    "message.max.bytes", "log.segment.bytes", "log.index.interval.bytes",
    "log.flush.interval.messages", "log.flush.interval.ms", "unclean.leader.election.enable",
    "min.insync.replicas"})


async def handle(broker, header, request):
    shape = Shapes(request)
    named = [(r.resource_type, r.resource_name) for r in request.resources]
    responses = []
    for resource in request.resources:
        error, message = _preprocess(resource, named)
        if error != ErrorCode.none:
            pass
        elif resource.resource_type == TOPIC:
            message = topic_name_error(resource.resource_name)
            if message:
                error = ErrorCode.invalid_topic_exception
            else:
                error, message = await broker.alter_topic_configs(
                    resource.resource_name,
                    [ConfigChange(c.name, c.config_operation, c.value) for c in resource.configs],
                    request.validate_only)
        elif resource.resource_type == BROKER:
            error, message = _broker_change(broker, resource)
        else:
            error = ErrorCode.invalid_request
            message = f"Unsupported resource type: {resource.resource_type}"
        responses.append(shape("AlterConfigsResourceResponse", error_code=error,
                               error_message=message, resource_type=resource.resource_type,
                               resource_name=resource.resource_name))
    return shape("IncrementalAlterConfigsResponse", responses=tuple(responses))


def _preprocess(resource, named) -> tuple[ErrorCode, str | None]:
    """ConfigAdminManager.preprocess: what is refused before the resource
    is looked at."""
    if named.count((resource.resource_type, resource.resource_name)) > 1:
        return ErrorCode.invalid_request, "Each resource must appear at most once."
    keys = [c.name for c in resource.configs]
    if len(set(keys)) != len(keys):
        return ErrorCode.invalid_request, "Error due to duplicate config keys"
    nulls = [c.name for c in resource.configs
             if c.config_operation != DELETE and c.value is None]
    if nulls:
        return ErrorCode.invalid_request, "Null value not supported for : " + ", ".join(nulls)
    return ErrorCode.none, None


def _broker_change(broker, resource) -> tuple[ErrorCode, str | None]:
    if resource.resource_name not in ("", str(broker.node_id)):
        return ErrorCode.invalid_request, (f"Unexpected broker id, expected {broker.node_id}, "
                                           f"but received {resource.resource_name}")
    changing = [c.name for c in resource.configs if c.config_operation != DELETE]
    static = [name for name in changing if name in SETTINGS and name not in KAFKA_DYNAMIC]
    if static:
        return ErrorCode.invalid_request, \
            "Cannot update these configs dynamically: [" + ", ".join(static) + "]"
    if changing:
        return ErrorCode.invalid_config, (
            "Cannot update these configs dynamically: " + ", ".join(changing)
            + " (the reference broker's settings are fixed by --config at start)")
    return ErrorCode.none, None
