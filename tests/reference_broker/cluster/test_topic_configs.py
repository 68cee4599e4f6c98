"""Per-topic configs on three brokers and a controller: they reach every
broker through the metadata log, and a topic's min.insync.replicas governs
acks=all on that topic alone — with one broker stopped, the topic that
asks for three in-sync replicas refuses (NOT_ENOUGH_REPLICAS) while its
twin that asks for one, on the same replicas, accepts; lowering the
strict topic's minimum with IncrementalAlterConfigs lets it accept too."""

from __future__ import annotations

from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (
    AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic,
)

from cluster.local_cluster import LocalCluster
from tests.reference_broker.cluster.test_failover import wait_until

# Short sessions and lag time, so the stopped broker leaves the ISR within a
# second or two and the leader stops waiting for it.
SETTINGS = ["broker.session.timeout.ms=1500", "broker.heartbeat.interval.ms=200",
            "replica.lag.time.max.ms=1000", "replica.fetch.wait.max.ms=100",
            "offsets.topic.num.partitions=1"]
TIMEOUT = 10


def produce_one(bootstrap: str, topic: str):
    """One acks=all record, no retries: its delivery error code, or None."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "retries": 0,
                         "message.timeout.ms": 5000})
    outcome = []
    producer.produce(topic, b"v", partition=0,
                     on_delivery=lambda err, msg: outcome.append(err and err.code()))
    producer.flush(TIMEOUT)
    return outcome[0] if outcome else "no delivery report"


def test_a_topics_min_insync_replicas_governs_acks_all_on_that_topic(tmp_path):
    with LocalCluster(tmp_path, 3, config=SETTINGS) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        same_replicas = [[1, 2, 3]]
        futures = admin.create_topics([
            NewTopic("strict", 1, replica_assignment=same_replicas,
                     config={"min.insync.replicas": "3"}),
            NewTopic("lax", 1, replica_assignment=same_replicas,
                     config={"min.insync.replicas": "1"})], request_timeout=TIMEOUT)
        for future in futures.values():
            future.result(TIMEOUT)
        cluster.wait_ready()
        # Every broker follows the log to the same overrides.
        for node in cluster.brokers.values():
            one = AdminClient({"bootstrap.servers": node.bootstrap})
            [described] = one.describe_configs([ConfigResource("topic", "strict")]).values()
            assert described.result(TIMEOUT)["min.insync.replicas"].value == "3"
        assert produce_one(cluster.bootstrap, "strict") is None

        cluster.stop(3)
        for topic in ("strict", "lax"):
            wait_until(lambda: cluster.isr(topic) == [1, 2], f"{topic}'s ISR without 3",
                       timeout=TIMEOUT)
        assert produce_one(cluster.bootstrap, "strict") == KafkaError.NOT_ENOUGH_REPLICAS
        assert produce_one(cluster.bootstrap, "lax") is None

        lowered = ConfigResource("topic", "strict", incremental_configs=[ConfigEntry(
            "min.insync.replicas", "2", incremental_operation=AlterConfigOpType.SET)])
        [future] = admin.incremental_alter_configs([lowered]).values()
        # The admin client may first try the broker just stopped: on a
        # loaded machine (make test, load average 19) that took over 10 s.
        future.result(3 * TIMEOUT)
        assert produce_one(cluster.bootstrap, "strict") is None
