"""The controller: every metadata decision, turned into records.

One idea, KRaft's (KIP-500, KIP-631): the controller owns a log of change
records and decides by appending to it — broker registration and fencing,
leader election, ISR changes, topic creation and topic configs — and
everybody else learns the cluster's state by following that log
(`records_since`). Each decision method appends its records to the log
and applies them to `image` before it returns them, so the next decision
sees them; the caller persists the records it is given, and
`Controller(persisted records)` resumes after a restart.

`MetadataQuorum` is what the rest of the broker may call. Today one node's
`Controller` implements it and every append is committed at once; a Raft
quorum of controllers (KIP-595) can implement it later, committing on a
majority. Heartbeat times are soft state, never in the log: like Kafka's
BrokerHeartbeatManager, a new (or restarted) controller starts every
registered broker's session afresh.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from typing import Protocol

from kio.schema.errors import ErrorCode

from reference_broker.controller.image import MetadataImage
from reference_broker.controller.new_topic import (
    NewTopic, Refused, manual_replicas, striped_replicas,
)
from reference_broker.controller.partition_change import NO_LEADER, change_partition
from reference_broker.controller.records import (
    CreateCluster, CreateTopic, DeleteTopic, FenceBroker, MetadataRecord, PartitionState,
    RegisterBroker, SetTopicConfig, UnfenceBroker,
)
from reference_broker.topic_configs import (
    ConfigChange, InvalidConfig, InvalidRequest, changed, validate, value_of,
)


class MetadataQuorum(Protocol):
    """The controller's operations, whatever implements them."""

    def create_cluster(self, cluster_id: str) -> list[MetadataRecord]: ...

    def register(self, broker_id: int, host: str, port: int
                 ) -> tuple[list[MetadataRecord], int]: ...

    def heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                  caught_up: bool) -> tuple[ErrorCode, list[MetadataRecord], bool]: ...

    def expire(self) -> list[MetadataRecord]: ...

    def create_topic(self, name: str, partitions: int, replication_factor: int, *,
                     assignments: Iterable[tuple[int, tuple[int, ...]]] = (),
                     configs: Iterable[tuple[str, str | None]] = (),
                     validate_only: bool = False
                     ) -> tuple[ErrorCode, str | None, list[MetadataRecord]]: ...

    def alter_topic_configs(self, name: str, changes: Iterable[ConfigChange], *,
                            validate_only: bool = False
                            ) -> tuple[ErrorCode, str | None, list[MetadataRecord]]: ...

    def delete_topic(self, name: str) -> tuple[ErrorCode, list[MetadataRecord]]: ...

    def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                        leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                        ) -> tuple[ErrorCode, PartitionState | None, list[MetadataRecord]]: ...

    def records_since(self, offset: int) -> list[MetadataRecord]: ...


class Controller:
    """The single controller.

    Results, per call:
      register        -> (records, broker epoch)
      heartbeat       -> (NONE | STALE_BROKER_EPOCH, records, fenced?)
      expire          -> records (fencing of every broker whose session timed out)
      create_topic    -> (NONE | TOPIC_ALREADY_EXISTS | INVALID_CONFIG | INVALID_PARTITIONS
                          | INVALID_REPLICATION_FACTOR | INVALID_REQUEST
                          | INVALID_REPLICA_ASSIGNMENT, message, records)
      alter_topic_configs -> (NONE | UNKNOWN_TOPIC_OR_PARTITION | INVALID_REQUEST
                          | INVALID_CONFIG, message, records)
      delete_topic    -> (NONE | UNKNOWN_TOPIC_OR_PARTITION, records)
      alter_partition -> (error, the partition's state when NONE, records); errors
                         in alter_partition's docstring
    """

    def __init__(self, records: Iterable[MetadataRecord] = (), *,
                 session_timeout_ms: int = 9000,
                 unclean_leader_election: bool = False,
                 default_replication_factor: int = 1,
                 default_partitions: int = 1,
                 clock: Callable[[], float] = time.monotonic):
        self.session_timeout_ms = session_timeout_ms      # broker.session.timeout.ms
        self.unclean_leader_election = unclean_leader_election
        self.default_replication_factor = default_replication_factor   # KIP-464
        self.default_partitions = default_partitions                   # num.partitions
        self._clock = clock
        self.image = MetadataImage()
        self._log: list[MetadataRecord] = []
        for record in records:
            self._append(record)
        # ClusterControlManager.activate(): every registered broker gets a
        # fresh session, so a controller restart fences nobody at once.
        now = clock()
        self._last_contact = {broker_id: now for broker_id in self.image.brokers}

    # -- the log ---------------------------------------------------------

    def records_since(self, offset: int) -> list[MetadataRecord]:
        """The records at `offset` and after: what a broker whose image has
        applied `offset` records applies next."""
        if not 0 <= offset <= len(self._log):
            raise ValueError(f"records_since({offset}): offset must be between 0 and the "
                             f"log end offset {len(self._log)}")
        return self._log[offset:]

    def _append(self, record: MetadataRecord) -> MetadataRecord:
        self.image.apply(record)
        self._log.append(record)
        return record

    def create_cluster(self, cluster_id: str) -> list[MetadataRecord]:
        """Name a new cluster: the first record of an empty log; nothing if
        the log already names one."""
        if self.image.cluster_id is not None:
            return []
        return [self._append(CreateCluster(cluster_id))]

    # -- brokers ---------------------------------------------------------

    def register(self, broker_id: int, host: str, port: int) -> tuple[list[MetadataRecord], int]:
        """Register a broker (again, after a restart); it starts fenced.

        Kafka refuses a new incarnation with DUPLICATE_BROKER_REGISTRATION
        while the old one's session is alive, and accepts it once the session
        has expired and the old incarnation was fenced
        (ClusterControlManager.registerBroker). We have no incarnation ids
        and take every registration as a new incarnation, so we fence an
        unfenced old one first: the same records Kafka ends with, without
        waiting out the session. A restarted broker may have lost unflushed
        data, so it must not stay leader or in an ISR on the old epoch.
        """
        records = []
        old = self.image.brokers.get(broker_id)
        if old is not None and not old.fenced:
            records += self._fence(broker_id)
        epoch = self.image.offset
        records.append(self._append(RegisterBroker(broker_id, host, port, epoch)))
        self._last_contact[broker_id] = self._clock()
        return records, epoch

    def heartbeat(self, broker_id: int, broker_epoch: int, *, want_fence: bool,
                  caught_up: bool) -> tuple[ErrorCode, list[MetadataRecord], bool]:
        """A broker's heartbeat: keeps its session and moves it between
        fenced and unfenced (BrokerHeartbeatManager.calculateNextBrokerState).

        `caught_up` is Kafka's `currentMetadataOffset >= registerBrokerRecordOffset`:
        the broker's image has applied its own RegisterBroker record, i.e.
        `image.offset > broker_epoch`. A fenced broker that is caught up and
        does not want to be fenced is unfenced; an unfenced one that asks to
        be fenced is. A broker epoch other than the current registration's
        answers STALE_BROKER_EPOCH (ClusterControlManager.checkBrokerEpoch):
        that broker must register again.
        """
        broker = self.image.brokers.get(broker_id)
        if broker is None or broker.epoch != broker_epoch:
            return ErrorCode.stale_broker_epoch, [], True
        self._last_contact[broker_id] = self._clock()
        records: list[MetadataRecord] = []
        if broker.fenced and not want_fence and caught_up:
            records = self._unfence(broker_id)
        elif not broker.fenced and want_fence:
            records = self._fence(broker_id)
        return ErrorCode.none, records, self.image.brokers[broker_id].fenced

    def expire(self) -> list[MetadataRecord]:
        """Fence every unfenced broker not heard from for longer than
        broker.session.timeout.ms (BrokerHeartbeatTracker.isExpired:
        `last contact + timeout < now`). Kafka fences one stale broker per
        event "so that the effect of fencing each broker is visible to the
        system prior to processing the next one"; each fencing here sees the
        previous one's records, to the same effect."""
        now = self._clock()
        records: list[MetadataRecord] = []
        for broker_id in sorted(self.image.brokers):
            silent_ms = (now - self._last_contact[broker_id]) * 1000
            if not self.image.brokers[broker_id].fenced and silent_ms > self.session_timeout_ms:
                records += self._fence(broker_id)
        return records

    def _fence(self, broker_id: int) -> list[MetadataRecord]:
        """ReplicationControlManager.handleBrokerFenced: remove the broker
        from every ISR it is in (never emptying one) and elect new leaders
        where it led, with the broker itself unacceptable as leader; then
        the FenceBroker record."""
        def acceptable(replica: int) -> bool:
            return replica != broker_id and self.image.is_active(replica)

        records = []
        for state in self.image.partitions():
            if broker_id in state.isr:
                target_isr = tuple(r for r in state.isr if r != broker_id)
                records += self._change(state, target_isr, acceptable)
        records.append(self._append(FenceBroker(broker_id)))
        return records

    def _unfence(self, broker_id: int) -> list[MetadataRecord]:
        """ReplicationControlManager.handleBrokerUnfenced: the UnfenceBroker
        record, then an election for every partition without a leader — an
        ISR member that is back, or (unclean) any replica that is."""
        records = [self._append(UnfenceBroker(broker_id))]
        for state in self.image.partitions():
            if state.leader == NO_LEADER:
                records += self._change(state, state.isr, self.image.is_active)
        return records

    def _change(self, state: PartitionState, target_isr: tuple[int, ...],
                acceptable: Callable[[int], bool]) -> list[MetadataRecord]:
        changed = change_partition(state, target_isr, acceptable,
                                   unclean=self._unclean(state.topic))
        return [] if changed is None else [self._append(changed)]

    # -- topics ----------------------------------------------------------

    def create_topic(self, name: str, partitions: int, replication_factor: int, *,
                     assignments: Iterable[tuple[int, tuple[int, ...]]] = (),
                     configs: Iterable[tuple[str, str | None]] = (),
                     validate_only: bool = False
                     ) -> tuple[ErrorCode, str | None, list[MetadataRecord]]:
        """Create a topic: -1 partitions or replication factor means the
        default (KIP-464). Names are not checked here; the caller checks
        them (Kafka's Topic.validate) before asking.

        Checked in ReplicationControlManager.createTopics' order: the name is
        free, the configs are valid (topic_configs; INVALID_CONFIG), then the
        placement — the manual `assignments` (new_topic.manual_replicas) or
        Kafka's striped placement. The ISR is the unfenced replicas and the
        first of them leads (buildPartitionRegistration). The records are
        CreateTopic, the config overrides, then the partitions.
        """
        if name in self.image.topics:
            return ErrorCode.topic_already_exists, f"Topic '{name}' already exists.", []
        configs = list(configs)
        problem = validate(configs)
        if problem:
            return ErrorCode.invalid_config, problem, []
        assignments = tuple(assignments)
        try:
            placement = self._place(NewTopic(name, partitions, replication_factor,
                                             assignments))
        except Refused as refused:
            return refused.error, refused.message, []
        if validate_only:
            return ErrorCode.none, None, []
        records = [self._append(CreateTopic(name, str(uuid.uuid4())))]
        for key, value in dict(configs).items():
            records.append(self._append(SetTopicConfig(name, key, value)))
        for index, replicas in sorted(placement.items()):
            isr = tuple(r for r in replicas if self.image.is_active(r))
            records.append(self._append(PartitionState(
                name, index, replicas, isr, leader=isr[0], leader_epoch=0, partition_epoch=0)))
        return ErrorCode.none, None, records

    def _place(self, topic: NewTopic) -> dict[int, tuple[int, ...]]:
        if topic.assignments:
            return manual_replicas(topic, set(self.image.brokers), self.image.is_active)
        replication_factor = topic.replication_factor
        if replication_factor == -1:
            replication_factor = self.default_replication_factor
        partitions = self.default_partitions if topic.num_partitions == -1 \
            else topic.num_partitions
        if replication_factor <= 0:
            raise Refused(ErrorCode.invalid_replication_factor,
                          "Replication factor must be larger than 0, or -1 to use the "
                          "default value.")
        if partitions <= 0:
            raise Refused(ErrorCode.invalid_partitions,
                          "Number of partitions was set to an invalid non-positive value.")
        brokers = self.image.brokers
        return striped_replicas(partitions, replication_factor,
                                [b for b, info in brokers.items() if not info.fenced],
                                [b for b, info in brokers.items() if info.fenced],
                                start=len(self.image.partitions()))

    def alter_topic_configs(self, name: str, changes: Iterable[ConfigChange], *,
                            validate_only: bool = False
                            ) -> tuple[ErrorCode, str | None, list[MetadataRecord]]:
        """IncrementalAlterConfigs on a topic (KIP-339): the overrides after
        `changes` (topic_configs.changed: INVALID_REQUEST or INVALID_CONFIG),
        one SetTopicConfig per key whose override changes. A topic that turns
        unclean.leader.election.enable on gets an election for its leaderless
        partitions at once, as Kafka's controller does since KAFKA-12670
        rather than waiting for a broker to come back."""
        topic = self.image.topics.get(name)
        # The changes are checked before the topic is looked up (a missing
        # one as a topic without overrides), as Kafka's controller does:
        # ConfigurationControlManager computes and validates the new configs
        # first, and only a valid change learns the topic does not exist.
        try:
            wanted = changed(topic.configs if topic is not None else {}, changes)
        except InvalidRequest as e:
            return ErrorCode.invalid_request, str(e), []
        except InvalidConfig as e:
            return ErrorCode.invalid_config, str(e), []
        if topic is None:
            return ErrorCode.unknown_topic_or_partition, \
                f"The topic '{name}' does not exist.", []
        if validate_only:
            return ErrorCode.none, None, []
        was_unclean = self._unclean(name)
        differing = [key for key in sorted(set(wanted) | set(topic.configs))
                     if wanted.get(key) != topic.configs.get(key)]
        records = [self._append(SetTopicConfig(name, key, wanted.get(key))) for key in differing]
        if self._unclean(name) and not was_unclean:
            for state in self.image.partitions():
                if state.topic == name and state.leader == NO_LEADER:
                    records += self._change(state, state.isr, self.image.is_active)
        return ErrorCode.none, None, records

    def _unclean(self, topic: str) -> bool:
        """unclean.leader.election.enable for the topic: its override, else ours."""
        info = self.image.topics.get(topic)
        overrides = info.configs if info is not None else {}
        return value_of("unclean.leader.election.enable", overrides,
                        self.unclean_leader_election)

    def delete_topic(self, name: str) -> tuple[ErrorCode, list[MetadataRecord]]:
        if name not in self.image.topics:
            return ErrorCode.unknown_topic_or_partition, []
        return ErrorCode.none, [self._append(DeleteTopic(name))]

    # -- ISR changes -----------------------------------------------------

    def alter_partition(self, broker_id: int, broker_epoch: int, topic: str, partition: int,
                        leader_epoch: int, partition_epoch: int, new_isr: tuple[int, ...]
                        ) -> tuple[ErrorCode, PartitionState | None, list[MetadataRecord]]:
        """A leader's ISR change (KIP-497), checked in the order of
        ReplicationControlManager.alterPartition / validateAlterPartitionData:

          STALE_BROKER_EPOCH          the requester's broker epoch is not its current one
          UNKNOWN_TOPIC_OR_PARTITION  no such partition
          NOT_CONTROLLER              an epoch above ours: we are behind, so not the controller
          FENCED_LEADER_EPOCH         an older leader epoch: a deposed leader
          INVALID_REQUEST             the requester is not the leader
          INVALID_UPDATE_VERSION      an older partition epoch: the state changed meanwhile
          INVALID_REQUEST             an ISR with duplicates or non-replicas, or without the leader
          INELIGIBLE_REPLICA          an ISR member that is fenced or unregistered (KIP-841)

        So a deposed leader cannot shrink the ISR, and cannot advance its high
        watermark past the followers that left it (docs/broker.md). Accepted,
        the partition epoch moves and the leader and its epoch stay. An ISR
        equal to the current one changes nothing and answers NONE with the
        current state (Kafka writes no record for a no-op change).
        """
        requester = self.image.brokers.get(broker_id)
        if requester is None or requester.epoch != broker_epoch:
            return ErrorCode.stale_broker_epoch, None, []
        state = self.image.partition(topic, partition)
        if state is None:
            return ErrorCode.unknown_topic_or_partition, None, []
        if leader_epoch > state.leader_epoch or partition_epoch > state.partition_epoch:
            return ErrorCode.not_controller, None, []
        if leader_epoch < state.leader_epoch:
            return ErrorCode.fenced_leader_epoch, None, []
        if broker_id != state.leader:
            return ErrorCode.invalid_request, None, []
        if partition_epoch < state.partition_epoch:
            return ErrorCode.invalid_update_version, None, []
        new_isr = tuple(new_isr)
        # Replicas.validateIsr, then "The ISR must always include the current leader."
        if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(state.replicas) \
                or state.leader not in new_isr:
            return ErrorCode.invalid_request, None, []
        if not all(self.image.is_active(r) for r in new_isr):
            return ErrorCode.ineligible_replica, None, []
        changed = change_partition(state, new_isr, self.image.is_active,
                                   unclean=self._unclean(topic))
        if changed is None:
            return ErrorCode.none, state, []
        return ErrorCode.none, changed, [self._append(changed)]
