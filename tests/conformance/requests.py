"""Request entities at whatever version the suite negotiated: kio has one
dataclass per API, version and nesting level, and `Shape` keeps only the
fields the version has, so one builder serves every version."""

from __future__ import annotations

import uuid
from datetime import timedelta

from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.reference_broker.protocol.entities import Shape

PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR, JOIN_GROUP = 8, 9, 10, 11
HEARTBEAT, LEAVE_GROUP, SYNC_GROUP = 12, 13, 14
API_VERSIONS, CREATE_TOPICS = 18, 19
INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH = 22, 23
ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN, TXN_OFFSET_COMMIT = 24, 25, 26, 28
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66
# The APIs the suite compares (ApiVersions aside: its answer is the two
# brokers' own lists, which differ by design).
COMPARED = (PRODUCE, FETCH, LIST_OFFSETS, METADATA, OFFSET_COMMIT, OFFSET_FETCH,
            FIND_COORDINATOR, JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, CREATE_TOPICS,
            INIT_PRODUCER_ID, OFFSET_FOR_LEADER_EPOCH, DESCRIBE_CONFIGS,
            INCREMENTAL_ALTER_CONFIGS, ADD_PARTITIONS_TO_TXN, ADD_OFFSETS_TO_TXN, END_TXN,
            TXN_OFFSET_COMMIT, DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS)
# Versions a client may not go above: AddPartitionsToTxn v4+ is the batched,
# broker-to-broker form (KIP-890 part 1: partition leaders verifying).
CLIENT_MAX = {ADD_PARTITIONS_TO_TXN: 3}
TOPIC_RESOURCE, BROKER_RESOURCE = 2, 4
EARLIEST, LATEST = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
GROUP_KEY, TRANSACTION_KEY = 0, 1       # FindCoordinator key types
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


def kio_max_version(api_key: int) -> int:
    """The highest request version kio can encode (and decode the answer of)."""
    known = []
    for version in range(32):
        try:
            load_payload_module(api_key, version, EntityType.request)
            load_payload_module(api_key, version, EntityType.response)
        except Exception:   # noqa: BLE001 — kio's UnknownEntity / ModuleNotFoundError
            continue
        known.append(version)
    return max(known)


def api_versions(version: int = 3):
    return Shape(API_VERSIONS, version)("ApiVersionsRequest",
                                        client_software_name="kchaos-conformance",
                                        client_software_version="1")


def metadata(v: int, topics: list[str] | None):
    s = Shape(METADATA, v)
    return s("MetadataRequest", topics=None if topics is None else tuple(
        s("MetadataRequestTopic", name=name, topic_id=uuid.UUID(int=0)) for name in topics),
        allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False)


def create_topics(v: int, topics, *, validate_only: bool = False, timeout_ms: int = 30000):
    """topics: (name, partitions, replication factor, {partition: [brokers]}
    or None, [(key, value)])."""
    s = Shape(CREATE_TOPICS, v)
    return s("CreateTopicsRequest", timeout=timedelta(milliseconds=timeout_ms),
             validate_only=validate_only, topics=tuple(
                 s("CreatableTopic", name=name, num_partitions=partitions,
                   replication_factor=rf, assignments=tuple(
                       s("CreatableReplicaAssignment", partition_index=index,
                         broker_ids=tuple(brokers))
                       for index, brokers in (assignment or {}).items()),
                   configs=tuple(s("CreatableTopicConfig", name=k, value=val)
                                 for k, val in configs))
                 for name, partitions, rf, assignment, configs in topics))


def describe_configs(v: int, resources, *, synonyms: bool):
    """resources: (type, name, keys or None)."""
    s = Shape(DESCRIBE_CONFIGS, v)
    return s("DescribeConfigsRequest", include_synonyms=synonyms, include_documentation=False,
             resources=tuple(s("DescribeConfigsResource", resource_type=kind,
                               resource_name=name,
                               configuration_keys=None if keys is None else tuple(keys))
                             for kind, name, keys in resources))


def incremental_alter_configs(v: int, resources, *, validate_only: bool):
    """resources: (type, name, [(key, operation, value)])."""
    s = Shape(INCREMENTAL_ALTER_CONFIGS, v)
    return s("IncrementalAlterConfigsRequest", validate_only=validate_only, resources=tuple(
        s("AlterConfigsResource", resource_type=kind, resource_name=name, configs=tuple(
            s("AlterableConfig", name=key, config_operation=op, value=value)
            for key, op, value in changes))
        for kind, name, changes in resources))


def produce(v: int, topic: str, partition: int, records: bytes, *, acks: int,
            timeout_ms: int = 10000, transactional_id: str | None = None):
    s = Shape(PRODUCE, v)
    return s("ProduceRequest", transactional_id=transactional_id, acks=acks,
             timeout=timedelta(milliseconds=timeout_ms), topic_data=(
                 s("TopicProduceData", name=topic, topic_id=uuid.UUID(int=0), partition_data=(
                     s("PartitionProduceData", index=partition, records=records),)),))


def fetch(v: int, topic: str, partition: int, offset: int, *, current_leader_epoch: int = -1,
          max_bytes: int = 1 << 20, max_wait_ms: int = 0, isolation_level: int = 0):
    s = Shape(FETCH, v)
    return s("FetchRequest", cluster_id=None, replica_id=-1,
             max_wait=timedelta(milliseconds=max_wait_ms), min_bytes=1, max_bytes=max_bytes,
             isolation_level=isolation_level, session_id=0, session_epoch=-1, rack_id="",
             forgotten_topics_data=(), topics=(
                 s("FetchTopic", topic=topic, topic_id=uuid.UUID(int=0), partitions=(
                     s("FetchPartition", partition=partition,
                       current_leader_epoch=current_leader_epoch, fetch_offset=offset,
                       last_fetched_epoch=-1, log_start_offset=-1,
                       partition_max_bytes=max_bytes),)),))


def list_offsets(v: int, topic: str, partition: int, timestamp: int, *,
                 current_leader_epoch: int = -1, isolation_level: int = 0):
    s = Shape(LIST_OFFSETS, v)
    return s("ListOffsetsRequest", replica_id=-1, isolation_level=isolation_level, topics=(
        s("ListOffsetsTopic", name=topic, partitions=(
            s("ListOffsetsPartition", partition_index=partition, timestamp=timestamp,
              current_leader_epoch=current_leader_epoch, max_num_offsets=1),)),))


def offset_for_leader_epoch(v: int, topic: str, partition: int, leader_epoch: int, *,
                            current_leader_epoch: int = -1):
    s = Shape(OFFSET_FOR_LEADER_EPOCH, v)
    return s("OffsetForLeaderEpochRequest", replica_id=-1, topics=(
        s("OffsetForLeaderTopic", topic=topic, partitions=(
            s("OffsetForLeaderPartition", partition=partition, leader_epoch=leader_epoch,
              current_leader_epoch=current_leader_epoch),)),))


def init_producer_id(v: int, producer_id: int = -1, producer_epoch: int = -1, *,
                     transactional_id: str | None = None, timeout_ms: int = 60000):
    return Shape(INIT_PRODUCER_ID, v)(
        "InitProducerIdRequest", transactional_id=transactional_id,
        transaction_timeout=timedelta(milliseconds=timeout_ms),
        producer_id=producer_id, producer_epoch=producer_epoch)


def find_coordinator(v: int, key: str, key_type: int = GROUP_KEY):
    return Shape(FIND_COORDINATOR, v)("FindCoordinatorRequest", key=key, key_type=key_type,
                                      coordinator_keys=(key,))


def join_group(v: int, group: str, member_id: str, instance_id: str | None,
               protocols: list[tuple[str, bytes]], *, session_ms: int = 10000,
               rebalance_ms: int = 10000):
    s = Shape(JOIN_GROUP, v)
    return s("JoinGroupRequest", group_id=group, session_timeout=timedelta(milliseconds=session_ms),
             rebalance_timeout=timedelta(milliseconds=rebalance_ms), member_id=member_id,
             group_instance_id=instance_id, protocol_type="consumer", reason=None,
             protocols=tuple(s("JoinGroupRequestProtocol", name=name, metadata=data)
                             for name, data in protocols))


def sync_group(v: int, group: str, generation: int, member_id: str, instance_id: str | None,
               assignments: list[tuple[str, bytes]]):
    s = Shape(SYNC_GROUP, v)
    return s("SyncGroupRequest", group_id=group, generation_id=generation, member_id=member_id,
             group_instance_id=instance_id, protocol_type="consumer", protocol_name="range",
             assignments=tuple(s("SyncGroupRequestAssignment", member_id=m, assignment=a)
                               for m, a in assignments))


def heartbeat(v: int, group: str, generation: int, member_id: str, instance_id: str | None):
    return Shape(HEARTBEAT, v)("HeartbeatRequest", group_id=group, generation_id=generation,
                               member_id=member_id, group_instance_id=instance_id)


def leave_group(v: int, group: str, members: list[tuple[str, str | None]]):
    """members: (member id, group instance id); below v3 only the first's id."""
    s = Shape(LEAVE_GROUP, v)
    return s("LeaveGroupRequest", group_id=group,
             member_id=members[0][0] if members else "",
             members=tuple(s("MemberIdentity", member_id=m, group_instance_id=i, reason=None)
                           for m, i in members))


def offset_commit(v: int, group: str, generation: int, member_id: str,
                  instance_id: str | None, offsets: list[tuple[str, int, int, int, str | None]]):
    """offsets: (topic, partition, offset, leader epoch, metadata)."""
    s = Shape(OFFSET_COMMIT, v)
    topics = list(dict.fromkeys(t for t, *_ in offsets))
    return s("OffsetCommitRequest", group_id=group, generation_id_or_member_epoch=generation,
             member_id=member_id, group_instance_id=instance_id, retention_time=-1,
             topics=tuple(s("OffsetCommitRequestTopic", name=topic, partitions=tuple(
                 s("OffsetCommitRequestPartition", partition_index=p, committed_offset=o,
                   committed_leader_epoch=e, committed_metadata=m)
                 for t, p, o, e, m in offsets if t == topic)) for topic in topics))


def offset_fetch(v: int, group: str, partitions: dict[str, list[int]] | None,
                 require_stable: bool = False):
    s = Shape(OFFSET_FETCH, v)
    return s("OffsetFetchRequest", group_id=group, require_stable=require_stable, topics=None
             if partitions is None else tuple(
                 s("OffsetFetchRequestTopic", name=t, partition_indexes=tuple(ps))
                 for t, ps in partitions.items()))


# -- transactions (KIP-98, KIP-664) ----------------------------------------------

def add_partitions_to_txn(v: int, transactional_id: str, producer_id: int, epoch: int,
                          partitions: list[tuple[str, int]]):
    s = Shape(ADD_PARTITIONS_TO_TXN, v)
    topics = list(dict.fromkeys(t for t, _ in partitions))
    return s("AddPartitionsToTxnRequest", v3_and_below_transactional_id=transactional_id,
             v3_and_below_producer_id=producer_id, v3_and_below_producer_epoch=epoch,
             v3_and_below_topics=tuple(
                 s("AddPartitionsToTxnTopic", name=t,
                   partitions=tuple(p for name, p in partitions if name == t)) for t in topics))


def add_offsets_to_txn(v: int, transactional_id: str, producer_id: int, epoch: int, group: str):
    return Shape(ADD_OFFSETS_TO_TXN, v)(
        "AddOffsetsToTxnRequest", transactional_id=transactional_id, producer_id=producer_id,
        producer_epoch=epoch, group_id=group)


def end_txn(v: int, transactional_id: str, producer_id: int, epoch: int, commit: bool):
    return Shape(END_TXN, v)("EndTxnRequest", transactional_id=transactional_id,
                             producer_id=producer_id, producer_epoch=epoch, committed=commit)


def txn_offset_commit(v: int, transactional_id: str, group: str, producer_id: int, epoch: int,
                      offsets: list[tuple[str, int, int]]):
    """offsets: (topic, partition, offset), from no group member (generation -1)."""
    s = Shape(TXN_OFFSET_COMMIT, v)
    topics = list(dict.fromkeys(t for t, *_ in offsets))
    return s("TxnOffsetCommitRequest", transactional_id=transactional_id, group_id=group,
             producer_id=producer_id, producer_epoch=epoch, generation_id=-1, member_id="",
             group_instance_id=None, topics=tuple(
                 s("TxnOffsetCommitRequestTopic", name=topic, partitions=tuple(
                     s("TxnOffsetCommitRequestPartition", partition_index=p,
                       committed_offset=o, committed_leader_epoch=-1, committed_metadata="")
                     for t, p, o in offsets if t == topic)) for topic in topics))


def describe_transactions(v: int, transactional_ids: list[str]):
    return Shape(DESCRIBE_TRANSACTIONS, v)("DescribeTransactionsRequest",
                                           transactional_ids=tuple(transactional_ids))


def list_transactions(v: int, states: list[str], producer_ids: list[int], duration_ms: int = -1):
    return Shape(LIST_TRANSACTIONS, v)("ListTransactionsRequest", state_filters=tuple(states),
                                       producer_id_filters=tuple(producer_ids),
                                       duration_filter=duration_ms)


def describe_producers(v: int, topic: str, partitions: list[int]):
    s = Shape(DESCRIBE_PRODUCERS, v)
    return s("DescribeProducersRequest", topics=(
        s("TopicRequest", name=topic, partition_indexes=tuple(partitions)),))
