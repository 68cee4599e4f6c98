"""The metadata controller: the records that make up the metadata log, the
image they build, and the controller that decides them (KRaft-shaped,
KIP-500/KIP-631).

`Controller` (quorum.py) is the single controller; its docstring lists every
call and result. `MetadataQuorum` is the interface the broker programs
against, so a Raft quorum can replace the single controller. Brokers follow
the log with `records_since` and apply it to their own `MetadataImage`.
"""

from __future__ import annotations

from reference_broker.controller.image import (
    BrokerInfo, InconsistentMetadataRecord, MetadataImage, TopicInfo)
from reference_broker.controller.partition_change import NO_LEADER
from reference_broker.controller.quorum import Controller, MetadataQuorum
from reference_broker.controller.records import (
    CorruptMetadataRecord, CreateTopic, DeleteTopic, FenceBroker, MetadataRecord, PartitionState,
    RegisterBroker, SetTopicConfig, UnfenceBroker, decode, encode)

__all__ = [
    "BrokerInfo", "Controller", "CorruptMetadataRecord", "CreateTopic", "DeleteTopic",
    "FenceBroker", "InconsistentMetadataRecord", "MetadataImage", "MetadataQuorum",
    "MetadataRecord", "NO_LEADER", "PartitionState", "RegisterBroker", "SetTopicConfig",
    "TopicInfo", "UnfenceBroker", "decode", "encode",
]
