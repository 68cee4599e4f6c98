"""The topic config table: every Kafka 3.7 topic config name is in it, each
default is valid and kept, values parse as Kafka's ConfigDef parses them,
IncrementalAlterConfigs' operations compute Kafka's results, a topic's
values resolve over the broker's settings, and docs/broker-topic-configs.md
lists every key under its effect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from reference_broker.config import LONG_MAX, parse_settings
from reference_broker.topic_configs import (
    APPEND, DELETE, SET, SUBTRACT, TOPIC_CONFIGS, ConfigChange, Effect, InvalidConfig,
    InvalidRequest, canonical_text, changed, default_text, parse, resolve, validate,
)

# LogConfig.configNames() in Kafka 3.7: what a client may send.
KAFKA_TOPIC_CONFIGS = """
cleanup.policy compression.type delete.retention.ms file.delete.delay.ms flush.messages
flush.ms follower.replication.throttled.replicas index.interval.bytes
leader.replication.throttled.replicas local.retention.bytes local.retention.ms
max.compaction.lag.ms max.message.bytes message.downconversion.enable message.format.version
message.timestamp.after.max.ms message.timestamp.before.max.ms
message.timestamp.difference.max.ms message.timestamp.type min.cleanable.dirty.ratio
min.compaction.lag.ms min.insync.replicas preallocate remote.storage.enable retention.bytes
retention.ms segment.bytes segment.index.bytes segment.jitter.ms segment.ms
unclean.leader.election.enable""".split()


def test_the_table_holds_every_kafka_topic_config_and_nothing_else():
    assert sorted(TOPIC_CONFIGS) == sorted(KAFKA_TOPIC_CONFIGS)


@pytest.mark.parametrize("name", sorted(TOPIC_CONFIGS))
def test_every_default_is_valid_and_kept(name):
    key = TOPIC_CONFIGS[name]
    text = default_text(name, parse_settings([]))
    parse(name, text)       # RESTRICTED keys honour their default: a client may send it back
    assert (key.broker_setting is not None) == (key.effect is Effect.APPLIED)
    assert (key.honoured is not None) == (key.effect is Effect.RESTRICTED) == bool(key.refusal)


@pytest.mark.parametrize("name, text, value", [
    ("min.insync.replicas", " 2 ", 2),
    ("min.insync.replicas", "+3", 3),
    ("unclean.leader.election.enable", "TRUE", True),
    ("flush.messages", str(LONG_MAX), LONG_MAX),
    ("min.cleanable.dirty.ratio", "1", 1.0),
    ("cleanup.policy", "delete, delete", ["delete", "delete"]),
    ("leader.replication.throttled.replicas", "", []),
    ("leader.replication.throttled.replicas", "*", ["*"]),
    ("retention.ms", "-1", -1),
    ("message.format.version", "3.0-IV1", "3.0-IV1"),
])
def test_values_parse_as_kafka_parses_them(name, text, value):
    assert parse(name, text) == value


@pytest.mark.parametrize("name, text, says", [
    ("min.insync.replicas", "5_000", "Not a number of type INT"),
    ("min.insync.replicas", "1e3", "Not a number of type INT"),
    ("max.message.bytes", str(2 ** 31), "Not a number of type INT"),
    ("flush.ms", str(2 ** 63), "Not a number of type LONG"),
    ("min.cleanable.dirty.ratio", "nan", "Not a number of type DOUBLE"),
    ("min.cleanable.dirty.ratio", "1.5", "Value must be no more than 1"),
    ("preallocate", "1", "either true or false"),
    ("leader.replication.throttled.replicas", "0-1", "does not match"),
    ("retention.bytes", "1000000", "only -1 (no limit) is accepted"),
    ("retention.ms", str(7 * 24 * 3600 * 1000 - 1), "at least 604800000"),
    ("remote.storage.enable", "true", "tiered storage is not implemented"),
    ("message.timestamp.after.max.ms", "3600000", "timestamps are not checked"),
    ("no.such.config", "1", "Unknown topic config name: no.such.config"),
])
def test_invalid_and_unkept_values_are_refused_naming_the_key(name, text, says):
    with pytest.raises(InvalidConfig, match="no.such.config" if "Unknown" in says else name) \
            as refused:
        parse(name, text)
    assert says in str(refused.value)


def test_validate_reports_nulls_then_names_then_values():
    assert validate([("retention.ms", None), ("x", "1"), ("segment.bytes", "0")]) == \
        "Null value not supported for topic configs: retention.ms"
    assert validate([("segment.bytes", "0"), ("x", "1")]) == "Unknown topic config name: x"
    assert "segment.bytes" in validate([("segment.bytes", "0")])
    assert validate([("segment.bytes", "1048576"), ("preallocate", "true")]) is None


def test_canonical_text_is_what_describe_shows():
    assert canonical_text("cleanup.policy", " delete ") == "delete"
    assert canonical_text("preallocate", "TRUE") == "true"
    assert canonical_text("min.insync.replicas", "+2") == "2"


def test_incremental_operations():
    throttled = "leader.replication.throttled.replicas"
    start = {"retention.ms": "-1", throttled: "0:1"}
    assert changed(start, [ConfigChange("retention.ms", DELETE, None),
                           ConfigChange(throttled, APPEND, "1:1,0:1,2:1"),
                           ConfigChange("segment.ms", SET, "1000")]) == {
        throttled: "0:1,1:1,2:1", "segment.ms": "1000"}
    assert changed(start, [ConfigChange(throttled, SUBTRACT, "0:1,9:9")]) == {
        "retention.ms": "-1", throttled: ""}
    # An unset list is edited from its default: cleanup.policy without
    # "delete" would be compaction or nothing, neither of which is kept here.
    assert changed({}, [ConfigChange("cleanup.policy", APPEND, "delete")]) == {
        "cleanup.policy": "delete"}
    with pytest.raises(InvalidConfig, match="cleanup.policy"):
        changed({}, [ConfigChange("cleanup.policy", SUBTRACT, "delete")])
    assert changed(start, [ConfigChange("no.such.key", DELETE, None)]) == start


@pytest.mark.parametrize("changes, error, says", [
    ([ConfigChange("retention.ms", SET, "-1"), ConfigChange("retention.ms", SET, "-1")],
     InvalidRequest, "duplicate config keys"),
    ([ConfigChange("retention.ms", 9, "-1")], InvalidRequest, "Unknown alter config operation 9"),
    ([ConfigChange("retention.ms", APPEND, "1")], InvalidConfig,
     "Can't APPEND to key retention.ms because its type is not LIST."),
    ([ConfigChange("no.such.key", SUBTRACT, "1")], InvalidConfig, "Can't SUBTRACT"),
    ([ConfigChange("retention.ms", SET, None)], InvalidConfig, "Null value not supported"),
])
def test_incremental_operations_kafka_refuses(changes, error, says):
    with pytest.raises(error, match=says):
        changed({}, changes)


def test_a_topic_resolves_its_applied_configs_over_the_broker_settings():
    settings = parse_settings(["min.insync.replicas=2", "log.segment.bytes=5000"])
    values = resolve({"min.insync.replicas": "3", "retention.ms": "-1"}, settings)
    assert values == {"min.insync.replicas": 3, "unclean.leader.election.enable": False,
                      "max.message.bytes": 1048588, "segment.bytes": 5000,
                      "index.interval.bytes": 4096, "flush.messages": None, "flush.ms": None}


DOCS = Path(__file__).resolve().parents[2] / "docs" / "broker-topic-configs.md"
SECTIONS = {"## Configs that take effect": Effect.APPLIED,
            "## Configs accepted only where they match the broker": Effect.RESTRICTED,
            "## Configs accepted but inert": Effect.INERT}


def test_the_docs_page_lists_every_key_under_its_effect():
    listed, section = {}, None
    for line in DOCS.read_text().splitlines():
        if line.startswith("## "):
            section = SECTIONS.get(line)
        elif section is not None and line.startswith("| `"):
            first_cell = line.split("|")[1]
            for name in re.findall(r"`([^`]+)`", first_cell):
                listed[name] = section
    assert listed == {name: key.effect for name, key in TOPIC_CONFIGS.items()}
