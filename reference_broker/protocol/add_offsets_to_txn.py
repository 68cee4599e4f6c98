"""AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the
transaction, so the commit marker also lands where its offsets are
(KafkaApis.handleAddOffsetsToTxnRequest)."""

from __future__ import annotations

from reference_broker.group import partition_for
from reference_broker.offsets_topic import OFFSETS_TOPIC
from reference_broker.protocol import producer_fenced
from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    partition = (OFFSETS_TOPIC, partition_for(request.group_id,
                                              broker.config["offsets.topic.num.partitions"]))
    error = await broker.transactions.add_partitions(
        request.transactional_id, request.producer_id, request.producer_epoch, [partition])
    return shape("AddOffsetsToTxnResponse",
                 error_code=producer_fenced.for_version(error, request.__version__, 2))
