"""AddPartitionsToTxn: v0-v3 from a producer, adding partitions to its
transaction; v4 from a partition leader, batched, asking only whether
partitions are in their transactions (KIP-890 part 1, VerifyOnly).

Every partition gets the transaction's one answer (Kafka answers
OPERATION_NOT_ATTEMPTED only beside partitions refused by authorization,
which this broker does not have)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol import producer_fenced
from reference_broker.protocol.shapes import Shapes

BATCHED_VERSION = 4


async def handle(broker, header, request):
    shape = Shapes(request)
    coordinator = broker.transactions
    if request.__version__ < BATCHED_VERSION:
        partitions = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
        error = await coordinator.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, partitions)
        error = producer_fenced.for_version(error, request.__version__, 2)
        return shape("AddPartitionsToTxnResponse",
                     results_by_topic_v3_and_below=_by_topic(shape, {p: error for p in partitions}))
    results = []
    for txn in request.transactions:
        partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            answers = coordinator.verify(txn.transactional_id, txn.producer_id,
                                         txn.producer_epoch, partitions)
        else:
            error = await coordinator.add_partitions(txn.transactional_id, txn.producer_id,
                                                     txn.producer_epoch, partitions)
            answers = {p: error for p in partitions}
        results.append(shape("AddPartitionsToTxnResult", transactional_id=txn.transactional_id,
                             topic_results=_by_topic(shape, answers)))
    return shape("AddPartitionsToTxnResponse", error_code=ErrorCode.none,
                 results_by_transaction=tuple(results))


def _by_topic(shape, answers):
    topics: dict[str, list] = {}
    for (topic, index), error in answers.items():
        topics.setdefault(topic, []).append(shape(
            "AddPartitionsToTxnPartitionResult", partition_index=index,
            partition_error_code=error))
    return tuple(shape("AddPartitionsToTxnTopicResult", name=name,
                       results_by_partition=tuple(results))
                 for name, results in topics.items())
