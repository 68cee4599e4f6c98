"""Topic steps: CreateTopics (partitions, replication factor, manual
replica assignments, configs, validate-only), Metadata of the scenario's
topics, DescribeConfigs and IncrementalAlterConfigs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tests.conformance import requests as rq
from tests.conformance.base import Step, text
from tests.conformance.plain import drop, keyed, plain


@dataclass(frozen=True)
class TopicSpec:
    name: str                           # the scenario's name ("t0"), or "!raw name"
    partitions: int = 1
    replication_factor: int = 1
    assignment: tuple[tuple[int, tuple[int, ...]], ...] | None = None
    configs: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class CreateTopics(Step):
    topics: tuple[TopicSpec, ...]
    validate_only: bool = False
    api = "CreateTopics"

    def run(self, s) -> Any:
        v = s.v[rq.CREATE_TOPICS]
        request = rq.create_topics(v, [
            (s.topic(t.name), t.partitions, t.replication_factor,
             dict(t.assignment) if t.assignment is not None else None, list(t.configs))
            for t in self.topics], validate_only=self.validate_only)
        answer = plain(s.call(1, request))
        for spec, result in zip(self.topics, answer["topics"]):
            if result["error_code"] == "none" and not self.validate_only:
                if spec.assignment:
                    s.manual.add(s.topic(spec.name))
                s.wait_topic(s.topic(spec.name))
        return {**answer, "topics": keyed([{**t, "error_message": text(t["error_message"])}
                                           for t in answer["topics"]], "name")}


def placement(s, topic: str, partition: dict) -> dict:
    """auto-placement: where the controller put replicas, as properties."""
    p = dict(partition)
    if topic in s.manual:
        return p
    replicas = p["replica_nodes"]
    p["replica_nodes"] = {"count": len(replicas), "distinct": len(set(replicas)) == len(replicas),
                          "known_brokers": all(1 <= r <= s.size for r in replicas)}
    if replicas and p["leader_id"] == replicas[0]:
        p["leader_id"] = "<first replica>"
    if sorted(p["isr_nodes"]) == sorted(replicas):
        p["isr_nodes"] = "<the replicas>"
    return p


@dataclass(frozen=True)
class Metadata(Step):
    topics: tuple[str, ...]
    api = "Metadata"

    def run(self, s) -> Any:
        answer = plain(s.metadata([s.topic(t) for t in self.topics]))
        return normalise_metadata(s, answer)


def normalise_metadata(s, answer: dict) -> dict:
    brokers = keyed([{**b, "address": s.node_of(b["host"], b["port"])}
                     for b in answer["brokers"]], "node_id")
    brokers = {k: drop(b, "host", "port") for k, b in brokers.items()}
    controller = answer["controller_id"]
    return {
        **answer, "brokers": brokers,
        "cluster_id": "<cluster id>" if answer["cluster_id"] else answer["cluster_id"],
        "controller_id": "<a broker>" if 1 <= controller <= s.size else controller,
        "topics": {name: {**t, "partitions": {i: placement(s, name, p) for i, p in
                                              keyed(t["partitions"], "partition_index").items()}}
                   for name, t in keyed(answer["topics"], "name").items()},
    }


@dataclass(frozen=True)
class DescribeConfigs(Step):
    resources: tuple[tuple[int, str, tuple[str, ...] | None], ...]   # (type, name, keys)
    synonyms: bool = False
    api = "DescribeConfigs"

    def run(self, s) -> Any:
        request = rq.describe_configs(s.v[rq.DESCRIBE_CONFIGS], [
            (kind, s.topic(name) if kind == rq.TOPIC_RESOURCE else name,
             None if keys is None else list(keys)) for kind, name, keys in self.resources],
            synonyms=self.synonyms)
        answer = plain(s.call(1, request))
        return {**answer, "results": [
            {**r, "error_message": text(r["error_message"]),
             "configs": keyed(r["configs"], "name")} for r in answer["results"]]}


@dataclass(frozen=True)
class AlterConfigs(Step):
    """IncrementalAlterConfigs."""
    resources: tuple[tuple[int, str, tuple[tuple[str, int, str | None], ...]], ...]
    validate_only: bool = False
    api = "IncrementalAlterConfigs"

    def run(self, s) -> Any:
        request = rq.incremental_alter_configs(s.v[rq.INCREMENTAL_ALTER_CONFIGS], [
            (kind, s.topic(name) if kind == rq.TOPIC_RESOURCE else name, list(changes))
            for kind, name, changes in self.resources], validate_only=self.validate_only)
        answer = plain(s.call(1, request))
        if not self.validate_only and any(
                r["error_code"] == "none" and r["resource_type"] == rq.TOPIC_RESOURCE
                for r in answer["responses"]):
            s.metadata_barrier()
        return {**answer, "responses": [{**r, "error_message": text(r["error_message"])}
                                        for r in answer["responses"]]}
