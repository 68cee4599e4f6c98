"""The controller's own APIs, served where the controller runs: what
brokers send it (KIP-631's BrokerRegistration and BrokerHeartbeat,
KIP-497's AlterPartition) and the Fetch of `__cluster_metadata` through
which they follow the metadata log. Each adapter gets the
`ControllerService`."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.controller.service import METADATA_TOPIC
from reference_broker.metadata_batches import encode_metadata_batch
from reference_broker.protocol.shapes import Shapes


class BrokerRegistration:
    API_KEY = 62

    @staticmethod
    async def handle(controller, header, request):
        shape = Shapes(request)
        if not request.listeners:
            return shape("BrokerRegistrationResponse", error_code=ErrorCode.invalid_request,
                         broker_epoch=-1)
        listener = request.listeners[0]
        epoch = await controller.register(request.broker_id, listener.host, listener.port)
        return shape("BrokerRegistrationResponse", error_code=ErrorCode.none,
                     broker_epoch=epoch)


class BrokerHeartbeat:
    API_KEY = 63

    @staticmethod
    async def handle(controller, header, request):
        shape = Shapes(request)
        error, fenced = await controller.heartbeat(
            request.broker_id, request.broker_epoch, want_fence=request.want_fence,
            metadata_offset=request.current_metadata_offset)
        return shape("BrokerHeartbeatResponse", error_code=error,
                     is_caught_up=request.current_metadata_offset >= controller.end_offset,
                     is_fenced=fenced, should_shut_down=False)


class AlterPartition:
    API_KEY = 56

    @staticmethod
    async def handle(controller, header, request):
        shape = Shapes(request)
        names = {info.topic_id: name for name, info in controller.controller.image.topics.items()}
        topics = []
        for topic in request.topics:
            name = names.get(str(topic.topic_id))
            answers = []
            for want in topic.partitions:
                if name is None:
                    error, state = ErrorCode.unknown_topic_id, None
                else:
                    error, state = await controller.alter_partition(
                        request.broker_id, request.broker_epoch, name, want.partition_index,
                        want.leader_epoch, want.partition_epoch, tuple(want.new_isr))
                answers.append(shape(
                    "PartitionData", partition_index=want.partition_index, error_code=error,
                    leader_id=state.leader if state else -1,
                    leader_epoch=state.leader_epoch if state else -1,
                    isr=state.isr if state else (), leader_recovery_state=0,
                    partition_epoch=state.partition_epoch if state else -1))
            topics.append(shape("TopicData", topic_id=topic.topic_id, partitions=tuple(answers)))
        return shape("AlterPartitionResponse", error_code=ErrorCode.none, topics=tuple(topics))


def is_metadata_fetch(request) -> bool:
    return any(topic.topic == METADATA_TOPIC for topic in request.topics)


class MetadataFetch:
    """Fetch on `__cluster_metadata` partition 0: the records from the fetch
    offset, long-polled up to max_wait."""

    @staticmethod
    async def handle(controller, header, request):
        shape = Shapes(request)
        want = request.topics[0].partitions[0]
        error, records = ErrorCode.none, b""
        if want.fetch_offset > controller.end_offset or want.fetch_offset < 0:
            error = ErrorCode.offset_out_of_range
        else:
            found = await controller.read_log(want.fetch_offset,
                                              request.max_wait.total_seconds())
            records = encode_metadata_batch(found, want.fetch_offset)
        return shape("FetchResponse", error_code=ErrorCode.none, session_id=0, responses=(
            shape("FetchableTopicResponse", topic=METADATA_TOPIC, partitions=(
                shape("PartitionData", partition_index=0, error_code=error,
                      high_watermark=controller.end_offset,
                      last_stable_offset=controller.end_offset, log_start_offset=0,
                      aborted_transactions=None, preferred_read_replica=-1,
                      records=records),)),))
