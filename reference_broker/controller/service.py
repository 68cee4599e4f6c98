"""The controller as a running service: the single `Controller`, its
metadata log on disk, the clock that fences silent brokers, and the long
poll through which brokers follow the log.

One idea, KRaft's QuorumController event loop (KIP-631) reduced to one
node: every decision is written to `metadata.log` and fsynced before anyone
is answered, and a restarted controller replays that file into a new
`Controller`. Brokers reach the service in-process (a combined
`broker,controller` node) or over the wire (`protocol/controller_apis.py`);
both call the same coroutines below, so `ControllerLink` implementations
are interchangeable.
"""

from __future__ import annotations

import asyncio
import logging
import os
import uuid
from pathlib import Path

from kio.schema.errors import ErrorCode

from reference_broker.config import BrokerConfig
from reference_broker.controller.new_topic import NewTopic
from reference_broker.controller.quorum import Controller
from reference_broker.controller.records import (
    CorruptMetadataRecord, MetadataRecord, PartitionState, decode, encode,
)
from reference_broker.topic_configs import ConfigChange
from reference_broker.topic_names import colliding_topic, topic_name_error

log = logging.getLogger("reference_broker.controller")

METADATA_TOPIC = "__cluster_metadata"   # the log's name on the wire (Fetch)


class MetadataLogFile:
    """`metadata.log`: one encoded record per line, appended and fsynced per
    decision. A crash can only tear the last line; it is cut on open (the
    decision it held was never answered). A bad line anywhere else is a
    corrupt log and stops the controller with its line number."""

    def __init__(self, path: Path):
        self.path = path

    def read(self) -> list[MetadataRecord]:
        if not self.path.exists():
            return []
        data = self.path.read_bytes()
        lines = data.split(b"\n")
        complete, torn = lines[:-1], lines[-1]
        if torn:
            log.warning("%s: cutting a torn last record of %d bytes", self.path, len(torn))
            with open(self.path, "r+b") as f:
                f.truncate(len(data) - len(torn))
        records = []
        for number, line in enumerate(complete, 1):
            try:
                records.append(decode(line))
            except CorruptMetadataRecord as e:
                raise CorruptMetadataRecord(f"{self.path}, line {number}: {e}") from None
        return records

    def append(self, records: list[MetadataRecord]) -> None:
        if not records:
            return
        with open(self.path, "ab") as f:
            f.write(b"".join(encode(r) + b"\n" for r in records))
            f.flush()
            os.fsync(f.fileno())


class ControllerService:
    def __init__(self, config: BrokerConfig):
        self.config = config
        self.node_id = config.node_id
        self.settings = config.settings
        self.file = MetadataLogFile(Path(config.data_dir) / "metadata.log")
        self.controller: Controller | None = None
        self._grown = asyncio.Event()
        self._tasks: list[asyncio.Task] = []

    # -- lifecycle -------------------------------------------------------

    def open(self) -> None:
        self.file.path.parent.mkdir(parents=True, exist_ok=True)
        records = self.file.read()
        self.controller = Controller(
            records,
            session_timeout_ms=self.settings["broker.session.timeout.ms"],
            unclean_leader_election=self.settings["unclean.leader.election.enable"],
            default_replication_factor=self.settings["default.replication.factor"],
            default_partitions=self.settings["num.partitions"])
        self._commit(self.controller.create_cluster(uuid.uuid4().hex[:22]))
        log.info("controller %d open: %d metadata records, cluster %s", self.node_id,
                 len(records), self.controller.image.cluster_id)

    def start(self) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._expire_loop()))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _expire_loop(self) -> None:
        # Kafka re-checks sessions on a timer of its own; an eighth of the
        # timeout fences a silent broker at most 12% late.
        interval = max(0.05, self.settings["broker.session.timeout.ms"] / 8000)
        while True:
            await asyncio.sleep(interval)
            records = self.controller.expire()
            if records:
                fenced = [r.broker_id for r in records if type(r).__name__ == "FenceBroker"]
                log.warning("fenced broker(s) %s: no heartbeat for %d ms", fenced,
                            self.settings["broker.session.timeout.ms"])
                self._commit(records)

    def _commit(self, records: list[MetadataRecord]) -> None:
        """Durable before anyone is answered; then wake the followers."""
        if records:
            self.file.append(records)
            self._grown.set()
            self._grown = asyncio.Event()

    @property
    def end_offset(self) -> int:
        return self.controller.image.offset

    @property
    def cluster_id(self) -> str:
        return self.controller.image.cluster_id

    # -- what brokers ask (ControllerLink) -------------------------------

    async def register(self, broker_id: int, host: str, port: int) -> int:
        records, epoch = self.controller.register(broker_id, host, port)
        self._commit(records)
        log.info("broker %d registered at %s:%d, broker epoch %d", broker_id, host, port, epoch)
        return epoch

    async def heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                        metadata_offset: int) -> tuple[ErrorCode, bool]:
        """(error, fenced?). Caught up means the broker's image holds its own
        RegisterBroker record, at offset `broker_epoch`."""
        error, records, fenced = self.controller.heartbeat(
            broker_id, broker_epoch, want_fence=want_fence,
            caught_up=metadata_offset > broker_epoch)
        self._commit(records)
        return error, fenced

    async def alter_partition(self, broker_id: int, broker_epoch: int, topic: str,
                              partition: int, leader_epoch: int, partition_epoch: int,
                              new_isr: tuple[int, ...]
                              ) -> tuple[ErrorCode, PartitionState | None]:
        error, state, records = self.controller.alter_partition(
            broker_id, broker_epoch, topic, partition, leader_epoch, partition_epoch, new_isr)
        self._commit(records)
        if records and state is not None:       # the state after the change
            log.info("%s-%d: ISR now %s (partition epoch %d), asked by broker %d", topic,
                     partition, state.isr, state.partition_epoch, broker_id)
        return error, state

    async def create_topics(self, topics: list[NewTopic], validate_only: bool
                            ) -> list[tuple[ErrorCode, str | None]]:
        """(error, message) per topic, in order. Names are checked against
        the topics that existed before the request, as Kafka's
        validateNewTopicNames does (two colliding names in one request are
        both created, as there)."""
        results = []
        existing = set(self.controller.image.topics)
        for topic in topics:
            problem = topic_name_error(topic.name)
            colliding = colliding_topic(topic.name, existing)
            if problem is None and colliding is not None:
                problem = f"Topic '{topic.name}' collides with existing topic: {colliding}"
            if problem:
                results.append((ErrorCode.invalid_topic_exception, problem))
                continue
            error, message, records = self.controller.create_topic(
                topic.name, topic.num_partitions, topic.replication_factor,
                assignments=topic.assignments, configs=topic.configs,
                validate_only=validate_only)
            self._commit(records)
            if records:
                placement = {r.partition: r.replicas for r in records
                             if isinstance(r, PartitionState)}
                log.info("created topic %s: replicas %s, configs %s", topic.name, placement,
                         self.controller.image.topics[topic.name].configs)
            results.append((error, message))
        return results

    async def alter_topic_configs(self, name: str, changes: list[ConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        error, message, records = self.controller.alter_topic_configs(
            name, changes, validate_only=validate_only)
        self._commit(records)
        if records:
            log.info("topic %s: configs now %s", name, self.controller.image.topics[name].configs)
        return error, message

    async def delete_topics(self, names: list[str]) -> list[ErrorCode]:
        results = []
        for name in names:
            error, records = self.controller.delete_topic(name)
            self._commit(records)
            results.append(error)
        return results

    async def read_log(self, offset: int, max_wait_s: float) -> list[MetadataRecord]:
        """The records from `offset`, waiting up to `max_wait_s` for some."""
        if offset > self.end_offset:
            raise ValueError(f"metadata offset {offset} is past the log end {self.end_offset}")
        if offset == self.end_offset and max_wait_s > 0:
            try:
                await asyncio.wait_for(self._grown.wait(), max_wait_s)
            except asyncio.TimeoutError:
                pass
        return self.controller.records_since(offset)
