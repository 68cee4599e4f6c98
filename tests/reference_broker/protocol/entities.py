"""Request entities for the protocol tests, any version: kio has one
dataclass per API, version and nesting level; `Shape` keeps only the
fields the asked-for version has (the request-side twin of the broker's
`protocol/shapes.py`), so one builder serves every version of its API."""

from __future__ import annotations

import uuid
from dataclasses import fields
from datetime import timedelta
from functools import cache

from kio.index import load_payload_module
from kio.static.constants import EntityType

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP, SYNC_GROUP = 8, 9, 10, 11, 14
API_VERSIONS, CREATE_TOPICS, DELETE_TOPICS = 18, 19, 20
INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 22, 23
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4

LATEST, EARLIEST = -1, -2


@cache
def _known(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(cls))


class Shape:
    """A request's entities at one version, built from keyword values; the
    fields that version lacks are dropped (the conformance suite's too)."""

    def __init__(self, api_key: int, version: int):
        self._module = load_payload_module(api_key, version, EntityType.request)

    def __call__(self, entity: str, /, **values):
        cls = getattr(self._module, entity)
        return cls(**{k: v for k, v in values.items() if k in _known(cls)})


def api_versions(version: int = 3):
    return Shape(API_VERSIONS, version)(
        "ApiVersionsRequest", client_software_name="wire-test", client_software_version="1")


def metadata(topics: list[str] | None, *, allow_auto_topic_creation: bool = True,
             version: int = 8):
    shape = Shape(METADATA, version)
    return shape("MetadataRequest",
                 topics=None if topics is None else tuple(
                     shape("MetadataRequestTopic", name=name) for name in topics),
                 allow_auto_topic_creation=allow_auto_topic_creation,
                 include_cluster_authorized_operations=False,
                 include_topic_authorized_operations=False)


def produce(topic: str, partition: int, records: bytes | None, *, acks: int = -1,
            version: int = 8):
    shape = Shape(PRODUCE, version)
    return shape("ProduceRequest", acks=acks, timeout=timedelta(seconds=30), topic_data=(
        shape("TopicProduceData", name=topic, partition_data=(
            shape("PartitionProduceData", index=partition, records=records),)),))


def fetch(topic: str, partition: int, offset: int, *, max_wait_ms: int = 0, min_bytes: int = 0,
          current_leader_epoch: int = -1, max_bytes: int = 1 << 20, version: int = 11):
    shape = Shape(FETCH, version)
    return shape("FetchRequest", max_wait=timedelta(milliseconds=max_wait_ms),
                 min_bytes=min_bytes, max_bytes=max_bytes, forgotten_topics_data=(), topics=(
                     shape("FetchTopic", topic=topic, topic_id=uuid.UUID(int=0), partitions=(
                         shape("FetchPartition", partition=partition, fetch_offset=offset,
                               current_leader_epoch=current_leader_epoch,
                               partition_max_bytes=max_bytes),)),))


def list_offsets(topic: str, partition: int, timestamp: int, *, current_leader_epoch: int = -1,
                 version: int = 5):
    shape = Shape(LIST_OFFSETS, version)
    return shape("ListOffsetsRequest", replica_id=-1, isolation_level=0, topics=(
        shape("ListOffsetsTopic", name=topic, partitions=(
            shape("ListOffsetsPartition", partition_index=partition, timestamp=timestamp,
                  current_leader_epoch=current_leader_epoch),)),))


def offset_for_leader_epoch(topic: str, partition: int, leader_epoch: int, *,
                            current_leader_epoch: int = -1, version: int = 3):
    shape = Shape(OFFSET_FOR_LEADER_EPOCH, version)
    return shape("OffsetForLeaderEpochRequest", replica_id=-1, topics=(
        shape("OffsetForLeaderTopic", topic=topic, partitions=(
            shape("OffsetForLeaderPartition", partition=partition, leader_epoch=leader_epoch,
                  current_leader_epoch=current_leader_epoch),)),))


def create_topics(names: str | list[str], *, partitions: int = 1, replication_factor: int = 1,
                  validate_only: bool = False, version: int = 4,
                  configs: dict[str, str | None] | None = None,
                  assignments: dict[int, list[int]] | None = None):
    shape = Shape(CREATE_TOPICS, version)
    return shape("CreateTopicsRequest", validate_only=validate_only, topics=tuple(
        shape("CreatableTopic", name=name, num_partitions=partitions,
              replication_factor=replication_factor, assignments=tuple(
                  shape("CreatableReplicaAssignment", partition_index=index,
                        broker_ids=tuple(brokers))
                  for index, brokers in (assignments or {}).items()),
              configs=tuple(shape("CreatableTopicConfig", name=key, value=value)
                            for key, value in (configs or {}).items()))
        for name in ([names] if isinstance(names, str) else names)))


def describe_configs(resources: list[tuple[int, str, list[str] | None]], *,
                     synonyms: bool = False, documentation: bool = False, version: int = 4):
    """(resource type, name, keys or None for all) per resource."""
    shape = Shape(DESCRIBE_CONFIGS, version)
    return shape("DescribeConfigsRequest", include_synonyms=synonyms,
                 include_documentation=documentation, resources=tuple(
                     shape("DescribeConfigsResource", resource_type=kind, resource_name=name,
                           configuration_keys=None if keys is None else tuple(keys))
                     for kind, name, keys in resources))


def incremental_alter_configs(resources: list[tuple[int, str, list[tuple[str, int, str | None]]]],
                              *, validate_only: bool = False, version: int = 1):
    """(resource type, name, [(key, operation, value)]) per resource."""
    shape = Shape(INCREMENTAL_ALTER_CONFIGS, version)
    return shape("IncrementalAlterConfigsRequest", validate_only=validate_only, resources=tuple(
        shape("AlterConfigsResource", resource_type=kind, resource_name=name, configs=tuple(
            shape("AlterableConfig", name=key, config_operation=operation, value=value)
            for key, operation, value in changes))
        for kind, name, changes in resources))


def init_producer_id(version: int = 4):
    return Shape(INIT_PRODUCER_ID, version)(
        "InitProducerIdRequest", transactional_id=None,
        transaction_timeout=timedelta(seconds=60))


def find_coordinator(group_id: str, version: int = 2):
    return Shape(FIND_COORDINATOR, version)("FindCoordinatorRequest", key=group_id)


def join_group(group_id: str, member_id: str = "", *, version: int = 5):
    shape = Shape(JOIN_GROUP, version)
    return shape("JoinGroupRequest", group_id=group_id, member_id=member_id,
                 session_timeout=timedelta(seconds=10), rebalance_timeout=timedelta(seconds=10),
                 protocol_type="consumer", protocols=(
                     shape("JoinGroupRequestProtocol", name="range", metadata=b"\0\1"),))


def sync_group(group_id: str, generation_id: int, member_id: str,
               assignments: dict[str, bytes], *, version: int = 3):
    shape = Shape(SYNC_GROUP, version)
    return shape("SyncGroupRequest", group_id=group_id, generation_id=generation_id,
                 member_id=member_id, assignments=tuple(
                     shape("SyncGroupRequestAssignment", member_id=member, assignment=data)
                     for member, data in assignments.items()))


def offset_commit(group_id: str, generation_id: int, member_id: str,
                  offsets: dict[tuple[str, int], int], *, version: int = 7,
                  leader_epoch: int = -1):
    shape = Shape(OFFSET_COMMIT, version)
    topics = sorted({topic for topic, _ in offsets})
    return shape("OffsetCommitRequest", group_id=group_id,
                 generation_id_or_member_epoch=generation_id, member_id=member_id, topics=tuple(
                     shape("OffsetCommitRequestTopic", name=topic, partitions=tuple(
                         shape("OffsetCommitRequestPartition", partition_index=partition,
                               committed_offset=offset, committed_leader_epoch=leader_epoch,
                               committed_metadata=None)
                         for (t, partition), offset in sorted(offsets.items()) if t == topic))
                     for topic in topics))


def delete_topics(names: list[str], *, version: int = 3):
    return Shape(DELETE_TOPICS, version)("DeleteTopicsRequest", topic_names=tuple(names),
                                          timeout=timedelta(seconds=30))


def offset_fetch(group_id: str, partitions: dict[str, list[int]] | None, *, version: int = 5):
    shape = Shape(OFFSET_FETCH, version)
    return shape("OffsetFetchRequest", group_id=group_id, topics=None if partitions is None else
                 tuple(shape("OffsetFetchRequestTopic", name=topic,
                             partition_indexes=tuple(indexes))
                       for topic, indexes in partitions.items()))
