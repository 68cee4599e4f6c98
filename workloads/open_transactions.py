"""Who holds a partition's last stable offset: asked when the final phase's
wait ends with a last stable offset still below its high watermark
(workloads/final.py), so that a `stuck-lso` names its transaction.

KIP-664's introspection, asked as `kafka-transactions.sh find-hanging`
asks it: DescribeProducers to each partition's leader names every producer
with a transaction open there and the offset it began at; ListTransactions,
filtered by those producer ids, gives their transactional ids, and
DescribeTransactions their coordinators' side — state and partitions. A
transaction the leader holds open while its coordinator has it complete,
or without that partition, is a hanging one (KIP-890's motivation);
one the coordinator has Ongoing was never aborted (its timeout sweep did
not run, or could not write).

kafka-python's admin client asks, whatever library the run drives: the
others have no DescribeProducers. What it finds is context for the
report, not history the checkers judge; a question that fails is
recorded as its error, and nothing here fails the run.
"""

from __future__ import annotations

from workloads.clients import ClientSettings
from workloads.clients.kafka_python import bounded_config, common_config


def open_transactions(bootstrap: str, settings: ClientSettings,
                      partitions: list[tuple[str, int]], timeout: float) -> list[dict]:
    """One entry per transaction the partitions' leaders hold open:
    {"topic", "partition", "producer_id", "producer_epoch", "first_offset",
    "transactional_id", "coordinator"} where `coordinator` is
    {"state", "producer_epoch", "partitions": ["t-p", ...]} or None if no
    coordinator lists the producer; or one {"error": ...} entry."""
    from kafka import TopicPartition
    from kafka.admin import KafkaAdminClient

    config = bounded_config(common_config(bootstrap, settings, "kchaos-open-transactions"),
                            timeout)
    try:
        admin = KafkaAdminClient(**config)
    except Exception as e:  # noqa: BLE001 — context only: say what failed
        return [{"error": f"admin client: {type(e).__name__}: {e}"}]
    try:
        return _ask(admin, [TopicPartition(t, p) for t, p in partitions])
    except Exception as e:  # noqa: BLE001
        return [{"error": f"{type(e).__name__}: {e}"}]
    finally:
        admin.close()


def _ask(admin, partitions) -> list[dict]:
    held = []
    for tp, state in sorted(admin.describe_producers(partitions).items()):
        held += [{"topic": tp.topic, "partition": tp.partition,
                  "producer_id": p.producer_id, "producer_epoch": p.producer_epoch,
                  "first_offset": p.current_transaction_start_offset}
                 for p in state.active_producers if p.current_transaction_start_offset >= 0]
    if not held:
        return []
    listed = admin.list_transactions(
        producer_id_filters=sorted({h["producer_id"] for h in held}))
    ids = {t.producer_id: t.transactional_id for ts in listed.values() for t in ts}
    described = admin.describe_transactions(sorted(set(ids.values()))) if ids else {}
    for entry in held:
        entry["transactional_id"] = ids.get(entry["producer_id"])
        txn = described.get(entry["transactional_id"])
        entry["coordinator"] = None if txn is None else {
            "state": txn.state.value, "producer_epoch": txn.producer_epoch,
            "partitions": sorted(f"{tp.topic}-{tp.partition}" for tp in txn.topic_partitions)}
    return held
