"""CreateTopics: new topics with their partition count (replication is one
node's worth until the replication issue)."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.protocol.shapes import Shapes

# QuorumController.MAX_RECORDS_PER_USER_OP: one request may produce at most
# this many metadata records (a TopicRecord plus one PartitionRecord per
# partition); beyond it the whole request fails with POLICY_VIOLATION. It
# also keeps one request from creating millions of log directories.
MAX_RECORDS_PER_USER_OP = 10000


async def handle(broker, header, request):
    shape = Shapes(request)
    records = sum(1 + (broker.config["num.partitions"] if t.num_partitions == -1
                       else max(t.num_partitions, 0)) for t in request.topics)
    if records > MAX_RECORDS_PER_USER_OP:
        return shape("CreateTopicsResponse", topics=tuple(
            shape("CreatableTopicResult", name=topic.name,
                  error_code=ErrorCode.policy_violation,
                  error_message="Unable to perform excessively large batch operation.")
            for topic in request.topics))
    results = []
    for topic in request.topics:
        if topic.assignments:
            error, message = ErrorCode.invalid_request, "manual replica assignment is not supported"
        elif topic.configs:
            # Not accepted-and-ignored: a test must not believe a config took effect.
            error, message = ErrorCode.invalid_config, "per-topic configs are not supported"
        else:
            error, message = broker.create_topic(topic.name, topic.num_partitions,
                                                 topic.replication_factor,
                                                 request.validate_only)
        results.append(shape("CreatableTopicResult", name=topic.name, error_code=error,
                             error_message=message))
    return shape("CreateTopicsResponse", topics=tuple(results))
