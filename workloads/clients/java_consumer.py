"""The Java client's consumer: KafkaConsumer for everything a group member
or an assign-mode reader does, and an Admin for a partition's end (its
ListOffsets answer carries the epoch of the leader that answered, which
KafkaConsumer.endOffsets keeps to itself). workloads/clients/java.py has
the JVM plumbing and the error table.
"""

from __future__ import annotations

import base64
import json
import threading

from history_analysis.history import schema as h
from workloads.clients.base import (FAIL, OK, ClientSettings, ConsumedEpochs, Outcome,
                                    check_group, end_at, offsets_value, partitions_value, read,
                                    rebalance)
from workloads.clients.java import (GRACE, LOCAL_TIMEOUT, MAX_POLL_RECORDS, JavaError,
                                    JvmClient, classify, common_config, jvm_outcome)
from workloads.clients.jvm import JvmGone, JvmStartError

DESERIALIZER = "org.apache.kafka.common.serialization.ByteArrayDeserializer"


class _Recorder:
    """The rebalance listener: a Python object the JVM calls back inside
    poll() and close(), on Py4J's callback threads (hence the lock); what it
    records goes out with the next poll."""

    class Java:
        implements = ["org.apache.kafka.clients.consumer.ConsumerRebalanceListener"]

    def __init__(self, group: str, sink: list[dict], lock: threading.Lock):
        self.group, self.sink, self.lock = group, sink, lock

    def _record(self, kind: str, partitions) -> None:
        # One round trip: a TopicPartition prints as "<topic>-<partition>".
        named = [tp.rsplit("-", 1) for tp in partitions.toString().strip("[]").split(", ") if tp]
        if not named:
            return  # onPartitionsAssigned follows every join, with no partitions too
        with self.lock:
            self.sink.append(rebalance(kind, self.group, sorted((t, int(p)) for t, p in named)))

    def onPartitionsAssigned(self, partitions) -> None:  # noqa: N802 — Java's names
        self._record("assigned", partitions)

    def onPartitionsRevoked(self, partitions) -> None:  # noqa: N802
        self._record("revoked", partitions)

    def onPartitionsLost(self, partitions) -> None:  # noqa: N802
        self._record("lost", partitions)


class JavaConsumer(JvmClient):
    def __init__(self, bootstrap: str, settings: ClientSettings, client_id: str,
                 group: str | None):
        config = {
            **common_config(bootstrap, settings, client_id),
            "default.api.timeout.ms": settings.default_api_timeout_ms,
            "enable.auto.commit": False,
            "auto.offset.reset": settings.auto_offset_reset,
            "isolation.level": settings.isolation_level,
            "session.timeout.ms": settings.session_timeout_ms,
            "heartbeat.interval.ms": settings.heartbeat_interval_ms,
            "max.poll.interval.ms": settings.max_poll_interval_ms,
            "fetch.max.wait.ms": settings.fetch_max_wait_ms,
            "max.poll.records": MAX_POLL_RECORDS,
            # JoinGroup/SyncGroup, the protocol the other clients speak
            # (KIP-848's ConsumerGroupHeartbeat is not every broker's).
            "group.protocol": "classic",
            "key.deserializer": DESERIALIZER, "value.deserializer": DESERIALIZER,
        }
        if group is not None:   # none: an assign-only consumer, which cannot commit
            config["group.id"] = group
        super().__init__(config)
        self._admin_config = {
            **common_config(bootstrap, settings, f"{client_id}-admin"),
            # Admin refuses one below request.timeout.ms; end_offsets bounds
            # its own wait anyway.
            "default.api.timeout.ms": max(settings.default_api_timeout_ms,
                                          settings.request_timeout_ms)}
        self._admin = None
        self._group = group
        self._api_timeout = settings.default_api_timeout_ms / 1000
        self._epochs = ConsumedEpochs()
        self._rebalances: list[dict] = []
        self._lock = threading.Lock()
        self._recorder: _Recorder | None = None
        # Java objects made once per client: each is a round trip to make.
        self._tps: dict[tuple[str, int], object] = {}
        self._durations: dict[int, object] = {}

    def _make(self, c):
        return c.KafkaConsumer(self._properties(c, self._config))

    def _tp(self, c, topic: str, partition: int):
        if (topic, partition) not in self._tps:
            self._tps[(topic, partition)] = c.TopicPartition(topic, partition)
        return self._tps[(topic, partition)]

    def _duration(self, c, seconds: float):
        ms = max(0, int(seconds * 1000))
        if ms not in self._durations:
            self._durations[ms] = c.Duration.ofMillis(ms)
        return self._durations[ms]

    def assign(self, partitions: list[tuple[str, int]], seek_to_beginning: bool) -> Outcome:
        value = h.invocation("assign", partitions=partitions_value(partitions),
                             seek_to_beginning=seek_to_beginning)

        def run(c, consumer):
            tps = [self._tp(c, t, p) for t, p in partitions]
            consumer.assign(tps)
            # Otherwise the group's committed offset, else auto.offset.reset.
            if seek_to_beginning:
                consumer.seekToBeginning(tps)
        try:
            self._run(run, LOCAL_TIMEOUT)
        except (JvmStartError, JvmGone) as e:
            return jvm_outcome(value, e)
        except JavaError as e:      # local: nothing reached a broker
            return Outcome(FAIL, value, str(e))
        return Outcome(OK, value)

    def subscribe(self, group: str, topics: list[str]) -> Outcome:
        check_group(self._group, group)
        value = h.invocation("subscribe", group=group, topics=list(topics))
        self._recorder = _Recorder(group, self._rebalances, self._lock)

        def run(c, consumer):
            self.jvm.callbacks()
            consumer.subscribe(list(topics), self._recorder)
        try:
            self._run(run, LOCAL_TIMEOUT)
        except (JvmStartError, JvmGone) as e:
            return jvm_outcome(value, e)
        except JavaError as e:
            return Outcome(FAIL, value, str(e))
        return Outcome(OK, value)

    def poll(self, timeout: float, max_records: int = MAX_POLL_RECORDS) -> Outcome:
        if max_records != MAX_POLL_RECORDS:
            raise ValueError(f"max_records={max_records!r}: the Java consumer's "
                             f"max.poll.records is fixed when it is made ({MAX_POLL_RECORDS})")

        def run(c, consumer):
            # Kafka's poll() returns as soon as there are records.
            records = consumer.poll(self._duration(c, timeout))
            if records.isEmpty():
                return []
            return json.loads(c.mapper.writeValueAsBytes(c.toList(records)))
        error: Exception | None = None
        try:
            got = self._run(run, timeout + GRACE)
        except (JvmStartError, JvmGone, JavaError) as e:
            # A poll that raised (a listener's failure, a fatal error): the
            # consumer may not go on by itself.
            got, error = [], e
        reads = []
        for record in got:
            topic, partition, offset = record["topic"], record["partition"], record["offset"]
            raw = None if record["value"] is None else base64.b64decode(record["value"])
            reads.append(read(topic, partition, offset, raw, record["leaderEpoch"]))
            self._epochs.read(topic, partition, offset, record["leaderEpoch"])
        with self._lock:
            rebalances = self._rebalances[:]
            self._rebalances.clear()
        value = h.completion("poll", reads=reads, rebalances=rebalances)
        return Outcome(OK, value) if error is None else jvm_outcome(value, error)

    def commit(self, group: str, offsets: list[tuple[str, int, int]]) -> Outcome:
        check_group(self._group, group)
        value = h.invocation("commit", group=group, offsets=offsets_value(offsets))

        def run(c, consumer):
            commits = c.HashMap()
            for t, p, o in offsets:
                # KIP-320: the epoch of the last record read, as the Java
                # consumer's own commits of its position carry.
                epoch = self._epochs.for_commit(t, p, o)
                commits.put(self._tp(c, t, p), c.OffsetAndMetadata(
                    o, c.Optional.of(epoch) if epoch >= 0 else c.Optional.empty(), ""))
            # Retriable errors are retried until the timeout, then
            # TimeoutException (REQUEST_TIMED_OUT): `info`.
            consumer.commitSync(commits, self._duration(c, self._api_timeout))
        try:
            self._run(run, self._api_timeout + GRACE)
        except (JvmStartError, JvmGone) as e:
            return jvm_outcome(value, e)
        except JavaError as e:
            return Outcome(classify(str(e)), value, str(e))
        return Outcome(OK, value)

    def committed(self, group: str, partitions: list[tuple[str, int]],
                  timeout: float) -> Outcome:
        check_group(self._group, group)
        unknown = h.completion("committed", group=group, offsets=offsets_value(
            ((t, p, None) for t, p in partitions), h.OFFSET_FOUND))

        def run(c, consumer):
            tps = [self._tp(c, t, p) for t, p in partitions]
            found = consumer.committed(c.HashSet(tps), self._duration(c, timeout))
            # A partition without a commit maps to null.
            return [(t, p, None if (at := found.get(tp)) is None else at.offset())
                    for (t, p), tp in zip(partitions, tps)]
        try:
            offsets = self._run(run, timeout + GRACE)
        except (JvmStartError, JvmGone) as e:
            return jvm_outcome(unknown, e)
        except JavaError as e:      # a read: a failure changes nothing
            return Outcome(FAIL, unknown, str(e))
        return Outcome(OK, h.completion("committed", group=group,
                                        offsets=offsets_value(offsets, h.OFFSET_FOUND)))

    def end_offsets(self, partitions: list[tuple[str, int]], timeout: float) -> Outcome:
        asked = h.invocation("end-offsets", partitions=partitions_value(partitions))

        def run(c, consumer):
            if self._admin is None:
                self._admin = c.AdminClient.create(self._properties(c, self._admin_config))
            tps = [self._tp(c, t, p) for t, p in partitions]
            latest, specs = c.OffsetSpec.latest(), c.HashMap()
            for tp in tps:
                specs.put(tp, latest)
            # ListOffsets(latest) for every partition at once: the high
            # watermark, and the epoch of the leader that answered (v4+,
            # KIP-320), which stale-end's epoch rule needs.
            answers = self._admin.listOffsets(specs).all().get(
                max(0, int(timeout * 1000)), c.MILLISECONDS)
            return [(t, p, answer.offset(), answer.leaderEpoch().orElse(-1))
                    for (t, p), answer in zip(partitions, (answers.get(tp) for tp in tps))]
        try:
            ends = self._run(run, timeout + GRACE)
        except (JvmStartError, JvmGone) as e:
            return jvm_outcome(asked, e)
        except JavaError as e:
            return Outcome(FAIL, asked, str(e))
        return Outcome(OK, h.completion("end-offsets", offsets=[
            end_at(t, p, offset, epoch) for t, p, offset, epoch in ends]))

    def positions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        def run(c, consumer):
            assigned = consumer.assignment()
            return [(t, p, consumer.position(self._tp(c, t, p), self._duration(c, 1.0)))
                    for t, p in partitions if assigned.contains(self._tp(c, t, p))]
        try:
            return {(t, p): offset for t, p, offset in self._run(run, LOCAL_TIMEOUT + GRACE)}
        except (JvmStartError, JvmGone, JavaError):
            return {}

    def close(self) -> None:
        def close(c, consumer):
            if self._admin is not None:
                self._admin.close(c.Duration.ZERO)  # it only read: nothing to wait for
            # Leaves the group (LeaveGroup), the revocation recorded.
            consumer.close(c.CloseOptions.timeout(self._duration(c, self._api_timeout)))
        self._close(close, self._api_timeout)
