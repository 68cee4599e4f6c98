"""DeleteTopics: drop topics and their logs."""

from __future__ import annotations

from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    return shape("DeleteTopicsResponse", responses=tuple(
        shape("DeletableTopicResult", name=name, error_code=broker.delete_topic(name))
        for name in request.topic_names))
