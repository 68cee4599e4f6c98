"""Metadata: the cluster as this broker's metadata image shows it — the
unfenced brokers, and per partition its leader, leader epoch, replicas,
ISR and offline (fenced) replicas. A partition without a leader answers
LEADER_NOT_AVAILABLE, so clients retry (MetadataResponse in KRaft,
KafkaApis.handleTopicMetadataRequest).

A topic the client names but that does not exist is created when
auto.create.topics.enable allows and the request allows it
(allow_auto_topic_creation, v4+; always allowed before v4). The
controller id is this broker's own: in KRaft brokers report a broker as
"controller" and forward what clients send it (KIP-590).

Under the `no-leader-epoch-fencing` switch the leader epochs are not told
(-1, "unknown", as before KIP-320's Metadata v7): clients then neither name
an epoch nor validate their position after a leader change.
"""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.offsets_topic import OFFSETS_TOPIC
from reference_broker.controller.partition_change import NO_LEADER
from reference_broker.log.leader_epoch_cache import UNDEFINED_EPOCH
from reference_broker.protocol.shapes import Shapes
from reference_broker.topic_names import topic_name_error


async def handle(broker, header, request):
    shape = Shapes(request)
    if request.topics is None:
        names = sorted(broker.topics)
    else:
        names = [t.name for t in request.topics]
    allow = getattr(request, "allow_auto_topic_creation", True)
    topics = []
    for name in names:
        topic = await broker.topic_for_client(name, allow)
        if topic is None:
            # KafkaApis.getTopicMetadata: a name Topic.validate rejects is
            # INVALID_TOPIC_EXCEPTION, auto-creation allowed or not.
            error = ErrorCode.invalid_topic_exception if topic_name_error(name) \
                else ErrorCode.unknown_topic_or_partition
            topics.append(shape("MetadataResponseTopic", error_code=error, name=name,
                                partitions=()))
            continue
        image = broker.image
        partitions = tuple(
            shape("MetadataResponsePartition",
                  error_code=ErrorCode.leader_not_available if p.leader == NO_LEADER
                  else ErrorCode.none,
                  partition_index=p.partition, leader_id=p.leader,
                  leader_epoch=p.leader_epoch if broker.tells_leader_epochs else UNDEFINED_EPOCH,
                  replica_nodes=p.replicas, isr_nodes=p.isr,
                  offline_replicas=tuple(r for r in p.replicas if not image.is_active(r)))
            for _, p in sorted(topic.partitions.items()))
        topics.append(shape("MetadataResponseTopic", error_code=ErrorCode.none, name=name,
                            is_internal=name == OFFSETS_TOPIC, partitions=partitions))
    brokers = tuple(shape("MetadataResponseBroker", node_id=b.broker_id, host=b.host,
                          port=b.port)
                    for b in broker.live_brokers())
    return shape("MetadataResponse", brokers=brokers, cluster_id=broker.cluster_id,
                 controller_id=broker.node_id, topics=tuple(topics))
