"""Produce: append each partition's batches as they arrived.

acks=0 gets no response at all, and an error closes the connection (the
only way Kafka can tell such a producer, KafkaApis.handleProduceRequest).
acks=1 answers after the leader's append; acks=all is refused before the
append while the ISR is below min.insync.replicas, and otherwise answers
once the high watermark passes every partition's batch, or at the request
timeout (DelayedProduce): REQUEST_TIMED_OUT, or
NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR shrank below the minimum.
A transactional batch that would open a transaction on its partition is
first verified with the transaction coordinator (KIP-890 part 1,
transaction.partition.verification.enable; txn/verification.py).
"""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

from kio.schema.errors import ErrorCode

from reference_broker.log.batch import CorruptRecordError, parse_batches
from reference_broker.protocol.shapes import Shapes
from reference_broker.txn.verification_state import UNVERIFIED


log = logging.getLogger("reference_broker.produce")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


# ReplicaManager's custom exceptions for a transaction verification's
# refusals (hasCustomErrorMessage: their text goes to the client).
_VERIFICATION_MESSAGES = {
    ErrorCode.invalid_txn_state: "Partition was not added to the transaction",
    ErrorCode.not_enough_replicas: "Unable to verify the partition has been added to the "
                                   "transaction",
}


class CloseConnection(Exception):
    """acks=0 produce failed: Kafka closes the connection instead of answering."""


async def handle(broker, header, request):
    shape = Shapes(request)
    if request.transactional_id is None and _has_transactional_batch(request):
        # KafkaApis.handleProduceRequest: a transactional batch needs the
        # request's transactional id (authorized for WRITE), else the whole
        # request is TRANSACTIONAL_ID_AUTHORIZATION_FAILED before anything
        # else (and no transaction is opened that no coordinator knows).
        if request.acks == 0:
            raise CloseConnection("acks=0 produce failed: transactional batch, no id")
        error = ErrorCode.transactional_id_authorization_failed
        return shape("ProduceResponse", responses=tuple(
            shape("TopicProduceResponse", name=topic.name, partition_responses=tuple(
                shape("PartitionProduceResponse", index=data.index, error_code=error,
                      base_offset=-1, log_start_offset=-1, record_errors=(),
                      log_append_time=None, error_message=None)
                for data in topic.partition_data))
            for topic in request.topic_data))
    verified = await _verify(broker, request)
    # A partition no verification of this request covers is UNVERIFIED:
    # its batch may only continue a transaction still open at the append.
    uncovered = UNVERIFIED if _verifies(broker, request) else None
    # Per partition, in KafkaApis.handleProduceRequest's order: a partition
    # the metadata does not have, then the request-level record checks
    # (ProduceRequest.validateRecords: exactly one batch), then invalid acks
    # (ReplicaManager.appendRecords refuses them all before any append,
    # so they win over NOT_LEADER_OR_FOLLOWER too).
    invalid_acks = request.acks not in (0, 1, -1)
    results = []    # (topic, index, partition, ProduceResult-like fields)
    for topic in request.topic_data:
        for data in topic.partition_data:
            partition = broker.partition(topic.name, data.index)
            missing = broker.missing_partition_error(topic.name, data.index) \
                if partition is None else None
            if missing == ErrorCode.unknown_topic_or_partition:
                error = missing
            elif _not_one_batch(data.records):
                error = ErrorCode.invalid_record
            elif invalid_acks:
                error = ErrorCode.invalid_required_acks
            else:
                error = missing
            guard = verified.get((topic.name, data.index), uncovered)
            message = None
            if error is None and isinstance(guard, ErrorCode):
                error = guard
                message = _VERIFICATION_MESSAGES.get(error)
            if error is not None:
                results.append([topic.name, data.index, None, error, -1, -1, -1, -1, message])
            else:
                # max.message.bytes: the topic's, else message.max.bytes.
                max_batch = broker.topic_settings.values(topic.name)["max.message.bytes"]
                r = partition.append(data.records or b"", max_batch, request.acks, guard)
                if r.message:
                    log.debug("%s-%d: %s: %s", topic.name, data.index, r.error.name, r.message)
                results.append([topic.name, data.index, partition, r.error, r.base_offset,
                                r.log_start_offset, r.log_append_time, r.last_offset, None])
    if request.acks == -1:
        timeout_s = request.timeout.total_seconds()
        waiting = [(result, result[2].wait_replicated(result[7], timeout_s))
                   for result in results if result[3] == ErrorCode.none]
        verdicts = await asyncio.gather(*(w for _, w in waiting))
        for (result, _), verdict in zip(waiting, verdicts):
            result[3] = verdict
    failed = any(result[3] != ErrorCode.none for result in results)
    # error_message: Kafka sets one only for a RecordValidationException
    # (LogValidator's per-record errors, hasCustomErrorMessage), which
    # none of this broker's refusals is (the reason goes to the debug log),
    # and for a verification's refusal (_VERIFICATION_MESSAGES).
    # log_append_time: -1 (CreateTime topics only), except that a duplicate
    # tells its cached batch's max timestamp, as Kafka's does.
    responses = []
    for name in dict.fromkeys(result[0] for result in results):
        responses.append(shape("TopicProduceResponse", name=name, partition_responses=tuple(
            shape("PartitionProduceResponse", index=index, error_code=error,
                  base_offset=base, log_start_offset=start, record_errors=(),
                  log_append_time=None if append_time < 0
                  else _EPOCH + timedelta(milliseconds=append_time), error_message=message)
            for topic, index, _, error, base, start, append_time, _, message in results
            if topic == name)))
    if request.acks == 0:
        if failed:
            raise CloseConnection("acks=0 produce failed")
        return None
    return shape("ProduceResponse", responses=tuple(responses))


def _not_one_batch(records: bytes | None) -> bool:
    """ProduceRequest.validateRecords: a v3+ produce carries exactly one
    batch per partition. Bytes that do not even frame as batches are left
    to the log's checks (CORRUPT_MESSAGE)."""
    try:
        return len(parse_batches(records or b"", verify_crc=False)) != 1
    except CorruptRecordError:
        return False


def _open_at_epoch(partition, header) -> bool:
    """Whether the batch's producer has a transaction open here at the
    batch's epoch (UnifiedLog.hasOngoingTransaction(producerId, epoch) in
    Kafka 4: a batch of another epoch is verified, so a fenced producer's
    is refused by its coordinator, without the log's offsets; seen by
    tests/conformance/)."""
    entry = partition.producers.producers.get(header.producer_id)
    return partition.txns.is_open(header.producer_id) and entry is not None \
        and entry.epoch == header.producer_epoch


def _has_transactional_batch(request) -> bool:
    """RequestUtils.hasTransactionalRecords (bytes that do not frame as
    batches are left to the log's checks)."""
    for topic in request.topic_data:
        for data in topic.partition_data:
            try:
                headers = parse_batches(data.records or b"", verify_crc=False)
            except CorruptRecordError:
                continue
            if any(h.is_transactional for h in headers):
                return True
    return False


def _verifies(broker, request) -> bool:
    """transaction.partition.verification.enable, for a transactional request."""
    return request.transactional_id is not None \
        and broker.config["transaction.partition.verification.enable"]


async def _verify(broker, request) -> dict[tuple[str, int], object]:
    """Per partition whose batch opens a transaction: the verification's
    guard, or the Produce error the coordinator's answer became."""
    if not _verifies(broker, request):
        return {}
    guards, producer = {}, None
    for topic in request.topic_data:
        for data in topic.partition_data:
            partition = broker.partition(topic.name, data.index)
            try:
                headers = parse_batches(data.records or b"", verify_crc=False)
            except CorruptRecordError:
                continue    # the append refuses it
            if partition is None or not partition.is_leader or len(headers) != 1:
                continue
            header = headers[0]
            if header.is_transactional and header.has_producer_id \
                    and not _open_at_epoch(partition, header):
                producer = (header.producer_id, header.producer_epoch)
                guards[(topic.name, data.index)] = partition.begin_verification(
                    header.producer_id, header.base_sequence, header.producer_epoch)
    if not guards:
        return {}
    errors = await broker.verifier.verify(request.transactional_id, *producer, list(guards))
    return {key: errors[key] or guards[key] for key in guards}
