"""DeleteTopics: asked of the controller; answered once this broker's
metadata no longer shows the topics. `__consumer_offsets` cannot be
deleted (TOPIC_AUTHORIZATION_FAILED, as Kafka answers for internal topics)."""

from __future__ import annotations

from reference_broker.protocol.shapes import Shapes


async def handle(broker, header, request):
    shape = Shapes(request)
    names = list(request.topic_names)
    errors = await broker.delete_topics(names)
    return shape("DeleteTopicsResponse", responses=tuple(
        shape("DeletableTopicResult", name=name, error_code=error)
        for name, error in zip(names, errors)))
