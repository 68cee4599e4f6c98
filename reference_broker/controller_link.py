"""A broker's way to its controller.

`ControllerLink` is every question a broker asks the controller. A node
that hosts the controller itself (`--process-roles broker,controller`)
passes its `ControllerService` (in-process calls); a broker-only node
passes a `RemoteController`, which asks over the Kafka protocol with the
KRaft APIs: BrokerRegistration (KIP-631), BrokerHeartbeat, AlterPartition
(KIP-497), CreateTopics, DeleteTopics and IncrementalAlterConfigs forwarded
as a client would send them (KIP-590's forwarding, without its envelope),
and Fetch on `__cluster_metadata` to follow the metadata log. Either
way the broker sees the same results; a link that cannot reach the
controller raises PeerError and the caller retries.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Protocol

from kio.schema.alter_partition.v2 import request as alter
from kio.schema.broker_heartbeat.v0 import request as heartbeat
from kio.schema.broker_registration.v0 import request as registration
from kio.schema.create_topics.v4 import request as create
from kio.schema.delete_topics.v3 import request as delete
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch
from kio.schema.incremental_alter_configs.v1 import request as alter_configs
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i16, i32, i64, u16

from reference_broker.controller.new_topic import NewTopic
from reference_broker.controller.records import MetadataRecord, PartitionState
from reference_broker.controller.service import METADATA_TOPIC
from reference_broker.metadata_batches import decode_metadata_batches
from reference_broker.peer import Peer, PeerError
from reference_broker.topic_configs import ConfigChange

TOPIC_RESOURCE = 2      # ConfigResource.Type.TOPIC

REQUEST_TIMEOUT_S = 5.0


class ControllerLink(Protocol):
    async def register(self, broker_id: int, host: str, port: int) -> int: ...

    async def heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                        metadata_offset: int) -> tuple[ErrorCode, bool]: ...

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str,
                              partition: int, leader_epoch: int, partition_epoch: int,
                              new_isr: tuple[int, ...]
                              ) -> tuple[ErrorCode, PartitionState | None]: ...

    async def create_topics(self, topics: list[NewTopic], validate_only: bool
                            ) -> list[tuple[ErrorCode, str | None]]: ...

    async def alter_topic_configs(self, name: str, changes: list[ConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]: ...

    async def delete_topics(self, names: list[str]) -> list[ErrorCode]: ...

    async def read_log(self, offset: int, max_wait_s: float) -> list[MetadataRecord]: ...


class RemoteController:
    """The controller at host:port, seen from broker `node_id`. Topic ids
    for AlterPartition come from `topic_id_of`, the broker's image."""

    def __init__(self, host: str, port: int, node_id: int, topic_id_of):
        client_id = f"broker-{node_id}"
        self._calls = Peer(host, port, client_id)
        self._log = Peer(host, port, client_id + "-metadata")  # long polls wait here
        self._node_id = node_id
        self._topic_id_of = topic_id_of

    def __repr__(self) -> str:
        return f"RemoteController({self._calls.host}:{self._calls.port})"

    def close(self) -> None:
        self._calls.close()
        self._log.close()

    async def register(self, broker_id: int, host: str, port: int) -> int:
        response = await self._calls.request(registration.BrokerRegistrationRequest(
            broker_id=BrokerId(broker_id), cluster_id="", incarnation_id=uuid.uuid4(),
            listeners=(registration.Listener(name="PLAINTEXT", host=host, port=u16(port),
                                             security_protocol=i16(0)),),
            features=(), rack=None), REQUEST_TIMEOUT_S)
        if response.error_code != ErrorCode.none:
            raise PeerError(f"{self}: BrokerRegistration answered {response.error_code.name}")
        return response.broker_epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                        metadata_offset: int) -> tuple[ErrorCode, bool]:
        response = await self._calls.request(heartbeat.BrokerHeartbeatRequest(
            broker_id=BrokerId(broker_id), broker_epoch=i64(broker_epoch),
            current_metadata_offset=i64(metadata_offset), want_fence=want_fence,
            want_shut_down=False), REQUEST_TIMEOUT_S)
        return response.error_code, response.is_fenced

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str,
                              partition: int, leader_epoch: int, partition_epoch: int,
                              new_isr: tuple[int, ...]
                              ) -> tuple[ErrorCode, PartitionState | None]:
        topic_id = self._topic_id_of(topic)
        if topic_id is None:
            return ErrorCode.unknown_topic_or_partition, None
        response = await self._calls.request(alter.AlterPartitionRequest(
            broker_id=BrokerId(broker_id), broker_epoch=i64(broker_epoch),
            topics=(alter.TopicData(topic_id=uuid.UUID(topic_id), partitions=(
                alter.PartitionData(partition_index=i32(partition),
                                    leader_epoch=i32(leader_epoch),
                                    new_isr=tuple(BrokerId(b) for b in new_isr),
                                    leader_recovery_state=i8(0),
                                    partition_epoch=i32(partition_epoch)),)),)),
            REQUEST_TIMEOUT_S)
        if response.error_code != ErrorCode.none:
            return response.error_code, None
        answer = response.topics[0].partitions[0]
        if answer.error_code != ErrorCode.none:
            return answer.error_code, None
        # The replicas are not in the answer; the leader keeps its own.
        return ErrorCode.none, PartitionState(topic, partition, (), tuple(answer.isr),
                                              answer.leader_id, answer.leader_epoch,
                                              answer.partition_epoch)

    async def create_topics(self, topics: list[NewTopic], validate_only: bool
                            ) -> list[tuple[ErrorCode, str | None]]:
        response = await self._calls.request(create.CreateTopicsRequest(
            topics=tuple(create.CreatableTopic(
                name=TopicName(t.name), num_partitions=i32(t.num_partitions),
                replication_factor=i16(t.replication_factor),
                assignments=tuple(create.CreatableReplicaAssignment(
                    partition_index=i32(index), broker_ids=tuple(BrokerId(b) for b in replicas))
                    for index, replicas in t.assignments),
                configs=tuple(create.CreatableTopicConfig(name=name, value=value)
                              for name, value in t.configs))
                for t in topics),
            timeout=timedelta(seconds=REQUEST_TIMEOUT_S), validate_only=validate_only),
            REQUEST_TIMEOUT_S)
        by_name = {r.name: (r.error_code, r.error_message) for r in response.topics}
        return [by_name.get(t.name, (ErrorCode.unknown_server_error, "no answer"))
                for t in topics]

    async def alter_topic_configs(self, name: str, changes: list[ConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        response = await self._calls.request(alter_configs.IncrementalAlterConfigsRequest(
            resources=(alter_configs.AlterConfigsResource(
                resource_type=i8(TOPIC_RESOURCE), resource_name=name, configs=tuple(
                    alter_configs.AlterableConfig(name=c.name, config_operation=i8(c.operation),
                                                  value=c.value)
                    for c in changes)),),
            validate_only=validate_only), REQUEST_TIMEOUT_S)
        if not response.responses:
            return ErrorCode.unknown_server_error, "no answer"
        answer = response.responses[0]
        return answer.error_code, answer.error_message

    async def delete_topics(self, names: list[str]) -> list[ErrorCode]:
        response = await self._calls.request(delete.DeleteTopicsRequest(
            topic_names=tuple(TopicName(n) for n in names),
            timeout=timedelta(seconds=REQUEST_TIMEOUT_S)), REQUEST_TIMEOUT_S)
        by_name = {r.name: r.error_code for r in response.responses}
        return [by_name.get(name, ErrorCode.unknown_server_error) for name in names]

    async def read_log(self, offset: int, max_wait_s: float) -> list[MetadataRecord]:
        response = await self._log.request(fetch.FetchRequest(
            cluster_id=None, replica_id=BrokerId(self._node_id),
            max_wait=timedelta(seconds=max_wait_s), min_bytes=i32(1), max_bytes=i32(2 ** 31 - 1),
            isolation_level=i8(0), session_id=i32(0), session_epoch=i32(-1),
            topics=(fetch.FetchTopic(topic=TopicName(METADATA_TOPIC), partitions=(
                fetch.FetchPartition(partition=i32(0), current_leader_epoch=i32(-1),
                                     fetch_offset=i64(offset), last_fetched_epoch=i32(-1),
                                     log_start_offset=i64(-1),
                                     partition_max_bytes=i32(2 ** 31 - 1)),)),),
            forgotten_topics_data=(), rack_id=""), max_wait_s + REQUEST_TIMEOUT_S)
        data = response.responses[0].partitions[0]
        if data.error_code != ErrorCode.none:
            raise PeerError(f"{self}: metadata fetch at {offset} answered {data.error_code.name}")
        return decode_metadata_batches(data.records or b"", offset)
