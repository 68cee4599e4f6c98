"""The consumer adapters with real clients against a real reference broker
(one broker for the module): reads, rebalances, commits and committed
offsets; every test runs once per library, the same suite for every
implementation."""

from __future__ import annotations

import base64
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer

from tests.workloads.clients.client_support import TIMEOUT, consumer, producer
from workloads.clients import ClientSettings, Outcome


def poll_until(client, condition, what: str) -> list[Outcome]:
    """Poll until `condition(outcomes so far)`; every poll must be ok."""
    outcomes: list[Outcome] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        outcomes.append(client.poll(0.5))
        assert outcomes[-1].type == "ok", outcomes[-1]
        if condition(outcomes):
            return outcomes
    raise AssertionError(f"{what} within {TIMEOUT} s; polls: {outcomes}")


def reads_of(outcomes: list[Outcome]) -> list[dict]:
    return [r for o in outcomes for r in o.value["reads"]]


def subscribed(library, broker, clients, group, topic):
    """A consumer that is a member of `group` and owns both partitions."""
    member = consumer(library, broker, clients, group)
    assert member.subscribe(group, [topic]) == Outcome("ok", {"group": group, "topics": [topic]})
    polls = poll_until(member, lambda os: any(o.value["rebalances"] for o in os),
                       "an assignment")
    return member, [r for o in polls for r in o.value["rebalances"]]


# -- consume -----------------------------------------------------------------------

def test_assign_from_beginning_reads_values_and_raw_records(library, broker, topic, clients):
    assert producer(library, broker, clients).send(
        [(topic, 0, 60), (topic, 1, 61), (topic, 0, 62)], 10).type == "ok"
    raw = Producer({"bootstrap.servers": broker.bootstrap})
    raw.produce(topic, b"not a number", partition=1)
    assert raw.flush(TIMEOUT) == 0
    c = consumer(library, broker, clients)
    assert c.assign([(topic, 0), (topic, 1)], True) == Outcome("ok", {
        "partitions": [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}],
        "seek_to_beginning": True})
    polls = poll_until(c, lambda os: len(reads_of(os)) >= 4, "4 reads")
    got = sorted(reads_of(polls), key=lambda r: (r["partition"], r["offset"]))
    # Each read carries the leader epoch its batch was appended in: the
    # topic's first leader's, 0.
    assert [r.pop("epoch", None) for r in got] == [0, 0, 0, 0]
    assert got == [
        {"topic": topic, "partition": 0, "offset": 0, "value": 60},
        {"topic": topic, "partition": 0, "offset": 1, "value": 62},
        {"topic": topic, "partition": 1, "offset": 0, "value": 61},
        {"topic": topic, "partition": 1, "offset": 1, "value": None,
         "raw": base64.b64encode(b"not a number").decode()}]
    assert all(o.value["rebalances"] == [] for o in polls)  # assign mode: no callbacks


def test_poll_returns_early_when_records_arrive(library, broker, topic, clients):
    assert producer(library, broker, clients).send([(topic, 0, 70)], 10).type == "ok"
    c = consumer(library, broker, clients)
    c.assign([(topic, 0)], True)
    poll_until(c, lambda os: reads_of(os), "the first read")
    assert producer(library, broker, clients).send([(topic, 0, 71)], 10).type == "ok"
    started = time.monotonic()
    outcome = c.poll(10)
    assert [r["value"] for r in outcome.value["reads"]] == [71]
    assert time.monotonic() - started < 5  # not the whole 10 s


def test_subscribe_reports_the_assignment_in_a_poll(library, broker, topic, clients):
    group = f"g-{uuid.uuid4().hex[:6]}"
    _, rebalances = subscribed(library, broker, clients, group, topic)
    assert rebalances == [{"kind": "assigned", "group": group, "partitions": [
        {"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]}]


def test_end_offsets_are_the_high_watermarks(library, broker, topic, clients):
    assert producer(library, broker, clients).send(
        [(topic, 0, v) for v in range(80, 85)] + [(topic, 1, 85)], 10).type == "ok"
    outcome = consumer(library, broker, clients).end_offsets([(topic, 0), (topic, 1)], 10)
    # With the answering leader's epoch where the client tells it
    # (confluent-kafka's offsets_for_times, Java's Admin.listOffsets;
    # kafka-python keeps it).
    epoch = {} if library == "kafka-python" else {"epoch": 0}
    assert outcome == Outcome("ok", {"offsets": [
        {"topic": topic, "partition": 0, "offset": 5, **epoch},
        {"topic": topic, "partition": 1, "offset": 1, **epoch}]})


# -- commit and committed ----------------------------------------------------------------

def test_commit_then_committed(library, broker, topic, clients):
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(library, broker, clients, group)
    c.assign([(topic, 0), (topic, 1)], True)
    assert c.commit(group, [(topic, 0, 3)]) == Outcome("ok", {
        "group": group, "offsets": [{"topic": topic, "partition": 0, "offset": 3}]})
    assert c.committed(group, [(topic, 0), (topic, 1)], 10) == Outcome("ok", {
        "group": group, "offsets": [{"topic": topic, "partition": 0, "offset": 3},
                                    {"topic": topic, "partition": 1, "offset": None}]})


def committed_epoch(broker, group, topic, partition) -> int | None:
    """The leader epoch OffsetFetch returns with a group's commit (read
    with a client of its own: the history does not carry epochs)."""
    from confluent_kafka import Consumer, TopicPartition
    reader = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
    try:
        [answer] = reader.committed([TopicPartition(topic, partition)], timeout=TIMEOUT)
        return answer.leader_epoch
    finally:
        reader.close()


def test_a_commit_after_reads_carries_the_last_records_leader_epoch(library, broker, topic,
                                                                     clients):
    # KIP-320: OffsetCommit v6+ names the epoch of the last record consumed,
    # so a consumer resuming there can validate it; an offset not just after
    # a record read carries none.
    p = producer(library, broker, clients)
    assert p.send([(topic, 0, 1), (topic, 0, 2)], TIMEOUT).type == "ok"
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(library, broker, clients, group)
    c.assign([(topic, 0)], True)
    poll_until(c, lambda os: len(reads_of(os)) == 2, "both records")
    assert c.commit(group, [(topic, 0, 2)]).type == "ok"
    assert committed_epoch(broker, group, topic, 0) == 0
    assert c.commit(group, [(topic, 0, 1)]).type == "ok"
    assert committed_epoch(broker, group, topic, 0) is None


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_a_group_without_commits_starts_where_auto_offset_reset_says(library, broker, topic,
                                                                      clients, reset):
    p = producer(library, broker, clients)
    assert p.send([(topic, 0, 1)], TIMEOUT).type == "ok"
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(library, broker, clients, group,
                 ClientSettings(auto_offset_reset=reset))
    c.assign([(topic, 0)], False)     # from the committed offset: there is none
    if reset == "earliest":
        assert [r["value"] for r in reads_of(poll_until(c, reads_of, "the record"))] == [1]
    else:
        assert reads_of([c.poll(2) for _ in range(2)]) == []
        assert p.send([(topic, 0, 2)], TIMEOUT).type == "ok"
        assert [r["value"] for r in reads_of(poll_until(c, reads_of, "the new record"))] == [2]


def test_committed_of_a_group_without_commits_is_none(library, broker, topic, clients):
    group = f"fresh-{uuid.uuid4().hex[:6]}"
    outcome = consumer(library, broker, clients, group).committed(group, [(topic, 0)], 10)
    assert outcome == Outcome("ok", {"group": group, "offsets": [
        {"topic": topic, "partition": 0, "offset": None}]})


def test_a_member_commits_its_partitions(library, broker, topic, clients):
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, _ = subscribed(library, broker, clients, group, topic)
    assert member.commit(group, [(topic, 1, 4)]).type == "ok"
    assert member.committed(group, [(topic, 1)], 10).value["offsets"][0]["offset"] == 4


def test_a_member_closed_in_a_rebalance_leaves_and_the_other_gets_every_partition(
        library, broker, topic, clients):
    """A member is closed while a rebalance it has not served is pending
    (a second member joined and nothing polled the first since): close()
    returns, and the other member ends up owning both partitions. With
    confluent-kafka a rebalance served inside close() can hang the process
    for good (workloads/clients/confluent.py, ConfluentConsumer._leave_group)."""
    group = f"g-{uuid.uuid4().hex[:6]}"
    first, _ = subscribed(library, broker, clients, group, topic)
    second = consumer(library, broker, clients, group)
    assert second.subscribe(group, [topic]).type == "ok"
    owned: set[int] = set()
    stop = threading.Event()

    def poll_second() -> None:
        while not stop.is_set():
            for r in second.poll(0.2).value["rebalances"]:
                parts = {p["partition"] for p in r["partitions"]}
                owned.update(parts) if r["kind"] == "assigned" else owned.difference_update(parts)

    poller = threading.Thread(target=poll_second, daemon=True)
    poller.start()
    try:
        time.sleep(1.0)     # the second member's JoinGroup: the first must rejoin
        closing = threading.Thread(target=first.close, daemon=True)
        closing.start()
        closing.join(TIMEOUT)
        assert not closing.is_alive(), "close() of a member in a rebalance did not return"
        deadline = time.monotonic() + TIMEOUT
        while owned != {0, 1} and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        poller.join(TIMEOUT)
    assert owned == {0, 1}


def test_commit_by_a_non_member_of_an_active_group_fails(library, broker, topic, clients):
    """A consumer outside the group (assign mode, no generation) commits
    while the group has a member: the coordinator refuses with
    UNKNOWN_MEMBER_ID (Kafka's validateOffsetCommit), and nothing is stored."""
    group = f"g-{uuid.uuid4().hex[:6]}"
    member, _ = subscribed(library, broker, clients, group, topic)
    outsider = consumer(library, broker, clients, group)
    outsider.assign([(topic, 0)], True)
    outcome = outsider.commit(group, [(topic, 0, 9)])
    assert outcome.type == "fail", outcome
    # The Java consumer turns that answer into CommitFailedException, whose
    # message does not name it.
    assert ("UNKNOWN_MEMBER_ID" in outcome.error or "UnknownMemberIdError" in outcome.error
            or outcome.error.startswith("CommitFailedException: ")), outcome.error
    assert member.committed(group, [(topic, 0)], 10).value["offsets"][0]["offset"] is None


def test_reads_while_the_broker_is_paused_fail(library, broker, topic, clients):
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(library, broker, clients, group)
    c.assign([(topic, 0)], True)
    assert c.commit(group, [(topic, 0, 0)]).type == "ok"  # coordinator and leader known
    assert c.end_offsets([(topic, 0)], 10).type == "ok"
    broker.pause()
    try:
        committed = c.committed(group, [(topic, 0)], 1)
        ends = c.end_offsets([(topic, 0)], 1)
        polled = c.poll(0.5)
    finally:
        broker.resume()
    assert committed == Outcome("fail", {"group": group, "offsets": [
        {"topic": topic, "partition": 0, "offset": None}]}, committed.error)
    # docs/history.md: a failed end-offsets echoes what was asked.
    assert ends == Outcome("fail", {"partitions": [
        {"topic": topic, "partition": 0}]}, ends.error)
    assert {committed.error.split(":")[0], ends.error.split(":")[0]} <= {
        "_TIMED_OUT", "KafkaTimeoutError", "REQUEST_TIMED_OUT"}
    # A poll that reads nothing is still a poll that happened.
    assert polled == Outcome("ok", {"reads": [], "rebalances": []})


def test_unanswered_commit_is_info(library, broker, topic, clients):
    group = f"g-{uuid.uuid4().hex[:6]}"
    c = consumer(library, broker, clients, group,
                 ClientSettings(default_api_timeout_ms=1500))
    c.assign([(topic, 0)], True)
    assert c.commit(group, [(topic, 0, 1)]).type == "ok"  # the coordinator is known
    broker.pause()
    try:
        started = time.monotonic()
        outcome = c.commit(group, [(topic, 0, 2)])
        elapsed = time.monotonic() - started
    finally:
        broker.resume()
    assert outcome.type == "info", outcome
    assert outcome.error.split(":")[0] in ("_TIMED_OUT", "KafkaTimeoutError", "REQUEST_TIMED_OUT")
    assert 1.4 < elapsed < 5
    if library == "confluent-kafka":
        # librdkafka goes on committing in the background and the consumer
        # blocks every call until it is answered: the adapter refuses use.
        with pytest.raises(RuntimeError, match="make a new one"):
            c.poll(0.1)
    before = set(threading.enumerate())
    c.close()  # returns at once; the real close follows the commit's answer
    # This consumer's own closing thread: another test's must not count here.
    ours = [t for t in set(threading.enumerate()) - before
            if t.name.startswith("close-after-commit-")]

    def closing():
        return [t for t in ours if t.is_alive()]
    deadline = time.monotonic() + 2 * TIMEOUT
    while closing() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not closing()


def test_consumer_belongs_to_its_group(library, broker, clients):
    c = consumer(library, broker, clients, "mine")
    with pytest.raises(ValueError, match="group='other'.*make_consumer"):
        c.commit("other", [("t", 0, 1)])
    with pytest.raises(ValueError, match="group=None"):
        consumer(library, broker, clients).committed("mine", [("t", 0)], 1)


def test_a_partition_reported_assigned_is_read_from_the_committed_offset(
        library, broker, topic, clients):
    """What the resume checks rest on (checkers/group_offsets.py): a member
    reads past its commit, a second member joins, and the first gets one
    partition back. If the poll reports it `assigned`, its next read starts
    at the group's committed offset (the Java client and librdkafka start
    over from it); if not, the member kept its position through the rejoin
    (kafka-python 3 under the eager protocol, workloads/clients/kafka_python.py)
    and its next read continues it."""
    group = f"g-{uuid.uuid4().hex[:6]}"
    first, _ = subscribed(library, broker, clients, group, topic)
    writer = producer(library, broker, clients)
    assert writer.send([(topic, p, v) for p in (0, 1) for v in range(5)], TIMEOUT).type == "ok"
    reads = reads_of(poll_until(first, lambda os: len(reads_of(os)) >= 10, "every record"))
    assert first.commit(group, [(topic, 0, 2), (topic, 1, 2)]).type == "ok"
    second = consumer(library, broker, clients, group)
    assert second.subscribe(group, [topic]).type == "ok"
    stop = threading.Event()
    poller = threading.Thread(target=lambda: [second.poll(0.2) for _ in iter(stop.is_set, True)],
                              daemon=True)
    poller.start()
    try:
        owned = {0, 1}
        rejoin = poll_until(first, lambda os: len(owned_after(owned, os)) == 1, "a rejoin")
        kept, = owned_after(owned, rejoin)
        assigned = any(r["kind"] == "assigned" for o in rejoin for r in o.value["rebalances"])
        assert writer.send([(topic, kept, 5)], TIMEOUT).type == "ok"
        later = [r for r in reads_of(rejoin) + reads_of(poll_until(
            first, lambda os: any(r["offset"] == 5 for r in reads_of(os)), "the new record"))
            if r["partition"] == kept]
    finally:
        stop.set()
        poller.join(TIMEOUT)
    assert max(r["offset"] for r in reads if r["partition"] == kept) == 4
    assert later[0]["offset"] == (2 if assigned else 5), (library, rejoin, later)


def owned_after(owned: set[int], outcomes: list[Outcome]) -> set[int]:
    """The partitions a member owns after its polls' rebalances (it owned `owned`)."""
    owned = set(owned)
    for o in outcomes:
        for r in o.value["rebalances"]:
            parts = {p["partition"] for p in r["partitions"]}
            owned = owned | parts if r["kind"] == "assigned" else owned - parts
    return owned
