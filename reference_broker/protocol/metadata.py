"""Metadata: the one broker, its topics, leaders, replicas and leader epochs.

A topic the client names but that does not exist is created when
auto.create.topics.enable allows and the request allows it
(allow_auto_topic_creation, v4+; always allowed before v4).
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.broker import topic_name_error
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    host, port = broker.config.advertise
    node = broker.node_id
    if request.topics is None:
        names = sorted(broker.topics)
    else:
        names = [t.name for t in request.topics]
    allow = getattr(request, "allow_auto_topic_creation", True)
    topics = []
    for name in names:
        topic = broker.topic_for_client(name, allow)
        if topic is None:
            # KafkaApis.getTopicMetadata: a name Topic.validate rejects is
            # INVALID_TOPIC_EXCEPTION, auto-creation allowed or not.
            error = ErrorCode.invalid_topic_exception if topic_name_error(name) \
                else ErrorCode.unknown_topic_or_partition
            topics.append(shape("MetadataResponseTopic", error_code=error, name=name,
                                partitions=()))
            continue
        partitions = tuple(
            shape("MetadataResponsePartition", error_code=ErrorCode.none,
                  partition_index=p.index, leader_id=node, leader_epoch=p.leader_epoch,
                  replica_nodes=(node,), isr_nodes=(node,), offline_replicas=())
            for p in topic.partitions)
        topics.append(shape("MetadataResponseTopic", error_code=ErrorCode.none, name=name,
                            is_internal=topic.internal, partitions=partitions))
    brokers = (shape("MetadataResponseBroker", node_id=node, host=host, port=port),)
    return shape("MetadataResponse", brokers=brokers, cluster_id=broker.cluster_id,
                 controller_id=node, topics=tuple(topics))
