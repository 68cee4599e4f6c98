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


async def handle(broker, header, request):
    shape = Shapes(request)
    documented = getattr(request, "include_documentation", False)   # v3+
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
        results.append(shape(
            "DescribeConfigsResult", error_code=error, error_message=message,
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
            raise _Refused(ErrorCode.unknown_topic_or_partition,
                           f"The topic '{name}' does not exist.")
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
        synonyms.append(_broker_entry(key.broker_setting, settings).synonyms[0])
    else:
        synonyms.append((key.name, fallback, DEFAULT_CONFIG))
    _, value, source = synonyms[0]
    documentation = f"{key.effect.value} here: {key.doc}" + (
        f"; {key.refusal}" if key.effect is Effect.RESTRICTED else "")
    return Entry(key.name, value, source, read_only=False, type=key.type,
                 synonyms=tuple(synonyms), documentation=documentation)
