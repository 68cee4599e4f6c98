"""Consumer groups with real clients: three confluent-kafka consumers
subscribe to one topic; one leaves, one crashes (SIGKILL of its process);
after every rebalance the live members own every partition exactly once."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
import time

from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic

TIMEOUT = 60
PARTITIONS = 6
GROUP_CONF = {"group.id": "g", "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
              "auto.offset.reset": "earliest"}


class PollingConsumer:
    """A subscribed consumer polled by its own thread, remembering what it owns."""

    def __init__(self, bootstrap: str):
        self.owned: set[int] = set()
        self.consumer = Consumer({"bootstrap.servers": bootstrap, **GROUP_CONF})
        self.consumer.subscribe(["g"], on_assign=self._assigned, on_revoke=self._revoked)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _assigned(self, consumer, partitions):
        self.owned |= {p.partition for p in partitions}

    def _revoked(self, consumer, partitions):
        self.owned -= {p.partition for p in partitions}

    def _run(self):
        while not self.stop.is_set():
            self.consumer.poll(0.2)
        self.consumer.close()  # LeaveGroup

    def leave(self):
        self.stop.set()
        self.thread.join(TIMEOUT)


def crashing_consumer(bootstrap: str) -> subprocess.Popen:
    code = textwrap.dedent(f"""
        from confluent_kafka import Consumer
        c = Consumer({{"bootstrap.servers": {bootstrap!r}, **{GROUP_CONF!r}}})
        c.subscribe(["g"])
        while True:
            c.poll(0.2)
    """)
    return subprocess.Popen([sys.executable, "-c", code])


def stable_members(admin: AdminClient, count: int, broker=None) -> dict[str, set[int]]:
    """Wait for the group to be Stable with `count` members; their assignments.
    Given the broker, a failure quotes what its group coordinator did."""
    deadline = time.monotonic() + TIMEOUT
    last = None
    while time.monotonic() < deadline:
        group = admin.describe_consumer_groups(["g"])["g"].result(TIMEOUT)
        last = (group.state, [(m.member_id, m.assignment) for m in group.members])
        if str(group.state).endswith("STABLE") and len(group.members) == count:
            return {m.member_id: {tp.partition for tp in m.assignment.topic_partitions}
                    for m in group.members}
        time.sleep(0.3)
    raise AssertionError(f"group not stable with {count} members: {last}"
                         + (_group_log(broker) if broker is not None else ""))


def _group_log(broker) -> str:
    lines = [line for line in broker.log_path.read_text(errors="replace").splitlines()
             if "group" in line and "describe_groups" not in line]
    return "\nthe broker's group log:\n" + "\n".join(lines[-40:])


def assert_each_partition_owned_once(assignments: dict[str, set[int]]):
    owned = [p for parts in assignments.values() for p in parts]
    assert sorted(owned) == list(range(PARTITIONS)), assignments


class KafkaPythonMember:
    """A kafka-python consumer polled by its own thread (a join blocks its
    poll until the rebalance completes, so members cannot share a thread)."""

    def __init__(self, bootstrap: str):
        from kafka import KafkaConsumer
        # kafka-python heartbeats from a Python thread, starved on a loaded
        # machine: a CI run once found one of the two members that stayed
        # gone for a minute (not reproduced since; the failure now quotes
        # the broker's group log), so the session is longer than the
        # confluent members'.
        self.consumer = KafkaConsumer("g", bootstrap_servers=bootstrap, group_id="g",
                                      session_timeout_ms=15000, heartbeat_interval_ms=500,
                                      enable_auto_commit=False)
        self.stop = threading.Event()
        self.owned: set[int] = set()
        self.commit_to = None
        self.committed = None
        self.errors: list[str] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        from kafka import OffsetAndMetadata
        from kafka.errors import KafkaError
        while not self.stop.is_set():
            self.consumer.poll(100)
            assignment = set(self.consumer.assignment())
            self.owned = {tp.partition for tp in assignment}
            if self.commit_to is not None and assignment:
                tp = min(assignment)
                try:
                    self.consumer.commit({tp: OffsetAndMetadata(self.commit_to, "", -1)})
                    self.committed = self.consumer.committed(tp)
                except KafkaError as e:
                    # A rebalance raced the commit or its read-back
                    # (REBALANCE_IN_PROGRESS, a coordinator timeout):
                    # kafka-python raises; try again after the next poll.
                    self.errors.append(repr(e))
                    continue
                self.commit_to = None
        self.consumer.close()  # LeaveGroup

    def leave(self):
        self.stop.set()
        self.thread.join(TIMEOUT)


def _until(condition, what):
    """`what` may be a callable, to describe the state at the moment of failure."""
    deadline = time.monotonic() + TIMEOUT
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert condition(), what() if callable(what) else what


def test_kafka_python_group_of_three(broker):
    """kafka-python consumers subscribe, rebalance, commit and leave."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("g", num_partitions=PARTITIONS,
                                  replication_factor=1)])["g"].result(TIMEOUT)
    members = [KafkaPythonMember(broker.bootstrap) for _ in range(3)]
    try:
        assert_each_partition_owned_once(stable_members(admin, 3, broker))
        members.pop().leave()
        assert_each_partition_owned_once(stable_members(admin, 2, broker))
        _until(lambda: sorted(p for m in members for p in m.owned) == list(range(PARTITIONS)),
               "the two remaining members own every partition once")
        members[0].commit_to = 3
        _until(lambda: members[0].committed is not None,
               lambda: f"a commit and its read-back (member thread alive: "
                       f"{members[0].thread.is_alive()}, errors: {members[0].errors})")
        assert members[0].committed == 3
    finally:
        for m in members:
            m.leave()


def test_join_leave_crash(broker):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("g", num_partitions=PARTITIONS,
                                  replication_factor=1)])["g"].result(TIMEOUT)
    first, second = PollingConsumer(broker.bootstrap), PollingConsumer(broker.bootstrap)
    crasher = crashing_consumer(broker.bootstrap)
    try:
        three = stable_members(admin, 3)
        assert_each_partition_owned_once(three)
        assert all(three.values()), "every member owns a partition"

        second.leave()
        assert_each_partition_owned_once(stable_members(admin, 2))

        crasher.send_signal(signal.SIGKILL)
        crasher.wait(TIMEOUT)
        # The crashed member is expired after its session timeout.
        one = stable_members(admin, 1)
        assert_each_partition_owned_once(one)
        deadline = time.monotonic() + TIMEOUT
        while first.owned != set(range(PARTITIONS)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert first.owned == set(range(PARTITIONS))
        listed = admin.list_consumer_groups().result(TIMEOUT)
        assert [g.group_id for g in listed.valid] == ["g"]
    finally:
        crasher.kill()
        first.leave()
        second.leave()
