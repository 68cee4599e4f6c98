"""CreateTopics: asked of the controller, which places the replicas;
answered once this broker's metadata shows the new topics. On a
controller-only node `broker` is the controller service, which answers at
once."""

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
    answers: dict[int, tuple] = {}
    asked = []
    for n, topic in enumerate(request.topics):
        if topic.assignments:
            answers[n] = (ErrorCode.invalid_request, "manual replica assignment is not supported")
        elif topic.configs:
            # Not accepted-and-ignored: a test must not believe a config took effect.
            answers[n] = (ErrorCode.invalid_config, "per-topic configs are not supported")
        else:
            asked.append(n)
    if asked:
        created = await broker.create_topics(
            [(request.topics[n].name, request.topics[n].num_partitions,
              request.topics[n].replication_factor) for n in asked], request.validate_only)
        answers.update(zip(asked, created))
    return shape("CreateTopicsResponse", topics=tuple(
        shape("CreatableTopicResult", name=topic.name, error_code=answers[n][0],
              error_message=answers[n][1])
        for n, topic in enumerate(request.topics)))
