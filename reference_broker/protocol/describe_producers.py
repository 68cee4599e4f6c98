"""DescribeProducers (KIP-664): a partition leader's producers — id,
epoch, last sequence and timestamp (a transaction marker's, after one),
the coordinator epoch of the last marker, and where the producer's open
transaction starts (-1: none)."""

from __future__ import annotations

from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    topics = []
    for topic in request.topics:
        answers = []
        for index in topic.partition_indexes:
            partition = broker.partition(topic.name, index)
            error = broker.missing_partition_error(topic.name, index) if partition is None \
                else partition.leader_error()
            producers = ()
            if not error:
                txns = partition.txns
                producers = tuple(shape(
                    "ProducerState", producer_id=pid, producer_epoch=entry.epoch,
                    last_sequence=entry.last_sequence,
                    last_timestamp=entry.last_timestamp,
                    coordinator_epoch=txns.coordinator_epochs.get(pid, -1),
                    current_txn_start_offset=txns.ongoing.get(pid, -1))
                    for pid, entry in partition.producers.producers.items())
            answers.append(shape("PartitionResponse", partition_index=index, error_code=error,
                                 error_message=None, active_producers=producers))
        topics.append(shape("TopicResponse", name=topic.name, partitions=tuple(answers)))
    return shape("DescribeProducersResponse", topics=tuple(topics))
