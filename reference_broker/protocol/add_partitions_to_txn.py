"""AddPartitionsToTxn: v0-v3 from a producer, adding partitions to its
transaction; v4 from a partition leader, batched, asking only whether
partitions are in their transactions (KIP-890 part 1, VerifyOnly).

Every partition gets the transaction's one answer, unless one of them
cannot be added at all — an internal topic's (TOPIC_AUTHORIZATION_FAILED:
Kafka authorizes no client to write one) or a partition the metadata does
not have (UNKNOWN_TOPIC_OR_PARTITION) — which fails the transaction's
request before the coordinator sees it, the others answered
OPERATION_NOT_ATTEMPTED (KafkaApis.handleAddPartitionsToTxnRequest; seen
by tests/conformance/). Not for a v4 verification, whose partitions are
its sender's own."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.offsets_topic import OFFSETS_TOPIC
from reference_broker.protocol import producer_fenced
from reference_broker.protocol.shapes import Shapes
from reference_broker.txn.topic import TRANSACTION_TOPIC

BATCHED_VERSION = 4
INTERNAL_TOPICS = (OFFSETS_TOPIC, TRANSACTION_TOPIC)    # Topic.isInternal


async def handle(broker, header, request):
    shape = Shapes(request)
    coordinator = broker.transactions
    if request.__version__ < BATCHED_VERSION:
        partitions = [(t.name, p) for t in request.v3_and_below_topics for p in t.partitions]
        refused = _refused(broker, partitions)
        if refused:
            return shape("AddPartitionsToTxnResponse",
                         results_by_topic_v3_and_below=_by_topic(shape, refused))
        error = await coordinator.add_partitions(
            request.v3_and_below_transactional_id, request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch, partitions)
        error = producer_fenced.for_version(error, request.__version__, 2)
        return shape("AddPartitionsToTxnResponse",
                     results_by_topic_v3_and_below=_by_topic(shape, {p: error for p in partitions}))
    results = []
    for txn in request.transactions:
        partitions = [(t.name, p) for t in txn.topics for p in t.partitions]
        # A verification names partitions its sender leads (which may not
        # be in this broker's metadata yet): not checked here.
        refused = None if txn.verify_only else _refused(broker, partitions)
        if refused:
            answers = refused
        elif txn.verify_only:
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


def _refused(broker, partitions) -> dict | None:
    """Per partition, the errors of a request that cannot be attempted, or
    None when every partition may be added."""
    errors = {p: ErrorCode.topic_authorization_failed if p[0] in INTERNAL_TOPICS
              else ErrorCode.unknown_topic_or_partition if broker.image.partition(*p) is None
              else None for p in partitions}
    if not any(errors.values()):
        return None
    return {p: error or ErrorCode.operation_not_attempted for p, error in errors.items()}


def _by_topic(shape, answers):
    topics: dict[str, list] = {}
    for (topic, index), error in answers.items():
        topics.setdefault(topic, []).append(shape(
            "AddPartitionsToTxnPartitionResult", partition_index=index,
            partition_error_code=error))
    return tuple(shape("AddPartitionsToTxnTopicResult", name=name,
                       results_by_partition=tuple(results))
                 for name, results in topics.items())
