"""Client adapters over real Kafka clients: one interface (ProducerClient,
ConsumerClient) whose every operation returns an `Outcome` in docs/history.md's
terms — `ok`, `fail` (certainly not applied) or `info` (unknown) — with the
completion value of that operation.

    producer = make_producer("confluent-kafka", bootstrap, ClientSettings(), "p0")
    producer.send([("jt0", 1, 17)], timeout=5.0)
    # Outcome(type="ok", value={"sends": [{"topic": "jt0", "partition": 1,
    #                                      "value": 17, "offset": 42}]})

After an `info` the client's state is unknown (a record may still be
delivered, a member may still hold its partitions): close it and go on with
a new client as a new process. A consumer belongs to the group it is made
with (Kafka fixes group.id when a consumer is created); `group=None` makes an
assign-only consumer that cannot commit.
"""

from __future__ import annotations

from workloads.clients.base import (ClientSettings, ConsumerClient, Outcome,
                                    ProducerClient, TransactionalProducerClient)

LIBRARIES = ("confluent-kafka", "kafka-python", "java")
TRANSACTIONAL_LIBRARIES = ("confluent-kafka", "kafka-python", "java")
# Those whose transactions also commit a consumer's offsets (--pipeline).
PIPELINE_LIBRARIES = ("confluent-kafka",)


def _library(library: str):
    if library == "confluent-kafka":
        from workloads.clients import confluent
        return confluent.ConfluentProducer, confluent.ConfluentConsumer
    if library == "kafka-python":
        from workloads.clients import kafka_python
        return kafka_python.KafkaPythonProducer, kafka_python.KafkaPythonConsumer
    if library == "java":
        # Apache Kafka's own client, in JVMs of its own (java.py, jvm.py).
        from workloads.clients import java, java_consumer
        return java.JavaProducer, java_consumer.JavaConsumer
    raise ValueError(f"library={library!r}: not a known client library; "
                     f"use one of {', '.join(repr(name) for name in LIBRARIES)}")


def make_producer(library: str, bootstrap: str, settings: ClientSettings,
                  client_id: str) -> ProducerClient:
    producer, _ = _library(library)
    return producer(bootstrap, settings, client_id)


def make_transactional_producer(library: str, bootstrap: str, settings: ClientSettings,
                                client_id: str, transactional_id: str,
                                transaction_timeout_ms: int) -> TransactionalProducerClient:
    if library == "confluent-kafka":
        from workloads.clients import confluent_txn
        return confluent_txn.ConfluentTransactionalProducer(
            bootstrap, settings, client_id, transactional_id, transaction_timeout_ms)
    if library == "kafka-python":
        from workloads.clients import kafka_python_txn
        return kafka_python_txn.KafkaPythonTransactionalProducer(
            bootstrap, settings, client_id, transactional_id, transaction_timeout_ms)
    if library == "java":
        from workloads.clients import java_txn
        return java_txn.JavaTransactionalProducer(
            bootstrap, settings, client_id, transactional_id, transaction_timeout_ms)
    raise ValueError(f"library={library!r}: transactions are built for "
                     f"{', '.join(TRANSACTIONAL_LIBRARIES)} only")


def make_consumer(library: str, bootstrap: str, settings: ClientSettings, client_id: str,
                  group: str | None) -> ConsumerClient:
    _, consumer = _library(library)
    return consumer(bootstrap, settings, client_id, group)


__all__ = ["LIBRARIES", "PIPELINE_LIBRARIES", "TRANSACTIONAL_LIBRARIES", "ClientSettings", "ConsumerClient",
           "Outcome", "ProducerClient", "TransactionalProducerClient", "make_consumer",
           "make_producer", "make_transactional_producer"]
