"""KIP-890 part 1 on the partition leader's side: before a producer's
first transactional batch opens a transaction on a partition, ask the
transaction coordinator whether the partition is in that producer's
ongoing transaction (AddPartitionsToTxn v4, VerifyOnly; Kafka's
AddPartitionsToTxnManager). A late batch of a transaction already
aborted is then refused instead of opening a transaction nobody will end.

Coordinator answers become Produce errors as AddPartitionsToTxnManager
maps them for the clients we drive (Produce below v12): an unreachable or
busy coordinator is NOT_ENOUGH_REPLICAS, which producers retry; a fenced
producer INVALID_PRODUCER_EPOCH; a partition not in the transaction
INVALID_TXN_STATE ("for backward compatibility with clients", as
TRANSACTION_ABORTABLE is KIP-890's).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.add_partitions_to_txn.v4 import request as apt_v4
from kio.schema.errors import ErrorCode
from kio.schema.types import ProducerId, TopicName, TransactionalId
from kio.static.primitive import i16, i32

from reference_broker.peer import PeerError, Peers
from reference_broker.txn.metadata import Partition, by_topic

if TYPE_CHECKING:
    from reference_broker.internal_topic import InternalTopic
    from reference_broker.txn.coordinator import TransactionCoordinator

_TIMEOUT_S = 30.0
_RETRIABLE = {ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available,
              ErrorCode.not_coordinator, ErrorCode.concurrent_transactions}
_TO_PRODUCE = {ErrorCode.producer_fenced: ErrorCode.invalid_producer_epoch,
               ErrorCode.transaction_abortable: ErrorCode.invalid_txn_state}


def produce_error(error: ErrorCode) -> ErrorCode:
    if error in _RETRIABLE:
        return ErrorCode.not_enough_replicas
    return _TO_PRODUCE.get(error, error)


class Verifier:
    def __init__(self, topic: InternalTopic, coordinator: TransactionCoordinator, node_id: int):
        self._topic = topic
        self._coordinator = coordinator
        self._node_id = node_id
        self._peers = Peers(f"txn-verification-{node_id}")

    async def verify(self, transactional_id: str, producer_id: int, producer_epoch: int,
                     partitions: list[Partition]) -> dict[Partition, ErrorCode]:
        """Each partition's Produce error: none if it is in the transaction."""
        leader = self._topic.leader(self._coordinator.partition_of(transactional_id))
        if leader is None:
            return dict.fromkeys(partitions, ErrorCode.not_enough_replicas)
        if leader.broker_id == self._node_id:
            answers = self._coordinator.verify(transactional_id, producer_id, producer_epoch,
                                               partitions)
        else:
            answers = await self._ask(leader, transactional_id, producer_id, producer_epoch,
                                      partitions)
        return {p: produce_error(answers.get(p, ErrorCode.not_coordinator)) for p in partitions}

    async def _ask(self, leader, transactional_id, producer_id, producer_epoch, partitions):
        topics = by_topic(partitions)
        request = apt_v4.AddPartitionsToTxnRequest(transactions=(
            apt_v4.AddPartitionsToTxnTransaction(
                transactional_id=TransactionalId(transactional_id),
                producer_id=ProducerId(producer_id), producer_epoch=i16(producer_epoch),
                verify_only=True, topics=tuple(
                    apt_v4.AddPartitionsToTxnTopic(name=TopicName(t),
                                                   partitions=tuple(i32(i) for i in indexes))
                    for t, indexes in topics.items())),))
        try:
            response = await self._peers.to(leader.broker_id, leader.host, leader.port).request(
                request, _TIMEOUT_S)
        except PeerError:
            return {}
        if response.error_code:
            return dict.fromkeys(partitions, response.error_code)
        return {(topic.name, p.partition_index): p.partition_error_code
                for result in response.results_by_transaction
                for topic in result.topic_results for p in topic.results_by_partition}

    def close(self) -> None:
        self._peers.close()
