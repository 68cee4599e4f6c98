"""The broker's state, below the protocol: the metadata image it follows,
the partition replicas it hosts and their roles, the group and transaction
coordinators and the producer ids — semantic operations that the per-API adapters in
`protocol/` call, never seeing a socket.

The broker learns the cluster only from the controller's metadata log
(KIP-500): it registers, follows the log into its `MetadataImage`, and
after every batch of records makes each local replica leader or follower
as the image says (ReplicaManager.applyDelta), running with its topic's
configs (topic_settings). Its session with the controller (registration,
heartbeats) is `broker_lifecycle`'s; it serves clients once the controller
has unfenced it (BrokerServer waits for the same). Its files beside the
logs are `data_dir`'s.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Coroutine
from pathlib import Path

from kio.schema.errors import ErrorCode

from reference_broker.broker_lifecycle import BrokerLifecycle
from reference_broker.bugs import (
    COORDINATOR_PARTIAL_LOAD, NO_GENERATION_FENCING, NO_LEADER_EPOCH_FENCING,
    TXN_OFFSETS_WRONG_COORDINATOR,
)
from reference_broker.config import BrokerConfig
from reference_broker.controller.image import MetadataImage, TopicInfo
from reference_broker.controller.new_topic import NewTopic
from reference_broker.controller.records import (
    CreateTopic, DeleteTopic, MetadataRecord, PartitionState, SetTopicConfig,
)
from reference_broker.controller_link import ControllerLink
from reference_broker.data_dir import CHECKPOINT, partition_dir, read_checkpoint, write_checkpoint
from reference_broker.group import GroupConfig, GroupCoordinator
from reference_broker.internal_topic import InternalTopic
from reference_broker.log import PartitionLog
from reference_broker.offsets_topic import OFFSETS_TOPIC, OffsetsTopic
from reference_broker.partition import Partition, now_ms
from reference_broker.peer import PeerError
from reference_broker.producer_ids import ProducerIds
from reference_broker.replica_fetcher import ReplicaFetcher
from reference_broker.replication import AlterIsr
from reference_broker.topic_configs import ConfigChange, changed
from reference_broker.topic_settings import TopicSettings
from reference_broker.txn.coordinator import TransactionCoordinator, TxnConfig
from reference_broker.txn.markers import MarkerChannel
from reference_broker.txn.topic import TRANSACTION_STATE, TRANSACTION_TOPIC
from reference_broker.txn.verification import Verifier

log = logging.getLogger("reference_broker")

# How long a client-facing topic change waits for this broker's image to
# show it before answering anyway.
_CATCH_UP_TIMEOUT_S = 5.0


class Broker:
    def __init__(self, config: BrokerConfig, link: ControllerLink):
        self.config = config
        self.node_id = config.node_id
        self.link = link
        self.data_dir = Path(config.data_dir)
        self.image = MetadataImage()
        self.lifecycle = BrokerLifecycle(config, link, self.image)
        self.partitions: dict[tuple[str, int], Partition] = {}
        self.topic_settings = TopicSettings(self.image, config.settings)
        self.offsets = OffsetsTopic(self)
        self.coordinator = GroupCoordinator(self.offsets, GroupConfig(
            offsets_topic_partitions=config["offsets.topic.num.partitions"],
            group_min_session_timeout_ms=config["group.min.session.timeout.ms"],
            group_max_session_timeout_ms=config["group.max.session.timeout.ms"],
            group_initial_rebalance_delay_ms=config["group.initial.rebalance.delay.ms"],
            fence_commits=NO_GENERATION_FENCING not in config.bugs))
        # KIP-320's client side: leader epochs in Metadata and in committed
        # offsets, so clients can name them and validate their positions.
        self.tells_leader_epochs = NO_LEADER_EPOCH_FENCING not in config.bugs
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._checkpoint: dict[tuple[str, int], int] = {}
        self._image_grew = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self.producer_ids = ProducerIds(self.data_dir, self.node_id)
        self.transaction_state = InternalTopic(self, TRANSACTION_STATE)
        self.markers = MarkerChannel(self.image, self.node_id)
        self.transactions = TransactionCoordinator(
            self.transaction_state, self.markers, self.producer_ids.allocate,
            TxnConfig.of(config))
        self.verifier = Verifier(self.transaction_state, self.transactions, self.node_id)

    @property
    def cluster_id(self) -> str | None:
        return self.image.cluster_id

    @property
    def topics(self) -> dict[str, TopicInfo]:
        return self.image.topics

    # -- lifecycle --------------------------------------------------------

    async def start(self) -> None:
        """Register, follow the metadata log, heartbeat; return once the
        controller has unfenced this broker."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self._checkpoint = read_checkpoint(self.data_dir / CHECKPOINT)
        self.producer_ids.open()
        await self.lifecycle.register()
        self._spawn(self._follow_metadata())
        self._spawn(self.lifecycle.heartbeats())
        await self.lifecycle.wait_unfenced()
        self._spawn(self._shrink_isrs())
        self._spawn(self._checkpoint_high_watermarks())
        log.info("node %d unfenced: %d partition replicas, cluster id %s", self.node_id,
                 len(self.partitions), self.cluster_id)
        if self.config.bugs:
            log.warning("bug switches on: %s", ", ".join(sorted(self.config.bugs)))

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for fetcher in self.fetchers.values():
            fetcher.close()
        await self.coordinator.close()
        await self.transactions.close()
        self.markers.close()
        self.verifier.close()
        self._write_checkpoint()
        for partition in self.partitions.values():
            partition.log.close()

    def _spawn(self, coroutine: Coroutine) -> asyncio.Task:
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _follow_metadata(self) -> None:
        while True:
            try:
                records = await self.link.read_log(self.image.offset, 1.0)
            except PeerError as e:
                log.warning("node %d: cannot follow the metadata log: %s", self.node_id, e)
                await asyncio.sleep(0.2)
                continue
            if records:
                self.apply_metadata(records)

    # -- following the metadata (ReplicaManager.applyDelta) ---------------

    def apply_metadata(self, records: list[MetadataRecord]) -> None:
        touched = set()     # topics whose configs may have changed
        for record in records:
            self.image.apply(record)
            match record:
                case DeleteTopic(name):
                    self._drop_topic(name)
                    touched.add(name)
                case CreateTopic(name=name) | SetTopicConfig(topic=name):
                    touched.add(name)
        for topic in touched:
            self.topic_settings.forget(topic)
        self._reconcile()
        self._reconfigure(touched & set(self.image.topics))
        self._image_grew.set()
        self._image_grew = asyncio.Event()

    def _reconcile(self) -> None:
        now = now_ms()
        for state in self.image.partitions_of(self.node_id):
            key = (state.topic, state.partition)
            partition = self.partitions.get(key) or self._open_partition(state)
            was_leader = partition.is_leader
            if state.leader == self.node_id:
                if not was_leader or partition.leader_epoch != state.leader_epoch:
                    partition.become_leader(state, now)
                    log.info("%s: leader in epoch %d, ISR %s", partition, state.leader_epoch,
                             state.isr)
                else:
                    partition.state = state
                    partition.isr_committed(state.isr, state.partition_epoch, now)
            elif partition.follower is None or was_leader \
                    or partition.leader_epoch != state.leader_epoch \
                    or partition.follower.leader_id != state.leader:
                partition.become_follower(state)
                log.info("%s: follower of %d in epoch %d", partition, state.leader,
                         state.leader_epoch)
            else:
                partition.state = state
            if state.topic in (OFFSETS_TOPIC, TRANSACTION_TOPIC) \
                    and was_leader != partition.is_leader:
                self._move_coordinator(partition)
        self._assign_fetchers()

    def _open_partition(self, state: PartitionState) -> Partition:
        topic, key = state.topic, (state.topic, state.partition)
        log_dir = partition_dir(self.data_dir, topic, state.partition,
                                self.image.topics[topic].topic_id)
        partition = Partition(topic, state.partition,
                              PartitionLog.open(log_dir, self.topic_settings.log_config(topic)),
                              node_id=self.node_id,
                              replication=self.topic_settings.replication(topic),
                              bugs=self.config.bugs, high_watermark=self._checkpoint.get(key, 0))
        self.partitions[key] = partition
        return partition

    def _reconfigure(self, topics: set[str]) -> None:
        """Topics whose configs changed: every local replica takes the new
        values at once (TopicConfigHandler, UnifiedLog.updateConfig), a
        leader its new min.insync.replicas too."""
        now = now_ms()
        for (topic, _), partition in self.partitions.items():
            if topic in topics:
                partition.configure(self.topic_settings.replication(topic),
                                    self.topic_settings.log_config(topic), now)

    def _drop_topic(self, name: str) -> None:
        for key in [k for k in self.partitions if k[0] == name]:
            partition = self.partitions.pop(key)
            if partition.is_leader and name == OFFSETS_TOPIC:
                self.coordinator.unload(partition.index)
            elif partition.is_leader and name == TRANSACTION_TOPIC:
                self.transactions.unload(partition.index)
            partition.resign()
            partition.log.close()
            shutil.rmtree(self.data_dir / f"{name}-{partition.index}", ignore_errors=True)
        log.info("deleted topic %s", name)

    def _move_coordinator(self, partition: Partition) -> None:
        """A coordinator follows its topic's leader: the group coordinator
        `__consumer_offsets`', the transaction coordinator
        `__transaction_state`'s. A new leader replays the partition before
        serving (COORDINATOR_LOAD_IN_PROGRESS meanwhile); a deposed one
        unloads. The transaction coordinator's epoch is the partition's
        leader epoch."""
        coordinator = self.coordinator if partition.topic == OFFSETS_TOPIC \
            else self.transactions
        if not partition.is_leader:
            coordinator.unload(partition.index)
            return
        coordinator.begin_load(partition.index)
        leader = partition.leader

        def load() -> None:
            if partition.leader is not leader:
                return      # deposed before the load ran
            if coordinator is self.transactions:
                self.transactions.load(partition.index, partition.leader_epoch,
                                       self.transaction_state.records_of(partition))
                return
            applied, pending = self.offsets.replay(
                partition, partial=COORDINATOR_PARTIAL_LOAD in self.config.bugs)
            if TXN_OFFSETS_WRONG_COORDINATOR in self.config.bugs and pending:
                log.info("bug %s: pending offsets of producers %s resolved as aborted",
                         TXN_OFFSETS_WRONG_COORDINATOR, sorted(pending))
                pending = {}
            self.coordinator.load(partition.index, applied, pending)

        asyncio.get_running_loop().call_soon(load)

    def _assign_fetchers(self) -> None:
        leaders = {p.follower.leader_id for p in self.partitions.values()
                   if p.follower is not None and p.follower.leader_id >= 0}
        for leader_id in leaders - set(self.fetchers):
            self.fetchers[leader_id] = ReplicaFetcher(self, leader_id)
        for fetcher in self.fetchers.values():
            fetcher.wake()

    # -- ISR changes (AlterPartition) -------------------------------------

    def propose(self, partition: Partition, change: AlterIsr | None) -> None:
        if change is not None:
            self._spawn(self._send_alter(partition, change))

    async def _send_alter(self, partition: Partition, change: AlterIsr) -> None:
        leader = partition.leader
        while partition.leader is leader and leader is not None and leader.pending is change:
            try:
                error, state = await self.link.alter_partition(
                    self.node_id, self.lifecycle.broker_epoch, partition.topic, partition.index,
                    change.leader_epoch, change.partition_epoch, change.new_isr)
            except PeerError as e:
                log.warning("%s: AlterPartition failed, retrying: %s", partition, e)
                await asyncio.sleep(0.2)
                continue
            if partition.leader is not leader:
                return
            if error == ErrorCode.none:
                log.info("%s: ISR now %s (partition epoch %d)", partition, state.isr,
                         state.partition_epoch)
                partition.isr_committed(state.isr, state.partition_epoch, now_ms())
            else:
                log.info("%s: AlterPartition %s refused: %s", partition, change.new_isr,
                         error.name)
                leader.on_isr_rejected(error)
            return

    async def _shrink_isrs(self) -> None:
        """Partition.maybeShrinkIsr every replica.lag.time.max.ms / 2."""
        interval = self.config["replica.lag.time.max.ms"] / 2000
        while True:
            await asyncio.sleep(interval)
            now = now_ms()
            for partition in list(self.partitions.values()):
                if partition.leader is not None:
                    self.propose(partition, partition.leader.maybe_shrink(now))

    # -- high watermark checkpoint ----------------------------------------

    async def _checkpoint_high_watermarks(self) -> None:
        interval = self.config["replica.high.watermark.checkpoint.interval.ms"] / 1000
        while True:
            await asyncio.sleep(interval)
            try:
                self._write_checkpoint()
            except OSError as e:    # a disk error: tried again next interval, not given up
                log.warning("node %d: high watermark checkpoint failed: %s", self.node_id, e)

    def _write_checkpoint(self) -> None:
        write_checkpoint(self.data_dir / CHECKPOINT,
                         {key: p.high_watermark for key, p in self.partitions.items()})

    # -- topics, for clients ----------------------------------------------

    async def create_topics(self, topics: list[NewTopic], validate_only: bool
                            ) -> list[tuple[ErrorCode, str | None]]:
        try:
            results = await self.link.create_topics(topics, validate_only)
        except PeerError as e:
            return [(ErrorCode.request_timed_out, f"controller unreachable: {e}")] * len(topics)
        await self._image_has(lambda: all(topic.name in self.image.topics
                                          for topic, (error, _) in zip(topics, results)
                                          if error == ErrorCode.none and not validate_only))
        return results

    async def alter_topic_configs(self, name: str, changes: list[ConfigChange],
                                  validate_only: bool) -> tuple[ErrorCode, str | None]:
        """IncrementalAlterConfigs, decided by the controller; answered once
        this broker's image shows the overrides it expects (so a describe
        that follows on this broker sees them), or after the catch-up timeout."""
        try:
            error, message = await self.link.alter_topic_configs(name, changes, validate_only)
        except PeerError as e:
            return ErrorCode.request_timed_out, f"controller unreachable: {e}"
        info = self.image.topics.get(name)
        if error == ErrorCode.none and not validate_only and info is not None:
            try:
                expected = changed(info.configs, changes)
            except ValueError:
                expected = None     # our image is behind the controller's
            await self._image_has(lambda: name in self.image.topics
                                  and self.image.topics[name].configs == expected)
        return error, message

    async def delete_topics(self, names: list[str]) -> list[ErrorCode]:
        internal = {name for name in names if name == OFFSETS_TOPIC}
        wanted = [name for name in names if name not in internal]
        try:
            results = dict(zip(wanted, await self.link.delete_topics(wanted))) if wanted else {}
        except PeerError:
            results = {name: ErrorCode.request_timed_out for name in wanted}
        await self._image_has(lambda: not any(name in self.image.topics for name in wanted
                                              if results[name] == ErrorCode.none))
        return [ErrorCode.topic_authorization_failed if name in internal else results[name]
                for name in names]

    async def _image_has(self, condition) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + _CATCH_UP_TIMEOUT_S
        while not condition() and loop.time() < deadline:
            try:
                await asyncio.wait_for(self._image_grew.wait(), deadline - loop.time())
            except asyncio.TimeoutError:
                return

    async def topic_for_client(self, name: str, allow_auto_create: bool) -> TopicInfo | None:
        """The topic, created on first mention when auto.create.topics.enable
        allows (Kafka's auto topic creation on Metadata)."""
        from reference_broker.topic_names import topic_name_error
        topic = self.image.topics.get(name)
        if topic is None and allow_auto_create and self.config["auto.create.topics.enable"] \
                and topic_name_error(name) is None and name != OFFSETS_TOPIC:
            await self.create_topics([NewTopic(name)], False)
            topic = self.image.topics.get(name)
        return topic

    def partition(self, topic: str, index: int) -> Partition | None:
        """This broker's replica of the partition, if it hosts one."""
        return self.partitions.get((topic, index))

    def missing_partition_error(self, topic: str, index: int) -> ErrorCode:
        """Why partition() gave None: the partition does not exist, or
        another broker hosts it."""
        if self.image.partition(topic, index) is None:
            return ErrorCode.unknown_topic_or_partition
        return ErrorCode.not_leader_or_follower

    def live_brokers(self) -> list:
        return [b for b in sorted(self.image.brokers.values(), key=lambda b: b.broker_id)
                if not b.fenced]
