"""CreateTopics: asked of the controller, which checks the per-topic configs
(topic_configs) and places the replicas — striped, or as the request's
manual assignment says; answered once this broker's metadata shows the new
topics. On a controller-only node `broker` is the controller service,
which answers at once."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

from reference_broker.controller.new_topic import NewTopic
from reference_broker.protocol.shapes import Shapes

# QuorumController.MAX_RECORDS_PER_USER_OP: one request may produce at most
# this many metadata records (a TopicRecord, its ConfigRecords and one
# PartitionRecord per partition); beyond it the whole request fails with
# POLICY_VIOLATION. It also keeps one request from creating millions of log
# directories.
MAX_RECORDS_PER_USER_OP = 10000


async def handle(broker, header, request):
    shape = Shapes(request)
    records = sum(1 + len(t.configs) + (
        len(t.assignments) if t.assignments
        else broker.config["num.partitions"] if t.num_partitions == -1
        else max(t.num_partitions, 0)) for t in request.topics)
    if records > MAX_RECORDS_PER_USER_OP:
        return shape("CreateTopicsResponse", topics=tuple(
            shape("CreatableTopicResult", name=topic.name,
                  error_code=ErrorCode.policy_violation,
                  error_message="Unable to perform excessively large batch operation.")
            for topic in request.topics))
    # A name given more than once is answered once, INVALID_REQUEST, and
    # none of its entries is created (ControllerApis.createTopics:
    # "Duplicate topic name.", before any other check).
    names = [t.name for t in request.topics]
    duplicates = list(dict.fromkeys(name for name in names if names.count(name) > 1))
    topics = [t for t in request.topics if t.name not in duplicates]
    answers = await broker.create_topics([
        NewTopic(t.name, t.num_partitions, t.replication_factor,
                 assignments=tuple((a.partition_index, tuple(a.broker_ids))
                                   for a in t.assignments),
                 configs=tuple((c.name, c.value) for c in t.configs))
        for t in topics], request.validate_only) if topics else []
    return shape("CreateTopicsResponse", topics=tuple(
        shape("CreatableTopicResult", name=topic.name, error_code=error, error_message=message)
        for topic, (error, message) in zip(topics, answers)) + tuple(
        shape("CreatableTopicResult", name=name, error_code=ErrorCode.invalid_request,
              error_message="Duplicate topic name.") for name in duplicates))
