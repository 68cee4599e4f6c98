"""A topic to create — what CreateTopics asks — and the replicas each of
its partitions gets: Kafka's StripedReplicaPlacer, or the manual
assignment the request gives, checked as ReplicationControlManager.createTopic
checks it.

Pure: the caller passes the registered and the unfenced brokers.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode


@dataclass(frozen=True)
class NewTopic:
    """One CreatableTopic: -1 partitions or replication factor means the
    broker's default (KIP-464); `assignments` are (partition, replicas)
    pairs and `configs` (name, value) pairs, as the request lists them."""
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: tuple[tuple[int, tuple[int, ...]], ...] = ()
    configs: tuple[tuple[str, str | None], ...] = ()


class Refused(Exception):
    """Why a topic cannot be created: the error code and message Kafka answers."""

    def __init__(self, error: ErrorCode, message: str):
        super().__init__(message)
        self.error = error
        self.message = message


def striped_replicas(partitions: int, replication_factor: int, unfenced: list[int],
                     fenced: list[int], start: int) -> dict[int, tuple[int, ...]]:
    """StripedReplicaPlacer without racks or randomness: partition p takes
    the unfenced brokers, then the fenced ones, each list sorted and rotated
    by p plus `start` (the partitions that exist already, so leaders stripe
    across topics too). The first replica, always unfenced, leads."""
    # StripedReplicaPlacer.place: "All brokers are currently fenced", and
    # "cannot be reached because only N broker(s) are registered".
    if replication_factor > len(unfenced) + len(fenced):
        raise Refused(ErrorCode.invalid_replication_factor,
                      f"Unable to replicate the partition {replication_factor} time(s): the "
                      f"replication factor is more than the {len(unfenced) + len(fenced)} "
                      "registered broker(s).")
    if not unfenced:
        raise Refused(ErrorCode.invalid_replication_factor,
                      "Unable to replicate the partition: all brokers are currently fenced.")
    unfenced, fenced = sorted(unfenced), sorted(fenced)
    return {index: tuple((_rotated(unfenced, start + index)
                          + _rotated(fenced, start + index))[:replication_factor])
            for index in range(partitions)}


def manual_replicas(topic: NewTopic, registered: set[int], is_active) -> dict[int, tuple[int, ...]]:
    """The request's own assignment, refused as Kafka refuses it: with a
    partition count or replication factor other than -1 (INVALID_REQUEST);
    with a partition given twice, an empty or duplicated replica list, an
    unregistered broker, replica lists of different lengths, no active
    replica in a partition, or partitions that are not 0..n-1
    (INVALID_REPLICA_ASSIGNMENT; validateManualPartitionAssignment)."""
    if topic.replication_factor != -1:
        raise Refused(ErrorCode.invalid_request, "A manual partition assignment was specified, "
                      "but replication factor was not set to -1.")
    if topic.num_partitions != -1:
        raise Refused(ErrorCode.invalid_request, "A manual partition assignment was specified, "
                      "but numPartitions was not set to -1.")
    bad = ErrorCode.invalid_replica_assignment
    placement: dict[int, tuple[int, ...]] = {}
    for index, replicas in topic.assignments:
        if index in placement:
            raise Refused(bad, f"Found multiple manual partition assignments for partition {index}")
        if not replicas:
            raise Refused(bad, "The manual partition assignment includes an empty replica list.")
        for broker in sorted(replicas):
            if broker not in registered:
                raise Refused(bad, f"The manual partition assignment includes broker {broker}, "
                              "but no such broker is registered.")
        if len(set(replicas)) != len(replicas):
            twice = next(b for b in replicas if replicas.count(b) > 1)
            raise Refused(bad, f"The manual partition assignment includes the broker {twice} "
                          "more than once.")
        if placement and len(replicas) != len(next(iter(placement.values()))):
            raise Refused(bad, f"The manual partition assignment includes a partition with "
                          f"{len(replicas)} replica(s), but this is not consistent with previous "
                          f"partitions, which have {len(next(iter(placement.values())))} "
                          "replica(s).")
        if not any(is_active(broker) for broker in replicas):
            raise Refused(bad, "All brokers specified in the manual partition assignment for "
                          f"partition {index} are fenced or in controlled shutdown.")
        placement[index] = tuple(replicas)
    if set(placement) != set(range(len(placement))):
        raise Refused(bad, "partitions should be a consecutive 0-based integer sequence")
    return placement


def _rotated(brokers: list[int], by: int) -> list[int]:
    if not brokers:
        return []
    by %= len(brokers)
    return brokers[by:] + brokers[:by]
