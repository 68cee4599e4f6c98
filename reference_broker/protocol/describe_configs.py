"""DescribeConfigs (v1–v4): what a topic runs with, and this broker's own
settings, as Kafka's ConfigHelper.describeConfigs answers.

A TOPIC resource lists every key of topic_configs' table: a key the topic
overrides has source DYNAMIC_TOPIC_CONFIG; one it does not has the broker
setting it falls back to, STATIC_BROKER_CONFIG when that setting differs
from Kafka's default (the broker does not remember whether a `--config`
merely restated the default), else DEFAULT_CONFIG. A BROKER resource named
by this broker's id lists the settings it honours, all read-only (no
dynamic broker configs here); the empty name — the cluster's dynamic
defaults — lists nothing. Errors: an illegal topic name
INVALID_TOPIC_EXCEPTION, a missing topic UNKNOWN_TOPIC_OR_PARTITION, another
broker's id or another resource type INVALID_REQUEST.
"""

from __future__ import annotations

from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from reference_broker.config import SETTINGS, kafka_text
from reference_broker.protocol.shapes import Shapes
from reference_broker.topic_configs import (
    TOPIC_CONFIGS, Effect, canonical_text, default_text,
)
from reference_broker.topic_names import topic_name_error

TOPIC, BROKER = 2, 4                # ConfigResource.Type
DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG = 1, 4, 5    # ConfigSource
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6,
                "list": 7}          # ConfigDef.Type ids (v3+)
# The broker config Kafka names as a topic config's synonym where this
# broker has no setting of its own behind the key (ServerTopicConfigSynonyms;
# listed with the key's default as DEFAULT_CONFIG). A key absent here has
# none Kafka lists: no broker config, or only ones without a default
# (retention.ms's log.retention.ms, segment.ms's log.roll.ms, ...). The last
# three are Kafka 3.7's (the keys were removed in 4.0).
KAFKA_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy", "retention.bytes": "log.retention.bytes",
    "compression.type": "compression.type",
    "message.timestamp.type": "log.message.timestamp.type",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "segment.index.bytes": "log.index.size.max.bytes", "preallocate": "log.preallocate",
    "local.retention.ms": "log.local.retention.ms",
    "local.retention.bytes": "log.local.retention.bytes",
    "message.timestamp.difference.max.ms": "log.message.timestamp.difference.max.ms",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
}
# Broker settings whose Kafka default is null (here: the value that means
# the same): at that default Kafka lists no synonym for them.
NULL_BY_DEFAULT = {"log.flush.interval.ms"}


@dataclass(frozen=True)
class Entry:
    name: str
    value: str
    source: int
    read_only: bool
    type: str
    synonyms: tuple[tuple[str, str, int], ...]     # (name, value, source), most specific first
    documentation: str | None = None


class _Refused(Exception):
    def __init__(self, error: ErrorCode, message: str):
        super().__init__(message)
        self.error, self.message = error, message


# ConfigResource.Type ids Kafka knows (TOPIC, BROKER, BROKER_LOGGER,
# CLIENT_METRICS, GROUP); a request naming any other fails as a whole
# (KafkaApis.handleDescribeConfigsRequest throws InvalidRequestException
# while sorting resources for authorization: every resource gets
# INVALID_REQUEST with the error's default message).
KNOWN_TYPES = {2, 4, 8, 16, 32}
INVALID_REQUEST_MESSAGE = (
    "This most likely occurs because of a request being malformed by the client library or "
    "the message was sent to an incompatible broker. See the broker logs for more details.")


async def handle(broker, header, request):
    shape = Shapes(request)
    documented = getattr(request, "include_documentation", False)   # v3+
    if any(r.resource_type not in KNOWN_TYPES for r in request.resources):
        return shape("DescribeConfigsResponse", results=tuple(shape(
            "DescribeConfigsResult", error_code=ErrorCode.invalid_request,
            error_message=INVALID_REQUEST_MESSAGE, resource_type=r.resource_type,
            resource_name=r.resource_name, configs=()) for r in request.resources))
    results = []
    for resource in request.resources:
        error, message, entries = ErrorCode.none, None, []
        try:
            entries = _entries(broker, resource.resource_type, resource.resource_name)
        except _Refused as refused:
            error, message = refused.error, refused.message
        wanted = resource.configuration_keys
        if wanted:      # null or empty: every key (ConfigHelper)
            entries = [entry for entry in entries if entry.name in wanted]
        # Kafka answers a resource without error with an empty message, not
        # null (ConfigHelper.describeConfigs: setErrorMessage(Errors.NONE.message)).
        results.append(shape(
            "DescribeConfigsResult", error_code=error,
            error_message="" if error == ErrorCode.none else message,
            resource_type=resource.resource_type, resource_name=resource.resource_name,
            configs=tuple(shape(
                "DescribeConfigsResourceResult", name=e.name, value=e.value,
                read_only=e.read_only, config_source=e.source, is_sensitive=False,
                synonyms=tuple(shape("DescribeConfigsSynonym", name=n, value=v, source=s)
                               for n, v, s in e.synonyms) if request.include_synonyms else (),
                config_type=CONFIG_TYPES[e.type],
                documentation=e.documentation if documented else None)
                for e in entries)))
    return shape("DescribeConfigsResponse", results=tuple(results))


def _entries(broker, resource_type: int, name: str) -> list[Entry]:
    if resource_type == TOPIC:
        problem = topic_name_error(name)
        if problem:
            raise _Refused(ErrorCode.invalid_topic_exception, problem)
        info = broker.image.topics.get(name)
        if info is None:
            # Kafka's ConfigHelper sets only the error code here: the
            # message is the schema's default, empty.
            raise _Refused(ErrorCode.unknown_topic_or_partition, "")
        return [_topic_entry(key, info.configs, broker.config.settings)
                for key in TOPIC_CONFIGS.values()]
    if resource_type == BROKER:
        if name == "":
            return []
        if name != str(broker.node_id):
            raise _Refused(ErrorCode.invalid_request, f"Unexpected broker id, expected "
                           f"{broker.node_id} or empty string, but received {name}")
        return [_broker_entry(setting, broker.config.settings) for setting in SETTINGS]
    raise _Refused(ErrorCode.invalid_request, f"Unsupported resource type: {resource_type}")


def _broker_entry(setting: str, settings) -> Entry:
    value = kafka_text(settings[setting])
    source = DEFAULT_CONFIG if settings[setting] == SETTINGS[setting].default \
        else STATIC_BROKER_CONFIG
    return Entry(setting, value, source, read_only=True, type=SETTINGS[setting].type,
                 synonyms=((setting, value, source),))


def _topic_entry(key, overrides, settings) -> Entry:
    fallback = default_text(key.name, settings)
    synonyms = []
    if key.name in overrides:
        synonyms.append((key.name, canonical_text(key.name, overrides[key.name]),
                         DYNAMIC_TOPIC_CONFIG))
    if key.broker_setting is not None:
        broker = _broker_entry(key.broker_setting, settings).synonyms[0]
        if not (key.broker_setting in NULL_BY_DEFAULT and broker[2] == DEFAULT_CONFIG):
            synonyms.append(broker)
    elif key.name in KAFKA_SYNONYMS:
        synonyms.append((KAFKA_SYNONYMS[key.name], fallback, DEFAULT_CONFIG))
    value, source = (synonyms[0][1], synonyms[0][2]) if synonyms else (fallback, DEFAULT_CONFIG)
    documentation = f"{key.effect.value} here: {key.doc}" + (
        f"; {key.refusal}" if key.effect is Effect.RESTRICTED else "")
    return Entry(key.name, value, source, read_only=False, type=key.type,
                 synonyms=tuple(synonyms), documentation=documentation)
