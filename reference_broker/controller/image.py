"""The metadata image: the cluster's state after applying a prefix of the
metadata log — brokers, topics with their partitions and config overrides.

One idea, Kafka's MetadataImage/MetadataDelta: the controller and every
broker build the same image by applying the same records in the same order,
so they agree on leaders and epochs without asking each other. Applying is
strict: a record that does not fit the image (a fence for a broker never
registered, a partition of an unknown topic) means the log is corrupt, and
raises before anything changes, as Kafka's replay methods throw.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from reference_broker.controller.records import (
    CreateCluster, CreateTopic, DeleteTopic, FenceBroker, MetadataRecord, PartitionState,
    RegisterBroker, SetTopicConfig, UnfenceBroker,
)


class InconsistentMetadataRecord(ValueError):
    """A record that cannot apply to the image it was given."""


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    broker_id: int
    host: str
    port: int
    epoch: int          # offset of its latest RegisterBroker record
    fenced: bool


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: str
    partitions: dict[int, PartitionState] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)   # per-topic overrides


class MetadataImage:
    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.offset = 0     # records applied = offset of the next record

    def apply(self, record: MetadataRecord) -> None:
        match record:
            case CreateCluster(cluster_id):
                if self.cluster_id is not None:
                    raise InconsistentMetadataRecord(
                        f"offset {self.offset}: {record!r} but the cluster is {self.cluster_id!r}")
                self.cluster_id = cluster_id
            case RegisterBroker(broker_id, host, port, epoch):
                # A new registration replaces the old one and starts fenced:
                # the broker must catch up with the log before it is unfenced
                # (ClusterControlManager.replay(RegisterBrokerRecord)).
                self.brokers[broker_id] = BrokerInfo(broker_id, host, port, epoch, fenced=True)
            case FenceBroker(broker_id) | UnfenceBroker(broker_id):
                broker = self.brokers.get(broker_id)
                if broker is None:
                    raise InconsistentMetadataRecord(
                        f"offset {self.offset}: {record!r} for broker {broker_id}, "
                        "which never registered")
                self.brokers[broker_id] = replace(broker, fenced=isinstance(record, FenceBroker))
            case CreateTopic(name, topic_id):
                if name in self.topics:
                    raise InconsistentMetadataRecord(
                        f"offset {self.offset}: {record!r} but topic {name!r} exists")
                self.topics[name] = TopicInfo(name, topic_id)
            case SetTopicConfig(name, key, value):
                topic = self.topics.get(name)
                if topic is None:
                    raise InconsistentMetadataRecord(
                        f"offset {self.offset}: {record!r} for unknown topic {name!r}")
                if value is None:
                    topic.configs.pop(key, None)
                else:
                    topic.configs[key] = value
            case PartitionState(topic=name):
                topic = self.topics.get(name)
                if topic is None:
                    raise InconsistentMetadataRecord(
                        f"offset {self.offset}: {record!r} for unknown topic {name!r}")
                topic.partitions[record.partition] = record
            case DeleteTopic(name):
                if self.topics.pop(name, None) is None:
                    raise InconsistentMetadataRecord(
                        f"offset {self.offset}: {record!r} for unknown topic {name!r}")
            case _:
                raise TypeError(f"apply: {record!r} is not a metadata record")
        self.offset += 1

    def partition(self, topic: str, index: int) -> PartitionState | None:
        info = self.topics.get(topic)
        return None if info is None else info.partitions.get(index)

    def partitions(self) -> list[PartitionState]:
        """Every partition, topics in creation order, partitions by index."""
        return [info.partitions[index] for info in self.topics.values()
                for index in sorted(info.partitions)]

    def partitions_of(self, broker_id: int) -> list[PartitionState]:
        """The partitions the broker is a replica of (leader or follower)."""
        return [state for state in self.partitions() if broker_id in state.replicas]

    def is_active(self, broker_id: int) -> bool:
        """Registered and unfenced (ClusterControlManager.isActive; we have no
        controlled shutdown)."""
        broker = self.brokers.get(broker_id)
        return broker is not None and not broker.fenced
