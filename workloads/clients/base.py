"""What every client adapter shares: the outcome of an operation in history
terms, the client settings, the two small protocols, and the pieces of
docs/history.md both libraries produce the same way (record values, completion
values, the verdict of an operation over several items).

The one idea: an operation is `ok` when everything it asked for happened,
`fail` only when every part of it *certainly* did not happen, and `info`
otherwise. Each library's error table (in its own module) says which errors
are certain; anything it does not list is `info`.
"""

from __future__ import annotations

import base64
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from history_analysis.history import schema as h
from history_analysis.history.schema import ISOLATION_LEVELS
from settings import setting

OK, FAIL, INFO = "ok", "fail", "info"
# NOT_ENOUGH_REPLICAS is returned before the append (the ISR is too small),
# so the attempt that saw it wrote nothing; but with retries an earlier
# attempt may have timed out after its append. Certain only without retries.
FAIL_UNLESS_RETRIED = "fail-unless-retried"

_DECIMAL = re.compile(rb"-?[0-9]+")
_INT64 = range(-2**63, 2**63)


@dataclass(frozen=True)
class Outcome:
    type: str                   # "ok" | "fail" | "info"
    value: dict                 # the completion value of docs/history.md's table for that f
    error: str | None = None    # "<ERROR_NAME>: <message>" on fail/info


@dataclass(frozen=True)
class ClientSettings:
    """Every client knob, with Kafka's meaning (the Java client's property of
    the same name); each library module maps them to its own names."""
    acks: str = setting("all", "Producer acks.", choices=("0", "1", "all"))
    idempotence: bool = setting(True, "The idempotent producer (KIP-98): "
                                "enable.idempotence.")
    retries: int | None = setting(None, "Producer retries.", default_text="the client's, "
                                  "effectively unbounded")
    max_in_flight: int = setting(5, "Producer requests in flight per connection "
                                 "(max.in.flight.requests.per.connection).")
    linger_ms: int = setting(0, "Producer batching delay.")
    batch_size: int = setting(16384, "Producer batch size in bytes (1: one record per batch).")
    delivery_timeout_ms: int = setting(10000, "How long a send may take, retries included "
                                       "(KIP-91).")
    request_timeout_ms: int = setting(3000, "How long a client waits for any response.")
    session_timeout_ms: int = setting(6000, "Group session timeout of subscribe-mode "
                                      "consumers.")
    heartbeat_interval_ms: int = setting(300, "Group heartbeat interval.")
    max_poll_interval_ms: int = setting(30000, "max.poll.interval.ms, also the rebalance "
                                        "timeout a member sends in JoinGroup.")
    max_block_ms: int = setting(2000, "How long a send waits for its topic in the metadata.")
    default_api_timeout_ms: int = setting(5000, "Bounds calls without a timeout argument "
                                          "(commit).")
    fetch_max_wait_ms: int = setting(500, "How long the broker may hold a fetch.")
    auto_offset_reset: str = setting(
        "earliest", "Where a consumer goes when its position is out of range (and a group "
        "with no commit starts).", choices=("earliest", "latest"))
    # KIP-98: read_committed stops at the last stable offset and drops
    # aborted transactions. Set for every library alike: their defaults
    # differ (librdkafka read_committed, kafka-python and Java
    # read_uncommitted), and without transactions both read the same.
    isolation_level: str = setting(
        "read_committed", "What consumers read of transactions: only committed ones, or "
        "everything.", choices=ISOLATION_LEVELS)
    retry_backoff_ms: int = setting(100, "Wait before a client retries a request.")
    reconnect_backoff_ms: int = setting(50, "First wait before reconnecting to a broker.")
    reconnect_backoff_max_ms: int = setting(1000, "Longest wait before reconnecting.")

    def __post_init__(self):
        if self.acks not in ("0", "1", "all"):
            raise ValueError(f"acks={self.acks!r} ({type(self.acks).__name__}): "
                             f'use one of the strings "0", "1", "all"')
        if self.idempotence:
            # KIP-98 / KIP-679: both libraries refuse these with idempotence on.
            conflicts = [f"{name}={value!r}" for name, value, bad in [
                ("acks", self.acks, self.acks != "all"),
                ("retries", self.retries, self.retries == 0),
                ("max_in_flight", self.max_in_flight, self.max_in_flight > 5)] if bad]
            if conflicts:
                raise ValueError(f"idempotence=True conflicts with {', '.join(conflicts)}: "
                                 f"use acks='all', retries None or > 0, max_in_flight <= 5, "
                                 f"or idempotence=False")
        if self.auto_offset_reset not in ("earliest", "latest"):
            raise ValueError(f"auto_offset_reset={self.auto_offset_reset!r}: use "
                             f'"earliest" or "latest"')
        if self.isolation_level not in ISOLATION_LEVELS:
            raise ValueError(f"isolation_level={self.isolation_level!r}: use "
                             f'"read_committed" or "read_uncommitted"')
        if self.batch_size < 1:
            raise ValueError(f"batch_size={self.batch_size!r}: must be at least 1 byte "
                             f"(1 puts every record in a batch of its own)")
        if not self.fetch_max_wait_ms < self.request_timeout_ms:
            raise ValueError(f"fetch_max_wait_ms={self.fetch_max_wait_ms!r} must be below "
                             f"request_timeout_ms={self.request_timeout_ms!r}: a fetch the "
                             f"broker may hold that long would time out")
        if not self.heartbeat_interval_ms < self.session_timeout_ms <= self.max_poll_interval_ms:
            raise ValueError(f"need heartbeat_interval_ms ({self.heartbeat_interval_ms!r}) < "
                             f"session_timeout_ms ({self.session_timeout_ms!r}) <= "
                             f"max_poll_interval_ms ({self.max_poll_interval_ms!r})")


class ProducerClient(Protocol):
    def send(self, sends: list[tuple[str, int, int]], timeout: float) -> Outcome:
        """Send each (topic, partition, value) and wait up to `timeout` s for
        every outcome. After an `info` the producer is spent (records may still
        be delivered later): close it and make a new one, as a new process."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class Stall:
    """A transaction that stalls half-way (KAFKA-6119's producer): its first
    `after` sends are delivered, then `wait()` runs (the application busy
    elsewhere), then the rest are sent."""
    after: int
    wait: Callable[[], object]


def stalled_parts(count: int, stall: Stall | None,
                  deadline: float) -> Iterator[tuple[range, float]]:
    """The indexes of a transaction's `count` sends in the parts a `stall`
    splits them into (one part without one), each with its deadline: the
    stall runs between the parts, and its time does not count against the
    operation (the last deadline yielded is the commit's too)."""
    parts = [range(count)] if stall is None else \
        [range(stall.after), range(stall.after, count)]
    for n, indexes in enumerate(parts):
        if n:
            stalled_at = time.monotonic()
            stall.wait()
            deadline += time.monotonic() - stalled_at
        yield indexes, deadline


def within(run: Callable[[], object], bound: float) -> tuple[bool, object]:
    """`run()` in a daemon thread of its own, for at most `bound` seconds:
    (True, what it returned), or (False, None) once the bound has passed
    (the thread is left to finish alone). What it raised is raised here.
    For client calls that were seen to outlive every timeout they were
    given, or that take none: a worker's operation must end all the same."""
    done: list = []
    failed: list[BaseException] = []

    def call() -> None:
        try:
            done.append(run())
        except BaseException as e:  # noqa: BLE001 — raised again in the caller
            failed.append(e)
    worker = threading.Thread(target=call, name="bounded-call", daemon=True)
    worker.start()
    worker.join(bound)
    if failed:
        raise failed[0]
    return (True, done[0]) if done else (False, None)


@dataclass(frozen=True)
class Consumed:
    """What a consume-transform-produce transaction read, committed inside
    it (KIP-447): the group, its consumer's group metadata (generation and
    member, which fence a zombie) and each partition's next offset."""
    group: str
    metadata: object
    offsets: list[tuple[str, int, int]]

    def value(self) -> dict:
        """The `group` and `offsets` fields of the txn's value."""
        return {"group": self.group, "offsets": offsets_value(self.offsets)}


def txn_value(sends: list[tuple[str, int, int]], offsets: list[int | None] | None,
              committing: int | None, consumed: Consumed | None = None) -> dict:
    """A `txn` completion: the sends with their offsets (None: unknown, or
    aborted), when the commit was asked for (left out if never), and the
    group's offsets it committed with them (left out if none)."""
    offsets = offsets or [None] * len(sends)
    extra = {} if committing is None else {"committing": committing}
    if consumed is not None:
        extra.update(consumed.value())
    return h.completion("txn", sends=[h.SEND_DONE(topic=t, partition=p, value=v, offset=o)
                                      for (t, p, v), o in zip(sends, offsets)], reads=[],
                        **extra)


class TransactionalProducerClient(Protocol):
    usable: bool    # false after a fatal error: close it and make a new one

    def transaction(self, sends: list[tuple[str, int, int]], commit: bool,
                    timeout: float, clock: Callable[[], int],
                    stall: Stall | None = None, consumed: Consumed | None = None) -> Outcome:
        """One transaction: send each (topic, partition, value), add
        `consumed`'s offsets to it, then commit (or abort). `ok`: committed;
        `fail`: certainly not committed; `info`: unknown, and the producer is
        spent. `timeout` bounds the sends and the commit, not the stall."""

    def close(self) -> None: ...


class ConsumerClient(Protocol):
    """A consumer of the group it was made with (or of none: assign only).
    poll, committed and end_offsets only read: their failures are `fail`,
    except a poll after which the client cannot go on (`info`). After an
    `info` commit, close it and make a new one."""

    def assign(self, partitions: list[tuple[str, int]], seek_to_beginning: bool) -> Outcome: ...
    def subscribe(self, group: str, topics: list[str]) -> Outcome: ...
    def poll(self, timeout: float, max_records: int = 500) -> Outcome: ...
    def commit(self, group: str, offsets: list[tuple[str, int, int]]) -> Outcome: ...
    def committed(self, group: str, partitions: list[tuple[str, int]],
                  timeout: float) -> Outcome: ...
    def end_offsets(self, partitions: list[tuple[str, int]], timeout: float) -> Outcome: ...
    def positions(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        """The next offset the client would fetch of each assigned partition
        it knows one for: past transaction markers and, under
        read_committed, aborted records, which no poll returns. Not an
        operation of the history: the final reads' own bookkeeping."""
    def close(self) -> None: ...


class PipelineConsumer(ConsumerClient, Protocol):
    """The consuming half of a consume-transform-produce pipeline
    (confluent-kafka's consumer; PIPELINE_LIBRARIES)."""

    def group_metadata(self) -> object:
        """The group metadata a transaction sends with its offsets (KIP-447)."""
    def rewind(self, positions: list[tuple[str, int, int | None]]) -> None:
        """Move assigned partitions' positions (None: to the start), as a
        pipeline does to its group's committed offsets after an abort; the
        next poll reports each as a `reset`. Not an operation of the history."""


# -- values ---------------------------------------------------------------------

def encode_value(value: int) -> bytes:
    return str(value).encode("ascii")


def read(topic: str, partition: int, offset: int, raw: bytes | None,
         epoch: int | None = None) -> dict:
    """A read as the history records it: a value that is not an ASCII decimal
    64-bit int (another writer's record, a null) keeps its bytes in `raw`;
    `epoch`, the leader epoch the record's batch was appended in, when the
    client tells it (a negative one is unknown)."""
    raw = raw or b""
    known = _epoch(epoch)
    if _DECIMAL.fullmatch(raw) and int(raw) in _INT64:
        return h.READ(topic=topic, partition=partition, offset=offset, value=int(raw), **known)
    return h.READ(topic=topic, partition=partition, offset=offset, value=None,
                  raw=base64.b64encode(raw).decode("ascii"), **known)


def end_at(topic: str, partition: int, offset: int, epoch: int | None = None) -> dict:
    """A partition's end as the history records it, with the epoch of the
    leader that answered when the client tells it."""
    return h.END_AT(topic=topic, partition=partition, offset=offset, **_epoch(epoch))


def _epoch(epoch: int | None) -> dict:
    # Clients tell an unknown epoch as None or -1; the history leaves it out.
    return {"epoch": epoch} if epoch is not None and epoch >= 0 else {}


class ConsumedEpochs:
    """The leader epoch of the last record read per partition, so that a
    commit of the offset after it carries that epoch, as the Java
    consumer's commits do (KIP-320: OffsetCommit v6's committed leader
    epoch; a consumer resuming at a committed offset validates it against
    the leader's log, and learns of a truncation below it)."""

    NONE = -1

    def __init__(self):
        self._last: dict[tuple[str, int], tuple[int, int]] = {}   # (next offset, epoch)

    def read(self, topic: str, partition: int, offset: int, epoch: int | None) -> None:
        self._last[(topic, partition)] = (offset + 1, self.NONE if epoch is None else epoch)

    def for_commit(self, topic: str, partition: int, offset: int) -> int:
        """The epoch to commit `offset` with: the last read record's when
        `offset` is the one after it, else none."""
        next_offset, epoch = self._last.get((topic, partition), (None, self.NONE))
        return epoch if next_offset == offset else self.NONE


def partitions_value(partitions) -> list[dict]:
    return [h.TOPIC_PARTITION(topic=t, partition=p) for t, p in partitions]


def rebalance(kind: str, group: str | None, partitions) -> dict:
    return h.REBALANCE(kind=kind, group=group, partitions=partitions_value(partitions))


def offsets_value(offsets, shape: h.Shape = h.OFFSET_AT) -> list[dict]:
    """(topic, partition, offset) as the history records them; `shape`
    OFFSET_FOUND for what a committed fetch found (maybe no offset)."""
    return [shape(topic=t, partition=p, offset=o) for t, p, o in offsets]


def sends_outcome(sends: list[tuple[str, int, int]], offsets: list[int | None],
                  errors: list[tuple[str, str] | None]) -> Outcome:
    value = h.completion("send", sends=[h.SEND_DONE(topic=t, partition=p, value=v, offset=o)
                                        for (t, p, v), o in zip(sends, offsets)])
    return verdict(value, errors)


def verdict(value: dict, errors: list[tuple[str, str] | None]) -> Outcome:
    """The outcome of an operation over items, from each item's error: None
    (it happened) or (FAIL or INFO, "NAME: message"). `fail` needs every
    item certainly not done; a mix of done and not done is `info`."""
    failed = [e for e in errors if e is not None]
    if not failed:
        return Outcome(OK, value)
    certain = len(failed) == len(errors) and all(kind == FAIL for kind, _ in failed)
    return Outcome(FAIL if certain else INFO, value, failed[0][1])


def resolve(kind: str, retries: int | None) -> str:
    """A table entry as FAIL or INFO for an operation made with `retries`."""
    if kind == FAIL_UNLESS_RETRIED:
        return FAIL if retries == 0 else INFO
    return kind


def check_group(own: str | None, group: str, argument: str = "group") -> None:
    """A consumer belongs to the group it was made with (group.id is fixed
    when a Kafka consumer is created)."""
    if group != own:
        raise ValueError(f"{argument}={group!r}, but this consumer was made with "
                         f"group={own!r}: make a consumer with make_consumer(..., "
                         f"group={group!r}) for that group")
