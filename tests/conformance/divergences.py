"""Accepted divergences: where the reference broker answers otherwise than
Apache Kafka on purpose, each with its reason. Every entry is mirrored in
docs/broker.md ("Known divergences from Apache Kafka"), by name; a test
checks that the two lists are the same.

A divergence accepts one difference at one place (an API, a field path
with `*` for any list index or map key) and only when its predicate says
the two values are the expected pair, given the step that produced them.
Anything else that differs fails the comparison.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from reference_broker.config import LONG_MAX
from reference_broker.topic_configs import (
    TOPIC_CONFIGS, ConfigChange, Effect, InvalidConfig, InvalidRequest, changed,
)

MISSING = "<missing>"


@dataclass(frozen=True)
class Divergence:
    name: str
    reason: str
    api: str
    path: str           # fnmatch pattern over "a.b.c" paths
    # (reference value, kafka value, step, path, (reference answer, kafka answer))
    accepts: Callable[..., bool]

    def matches(self, api: str, path: str, ref: Any, kafka: Any, step: Any,
                answers: tuple[Any, Any] = (None, None)) -> bool:
        return (self.api == api and fnmatchcase(path, self.path)
                and bool(self.accepts(ref, kafka, step, path, answers)))


DIVERGENCES: list[Divergence] = []
REASONS: dict[str, str] = {}


def divergence(name: str, reason: str, *places: tuple[str, str, Callable]) -> None:
    REASONS[name] = reason
    for api, path, accepts in places:
        DIVERGENCES.append(Divergence(name, reason, api, path, accepts))


def names() -> list[str]:
    return list(REASONS)


def lookup(answer: Any, path: str) -> Any:
    """The value at `path` in a normalised answer (map keys may hold dots:
    the longest key that fits is taken)."""
    if path == "":
        return answer
    if isinstance(answer, dict):
        for key in sorted(answer, key=lambda k: len(str(k)), reverse=True):
            k = str(key)
            if path == k or path.startswith(k + "."):
                return lookup(answer[key], path[len(k) + 1:])
        return MISSING
    if isinstance(answer, list):
        head, _, rest = path.partition(".")
        return lookup(answer[int(head)], rest) if head.isdigit() and int(head) < len(answer) \
            else MISSING
    return MISSING


def sibling(answer: Any, path: str, field: str) -> Any:
    return lookup(answer, path.rsplit(".", 1)[0] + "." + field)


# -- topic configs ---------------------------------------------------------

# Topic configs Kafka 4 has and 3.7 had not (KIP-390 compression levels,
# KIP-950/KIP-1057 tiered-storage switches, KIP-1191's dead-letter queue,
# max.decompressed.message.bytes), and 3.7's that 4.0 removed (KIP-724
# message.format.version and down-conversion, KIP-937's deprecated
# message.timestamp.difference.max.ms).
KAFKA_4_ONLY = {"compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
                "remote.copy.lag.bytes", "remote.copy.lag.ms", "remote.log.copy.disable",
                "remote.log.delete.on.disable", "errors.deadletterqueue.group.enable",
                "max.decompressed.message.bytes"}
KAFKA_3_ONLY = {"message.format.version", "message.downconversion.enable",
                "message.timestamp.difference.max.ms"}


def _restricted_refusal(changes: list[tuple[str, int, str | None]]) -> bool:
    """Whether the reference broker refuses these changes (from no
    overrides) for one of its documented restrictions: a RESTRICTED key
    with a value it does not honour."""
    for name, operation, value in changes:
        key = TOPIC_CONFIGS.get(name)
        if key is None or key.effect is not Effect.RESTRICTED:
            continue
        try:
            changed({}, [ConfigChange(name, operation, value)])
        except InvalidConfig as e:
            if key.refusal in str(e):
                return True
        except InvalidRequest:
            continue
    return False


def _configs_of(step, path: str) -> list[tuple[str, int, str | None]]:
    """The (key, operation, value) a CreateTopics or IncrementalAlterConfigs
    step sent for the topic or resource its answer at `path` is about."""
    if type(step).__name__ == "CreateTopics":
        topic = path[len("topics."):path.rindex(".")]       # names may hold dots
        spec = next((t for t in step.topics if topic.endswith("-" + t.name)), None)
        return [(k, 0, v) for k, v in spec.configs] if spec else []
    index = int(path.split(".")[1])
    return list(step.resources[index][2]) if index < len(step.resources) else []


LATER_CHECKS = ("none", "unknown_topic_or_partition", "invalid_partitions",
                "invalid_replication_factor", "invalid_replica_assignment", "invalid_request")


def _kafka_4_refusal(configs: list[tuple[str, int, str | None]]) -> bool:
    """Whether Kafka 4 refuses these configs where 3.7 took them: a key it
    removed, or segment.bytes below its new minimum of 1 MiB (3.7: 14)."""
    for name, operation, value in configs:
        if name in KAFKA_3_ONLY and operation != 1:
            return True
        if name == "segment.bytes" and operation == 0 and value is not None:
            try:
                if 14 <= int(value.strip()) < 1048576:
                    return True
            except ValueError:
                pass
    return False


def _refused_by_design(ref, kafka, step, path, *_) -> bool:
    """One broker refuses a config (INVALID_CONFIG) the other takes: the
    reference broker one it restricts or one only Kafka 4 has; Kafka 4 one
    only 3.7 had, or a value only 3.7 allowed. Configs are checked before
    the topic is looked up (alter) or placed (create) on both, so the
    other broker answers NONE or whatever it finds next."""
    configs = _configs_of(step, path)
    keys = {k for k, _, _ in configs}
    if path.endswith("error_message"):
        ref_refused, kafka_refused = ref == "<text>", kafka == "<text>"
        if ref_refused == kafka_refused:
            return False
    else:
        ref_refused, kafka_refused = ref == "invalid_config", kafka == "invalid_config"
        other = kafka if ref_refused else ref
        if ref_refused == kafka_refused or other not in LATER_CHECKS:
            return False
    if ref_refused:
        return _restricted_refusal(configs) or bool(keys & KAFKA_4_ONLY)
    return _kafka_4_refusal(configs)


divergence(
    "restricted-topic-configs",
    "a topic config this broker does not implement (compaction, retention, recompression, "
    "LogAppendTime, timestamp limits, tiered storage) is accepted only with the value that "
    "describes what it does anyway; other values are INVALID_CONFIG, never accepted and "
    "ignored (docs/broker-topic-configs.md)",
    ("CreateTopics", "topics.*.error_code", _refused_by_design),
    ("CreateTopics", "topics.*.error_message", _refused_by_design),
    ("IncrementalAlterConfigs", "responses.*.error_code", _refused_by_design),
    ("IncrementalAlterConfigs", "responses.*.error_message", _refused_by_design),
)


def _key_of(path: str) -> str:
    """The config name in a DescribeConfigs path results.N.configs.<name>[...]:
    names have dots, so it is matched against the known names."""
    rest = path.split(".configs.", 1)[1]
    for name in sorted(set(TOPIC_CONFIGS) | KAFKA_4_ONLY, key=len, reverse=True):
        if rest == name or rest.startswith(name + "."):
            return name
    return rest


divergence(
    "kafka-3.7-topic-configs",
    "the topic config table is Kafka 3.7's LogConfig (tests/reference_broker/"
    "test_topic_configs.py), which 3.x clients may still set: Kafka 4 removed "
    "message.format.version, message.downconversion.enable and "
    "message.timestamp.difference.max.ms, added compression levels, tiered-storage "
    "switches, errors.deadletterqueue.group.enable and max.decompressed.message.bytes, and "
    "raised segment.bytes' minimum from 14 bytes to 1 MiB",
    ("CreateTopics", "topics.*.error_code", _refused_by_design),
    ("CreateTopics", "topics.*.error_message", _refused_by_design),
    ("IncrementalAlterConfigs", "responses.*.error_code", _refused_by_design),
    ("IncrementalAlterConfigs", "responses.*.error_message", _refused_by_design),
    ("DescribeConfigs", "results.*.configs.*",
     lambda ref, kafka, step, path, *_: (ref == MISSING and _key_of(path) in KAFKA_4_ONLY) or
     (kafka == MISSING and _key_of(path) in KAFKA_3_ONLY)),
)

divergence(
    "message-timestamp-after-max-ms-default",
    "Kafka 4.0 made message.timestamp.after.max.ms default to one hour (KIP-937); this "
    "broker does not check timestamps, so its value is the 3.7 default, no limit",
    ("DescribeConfigs", "results.*.configs.message.timestamp.after.max.ms.value",
     lambda ref, kafka, step, path, *_: (ref, kafka) == (str(LONG_MAX), "3600000")),
    ("DescribeConfigs", "results.*.configs.message.timestamp.after.max.ms.synonyms.*.value",
     lambda ref, kafka, step, path, *_: (ref, kafka) == (str(LONG_MAX), "3600000")),
)

MIN_ISR_CLUSTER_DEFAULT = {"name": "min.insync.replicas", "value": "1", "source": 3}


def _deletes_cluster_min_isr(step, path: str) -> bool:
    kind, name, changes = step.resources[int(path.split(".")[1])]
    return kind == 4 and ("min.insync.replicas", 1) in [(k, op) for k, op, _ in changes]


def _without_cluster_default(ref, kafka, step, path, *_) -> bool:
    return isinstance(kafka, list) and MIN_ISR_CLUSTER_DEFAULT in kafka and \
        [s for s in kafka if s != MIN_ISR_CLUSTER_DEFAULT] == ref


divergence(
    "min-insync-replicas-cluster-default",
    "Kafka 4's storage format writes min.insync.replicas=1 as a cluster-level dynamic "
    "default (KIP-966, for eligible leader replicas), so a topic without its own value "
    "shows source DYNAMIC_DEFAULT_BROKER_CONFIG and one more synonym; this broker has no "
    "dynamic configs and shows the default (the value is the same)",
    ("DescribeConfigs", "results.*.configs.min.insync.replicas.config_source",
     lambda ref, kafka, step, path, *_: (ref, kafka) == (5, 3)),
    ("DescribeConfigs", "results.*.configs.min.insync.replicas.synonyms",
     _without_cluster_default),
    # ... which Kafka refuses to delete while eligible leader replicas are on
    ("IncrementalAlterConfigs", "responses.*.error_code",
     lambda ref, kafka, step, path, *_: (ref, kafka) == ("none", "invalid_config")
     and _deletes_cluster_min_isr(step, path)),
    ("IncrementalAlterConfigs", "responses.*.error_message",
     lambda ref, kafka, step, path, *_: (ref, kafka) == (None, "<text>")
     and _deletes_cluster_min_isr(step, path)),
)


def _broker_resource(step, path: str) -> bool:
    index = int(path.split(".")[1])
    return index < len(step.resources) and step.resources[index][0] == 4


def _broker_alter_refused(ref, kafka, step, path, *_) -> bool:
    """An IncrementalAlterConfigs of this broker's resource that Kafka would
    take (or refuse only for its value), refused here because broker
    settings are static; settings Kafka cannot change dynamically either
    are answered as Kafka answers them."""
    index = int(path.split(".")[1])
    kind, _, changes = step.resources[index]
    if kind != 4:
        return False
    from reference_broker.protocol.incremental_alter_configs import KAFKA_DYNAMIC
    from reference_broker.config import SETTINGS
    dynamic = [k for k, op, _ in changes if op != 1 and (k in KAFKA_DYNAMIC or k not in SETTINGS)]
    return bool(dynamic) and (ref, kafka) in (
        ("invalid_config", "none"), ("invalid_config", "invalid_request"), ("<text>", None))


divergence(
    "static-broker-configs",
    "broker settings are read at start only (no dynamic broker configs, KIP-226): a BROKER "
    "resource's entries are read-only here, and those Kafka sets at storage format "
    "(min.insync.replicas, KIP-966) show as defaults",
    ("DescribeConfigs", "results.*.configs.*.read_only",
     lambda ref, kafka, step, path, *_: _broker_resource(step, path)
     and (ref, kafka) == (True, False)),
    ("DescribeConfigs", "results.*.configs.min.insync.replicas.config_source",
     lambda ref, kafka, step, path, *_: _broker_resource(step, path) and (ref, kafka) == (5, 3)),
    ("DescribeConfigs", "results.*.configs.min.insync.replicas.synonyms",
     lambda ref, kafka, step, path, *_: _broker_resource(step, path) and
     _without_cluster_default(ref, kafka, step, path)),
    ("IncrementalAlterConfigs", "responses.*.error_code", _broker_alter_refused),
    ("IncrementalAlterConfigs", "responses.*.error_message", _broker_alter_refused),
)

divergence(
    "unknown-alter-operation",
    "an IncrementalAlterConfigs operation other than SET, DELETE, APPEND and SUBTRACT is "
    "INVALID_REQUEST here, before the other changes are looked at; Kafka 4.4 fails on it "
    "inside (UNKNOWN_SERVER_ERROR, no message) when it reaches it in its own order",
    ("IncrementalAlterConfigs", "responses.*.error_code",
     lambda ref, kafka, step, path, *_: ref == "invalid_request" or kafka == "unknown_server_error"
     and any(op not in (0, 1, 2, 3) for _, op, _ in
             step.resources[int(path.split(".")[1])][2])),
    ("IncrementalAlterConfigs", "responses.*.error_message",
     lambda ref, kafka, step, path, *_: (ref == "<text>" or kafka is None)
     and any(op not in (0, 1, 2, 3) for _, op, _ in
             step.resources[int(path.split(".")[1])][2])),
)


def _offsets_topic(step, path: str) -> bool:
    index = int(path.split(".")[1])
    return index < len(step.resources) and step.resources[index][1] == "!__consumer_offsets"


divergence(
    "offsets-topic-configs",
    "__consumer_offsets is created without Kafka's overrides (cleanup.policy=compact, "
    "segment.bytes=offsets.topic.segment.bytes, compression.type=producer): this broker "
    "never compacts, so it cannot say compact, and keeps the broker's defaults for the rest",
    *(("DescribeConfigs", f"results.*.configs.{key}.*",
       lambda ref, kafka, step, path, *_: _offsets_topic(step, path))
      for key in ("cleanup.policy", "segment.bytes", "compression.type")),
)


UNIMPLEMENTED_RESOURCES = {8: "BROKER_LOGGER", 16: "CLIENT_METRICS", 32: "GROUP"}


def _unimplemented_resource(step, path: str) -> bool:
    index = int(path.split(".")[1])
    return index < len(step.resources) and step.resources[index][0] in UNIMPLEMENTED_RESOURCES


divergence(
    "unimplemented-config-resources",
    "config resources of types BROKER_LOGGER (KIP-412), CLIENT_METRICS (KIP-714) and GROUP "
    "(KIP-848) are not implemented: DescribeConfigs and IncrementalAlterConfigs answer them "
    "INVALID_REQUEST",
    ("DescribeConfigs", "results.*.error_code",
     lambda ref, kafka, step, path, *_: ref == "invalid_request" and
     _unimplemented_resource(step, path)),
    ("DescribeConfigs", "results.*.error_message",
     lambda ref, kafka, step, path, *_: ref == "<text>" and _unimplemented_resource(step, path)),
    ("DescribeConfigs", "results.*.configs.*",
     lambda ref, kafka, step, path, *_: ref == MISSING and _unimplemented_resource(step, path)),
    ("IncrementalAlterConfigs", "responses.*.error_code",
     lambda ref, kafka, step, path, *_: ref == "invalid_request" and
     _unimplemented_resource(step, path)),
    ("IncrementalAlterConfigs", "responses.*.error_message",
     lambda ref, kafka, step, path, *_: ref == "<text>" and _unimplemented_resource(step, path)),
)


# -- records -----------------------------------------------------------------

divergence(
    "offset-out-of-range-tells-offsets",
    "a Fetch answered OFFSET_OUT_OF_RANGE tells the partition's high watermark, last stable "
    "and log start offset here, which the reference broker's own tests pin "
    "(tests/reference_broker/protocol/test_fetch.py); Kafka answers -1 for each "
    "(UnifiedLog.UnknownOffset), as it does for every other partition error, which this "
    "broker now does too",
    *(("Fetch", f"responses.*.{field}",
       lambda ref, kafka, step, path, answers: kafka == -1 and isinstance(ref, int) and ref >= 0
       and sibling(answers[0], path, "error_code") == "offset_out_of_range"
       and sibling(answers[1], path, "error_code") == "offset_out_of_range")
      for field in ("high_watermark", "last_stable_offset", "log_start_offset")),
)


# -- transactions --------------------------------------------------------------

def _aborted_beyond_read(ref, kafka, step, path, answers) -> bool:
    """Kafka's list is this broker's plus aborted transactions that begin at
    or after the last stable offset, where the read stopped."""
    field = ".aborted_transactions"
    base = path[:path.index(field) + len(field)]
    ours, theirs = lookup(answers[0], base), lookup(answers[1], base)
    lso = lookup(answers[0], base[:-len(field)] + ".last_stable_offset")
    if not (isinstance(ours, list) and isinstance(theirs, list) and isinstance(lso, int)) or \
            lso != lookup(answers[1], base[:-len(field)] + ".last_stable_offset"):
        return False
    return ours == [a for a in theirs if a["first_offset"] < lso]


divergence(
    "aborted-transactions-beyond-read",
    "a read_committed Fetch lists the aborted transactions that overlap what it read, up to "
    "the last stable offset; Kafka's bound is its segment's offset index "
    "(LogSegment.fetchUpperBoundOffset), which for a segment without index entries past "
    "the read is the log end, so it also lists transactions that begin after the records it "
    "returns, which no reader uses",
    ("Fetch", "responses.*.aborted_transactions*", _aborted_beyond_read),
)
