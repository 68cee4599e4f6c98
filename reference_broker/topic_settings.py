"""What this broker's replicas of a topic run with: the topic configs that
take effect (topic_configs' APPLIED keys), each the topic's override or
else this broker's setting, and the LogConfig and ReplicationConfig built
from them. Cached per topic; the broker forgets a topic's entry whenever a
metadata record touches the topic, as Kafka's TopicConfigHandler rebuilds
a log's config on every config change."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reference_broker.controller.image import MetadataImage
from reference_broker.log import LogConfig
from reference_broker.partition import ReplicationConfig
from reference_broker.topic_configs import resolve


class TopicSettings:
    def __init__(self, image: MetadataImage, settings: Mapping[str, Any]):
        self.image = image
        self.settings = settings
        self._resolved: dict[str, dict[str, Any]] = {}

    def forget(self, topic: str) -> None:
        self._resolved.pop(topic, None)

    def values(self, topic: str) -> dict[str, Any]:
        """Topic config name -> the value that takes effect on `topic`."""
        resolved = self._resolved.get(topic)
        if resolved is None:
            info = self.image.topics.get(topic)
            resolved = self._resolved[topic] = resolve(info.configs if info else {},
                                                       self.settings)
        return resolved

    def log_config(self, topic: str) -> LogConfig:
        values = self.values(topic)
        return LogConfig(segment_bytes=values["segment.bytes"],
                         index_interval_bytes=values["index.interval.bytes"],
                         flush_messages=values["flush.messages"], flush_ms=values["flush.ms"])

    def replication(self, topic: str) -> ReplicationConfig:
        return ReplicationConfig(
            min_insync_replicas=self.values(topic)["min.insync.replicas"],
            replica_lag_time_max_ms=self.settings["replica.lag.time.max.ms"])
