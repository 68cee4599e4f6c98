"""The broker's state, below the protocol: topics, their partitions, the
group coordinator and the producer-id allocator — semantic operations that
the per-API adapters in `protocol/` call, never seeing a socket.

Topics are recorded in `topics.json` (name, id, partition count, leader
epoch); each partition's log lives in `<topic>-<partition>/` as in Kafka.
Every start is a new leadership term: the leader epoch of every partition is
bumped and persisted, as a KRaft controller bumps it when the only replica's
broker comes back (so clients holding the old epoch are fenced, KIP-320).
"""

from __future__ import annotations

import json
import logging
import re
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from kio.schema.errors import ErrorCode

from reference_broker.bugs import NO_GENERATION_FENCING
from reference_broker.config import BrokerConfig
from reference_broker.group import GroupConfig, GroupCoordinator
from reference_broker.log import LogConfig, PartitionLog
from reference_broker.log.file_io import replace_atomically
from reference_broker.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from reference_broker.partition import Partition

log = logging.getLogger("reference_broker")

# Kafka's Topic.validate: legal characters and length.
_TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

# Producer ids are handed out in blocks, persisted before use, so a restart
# never reuses one (Kafka's ProducerIdManager does the same with 1000).
_PRODUCER_ID_BLOCK = 1000


@dataclass
class Topic:
    name: str
    topic_id: str
    partitions: list[Partition]

    @property
    def internal(self) -> bool:
        return self.name == OFFSETS_TOPIC


def topic_name_error(name: str) -> str | None:
    if name in (".", ".."):
        return f"topic name {name!r} is illegal"
    if not _TOPIC_NAME.match(name or ""):
        # The message is answered in a string field of at most 32767 bytes:
        # quote no more of the name than a legal one could have.
        shown = repr(name[:249]) + ("..." if len(name) > 249 else "")
        return (f"topic name {shown} must be 1 to 249 characters of "
                "ASCII letters, digits, '.', '_' and '-'")
    return None


class Broker:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.cluster_id = None
        self.topics: dict[str, Topic] = {}
        self.data_dir = Path(config.data_dir)
        self.log_config = LogConfig(
            segment_bytes=config["log.segment.bytes"],
            index_interval_bytes=config["log.index.interval.bytes"],
            flush_messages=config["log.flush.interval.messages"],
            flush_ms=config["log.flush.interval.ms"])
        self.offsets = OffsetsTopic(self)
        self.coordinator = GroupCoordinator(self.offsets, GroupConfig(
            offsets_topic_partitions=config["offsets.topic.num.partitions"],
            group_min_session_timeout_ms=config["group.min.session.timeout.ms"],
            group_max_session_timeout_ms=config["group.max.session.timeout.ms"],
            group_initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            fence_commits=NO_GENERATION_FENCING not in config.bugs))
        self._next_producer_id = 0
        self._producer_id_limit = 0

    # -- lifecycle -------------------------------------------------------

    def open(self) -> None:
        """Recover every partition from disk and load the group state."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        meta = self._read_meta()
        self.cluster_id = meta.get("cluster_id") or uuid.uuid4().hex[:22]
        self._next_producer_id = self._producer_id_limit = meta.get("producer_id_limit", 0)
        for name, entry in meta.get("topics", {}).items():
            epoch = entry["leader_epoch"] + 1
            partitions = [self._open_partition(name, i, epoch) for i in range(entry["partitions"])]
            self.topics[name] = Topic(name, entry["id"], partitions)
        self._write_meta()
        if OFFSETS_TOPIC in self.topics:
            self.offsets.load()
        log.info("node %d open: %d topics, cluster id %s", self.node_id, len(self.topics),
                 self.cluster_id)
        if self.config.bugs:
            log.warning("bug switches on: %s", ", ".join(sorted(self.config.bugs)))

    def close(self) -> None:
        for topic in self.topics.values():
            for partition in topic.partitions:
                partition.log.close()

    def _open_partition(self, topic: str, index: int, leader_epoch: int) -> Partition:
        log_dir = self.data_dir / f"{topic}-{index}"
        partition = Partition(topic, index, PartitionLog.open(log_dir, self.log_config),
                              leader_epoch, self.config.bugs)
        # KAFKA-7415: a new leader caches (epoch, LEO) at election, so
        # OffsetForLeaderEpoch answers for the new epoch before any append.
        partition.log.assign_epoch_start_offset(leader_epoch, partition.log.log_end_offset)
        return partition

    # -- metadata --------------------------------------------------------

    def _read_meta(self) -> dict:
        path = self.data_dir / "topics.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _write_meta(self) -> None:
        meta = {
            "cluster_id": self.cluster_id,
            "producer_id_limit": self._producer_id_limit,
            "topics": {t.name: {"id": t.topic_id, "partitions": len(t.partitions),
                                "leader_epoch": t.partitions[0].leader_epoch if t.partitions
                                else 0}
                       for t in self.topics.values()},
        }
        replace_atomically(self.data_dir / "topics.json", json.dumps(meta, indent=1).encode())

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     validate_only: bool = False) -> tuple[ErrorCode, str | None]:
        if name in self.topics:
            return ErrorCode.topic_already_exists, f"topic {name!r} already exists"
        problem = topic_name_error(name)
        if problem:
            return ErrorCode.invalid_topic_exception, problem
        if partitions == -1:
            partitions = self.config["num.partitions"]
        if replication_factor == -1:
            replication_factor = self.config["default.replication.factor"]
        if partitions < 1:
            return ErrorCode.invalid_partitions, f"{partitions} partitions: must be at least 1"
        if replication_factor != 1:
            return (ErrorCode.invalid_replication_factor,
                    f"replication factor {replication_factor} > 1 live broker")
        if validate_only:
            return ErrorCode.none, None
        topic = Topic(name, str(uuid.uuid4()),
                      [self._open_partition(name, i, 0) for i in range(partitions)])
        self.topics[name] = topic
        self._write_meta()
        log.info("created topic %s with %d partitions", name, partitions)
        return ErrorCode.none, None

    def delete_topic(self, name: str) -> ErrorCode:
        topic = self.topics.get(name)
        if topic is None:
            return ErrorCode.unknown_topic_or_partition
        if topic.internal:
            return ErrorCode.topic_authorization_failed
        del self.topics[name]
        self._write_meta()
        for partition in topic.partitions:
            partition.log.close()
            shutil.rmtree(self.data_dir / f"{name}-{partition.index}", ignore_errors=True)
        log.info("deleted topic %s", name)
        return ErrorCode.none

    def topic_for_client(self, name: str, allow_auto_create: bool) -> Topic | None:
        """The topic, created on first mention when auto.create.topics.enable
        allows (Kafka's auto topic creation on Metadata)."""
        topic = self.topics.get(name)
        if topic is None and allow_auto_create and self.config["auto.create.topics.enable"] \
                and topic_name_error(name) is None and name != OFFSETS_TOPIC:
            self.create_topic(name, -1, -1)
            topic = self.topics.get(name)
        return topic

    def partition(self, topic: str, index: int) -> Partition | None:
        t = self.topics.get(topic)
        if t is None or not 0 <= index < len(t.partitions):
            return None
        return t.partitions[index]

    # -- producers -------------------------------------------------------

    def allocate_producer_id(self) -> int:
        if self._next_producer_id >= self._producer_id_limit:
            self._producer_id_limit += _PRODUCER_ID_BLOCK
            self._write_meta()
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        return producer_id
