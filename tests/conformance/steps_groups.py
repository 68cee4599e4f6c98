"""Group steps (the classic protocol): FindCoordinator, JoinGroup (new
dynamic members with KIP-394's MEMBER_ID_REQUIRED round, static members
with group.instance.id, KIP-345, rejoins, replacements of a static
member), SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch,
with right, stale and unknown generations and member ids.

Every member has a connection of its own to the coordinator, so a JoinGroup
that waits for a rebalance can be left outstanding while the other members
are driven: each heartbeats until the coordinator answers
REBALANCE_IN_PROGRESS (as a consumer's heartbeat thread does), then
rejoins. Member ids are compared by the scenario's member names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from tests.conformance import requests as rq
from tests.conformance.base import Step, text
from tests.conformance.plain import keyed, plain

STATIC = {"s": "instance-s", "t": "instance-t"}     # the static members' group.instance.id
# q asks for a session below group.min.session.timeout.ms (6000 on both):
# INVALID_SESSION_TIMEOUT.
SESSION_MS = {"q": 1000}
UNKNOWN_MEMBER = "no-such-member"
HEARTBEAT_WAIT = 8.0        # s: a member heartbeats this long for a rebalance to show
BLOCKED_JOIN_WAIT = 5.0     # s: a join predicted to answer at once, before others are driven


def protocols(member: str) -> list[tuple[str, bytes]]:
    """Every member speaks "range" except z, whose only protocol no other
    member has (INCONSISTENT_GROUP_PROTOCOL)."""
    if member == "z":
        return [("roundrobin", b"meta-z")]
    return [("range", b"meta-" + member.encode())]


def _channel(member: str) -> str:
    return f"member-{member}"


class _Group:
    """What one cluster told this scenario about a group."""

    def __init__(self):
        self.generation = -1
        self.leader: str | None = None          # member id
        self.members: list[str] = []            # member names in the last generation


def group_state(s, group: str) -> _Group:
    state = s.groups.get(group)
    if state is None:
        state = s.groups[group] = _Group()
    return state


def member_id(s, member: str) -> str:
    if member == "?":
        return UNKNOWN_MEMBER
    return s.members.get(member, "")


@dataclass(frozen=True)
class FindCoordinator(Step):
    group: str                  # or a transactional id, with key type 1
    key_type: int = rq.GROUP_KEY
    api = "FindCoordinator"

    def run(self, s) -> Any:
        name = s.group(self.group)
        if self.group.startswith("!"):      # an id that may have no coordinator: asked once
            node = None
        else:                               # retried while loading; then asked again, compared
            node = s.coordinator(name, self.key_type)
        answer = plain(s.call(1, rq.find_coordinator(s.v[rq.FIND_COORDINATOR], name,
                                                     self.key_type)))
        answer["error_message"] = text(answer["error_message"])
        if answer["error_code"] == "none":
            where = s.node_of(answer["host"], answer["port"])
            consistent = where == f"node{answer['node_id']}" and node in (None, answer["node_id"])
            answer.update(node_id="<a broker>" if consistent else answer["node_id"],
                          host="<its address>" if consistent else where, port=None)
        return answer


@dataclass(frozen=True)
class Join(Step):
    """`joining` members send JoinGroup (mode "new": no member id yet —
    a static member is one of STATIC; "rejoin": its member id; "?": an
    unknown member id); then each member of `others` heartbeats until
    the rebalance shows and rejoins; then every answer is read."""
    group: str
    joining: tuple[tuple[str, str], ...]        # (member, mode)
    others: tuple[str, ...] = ()
    api = "JoinGroup"

    def run(self, s) -> Any:
        name = s.group(self.group)
        node = s.coordinator(name)
        v = s.v[rq.JOIN_GROUP]
        sent: list[tuple[str, str]] = []

        def send(member: str, mode: str) -> None:
            mid = "" if mode == "new" else UNKNOWN_MEMBER if mode == "?" else \
                member_id(s, member)
            s.conn(node, _channel(member)).send(
                rq.join_group(v, name, mid, STATIC.get(member), protocols(member),
                              session_ms=SESSION_MS.get(member, 10000)))
            sent.append((member, mode))

        before = group_state(s, name)
        previous_leader = s.member_name(before.leader) if before.leader else None
        for member, mode in self.joining:
            send(member, mode)
        heartbeats = {m: drive(s, name, node, m) for m in self.others}
        for m in self.others:
            send(m, "rejoin")
        answers: dict[str, list] = {}
        i = 0
        while i < len(sent):
            member, mode = sent[i]
            conn = s.conn(node, _channel(member))
            if not self.others and i == len(sent) - 1 and not _readable(conn, BLOCKED_JOIN_WAIT):
                # Predicted to answer at once, but it waits for a rebalance
                # after all: drive the members this cluster said it has.
                joined = {m for m, _ in sent}
                for m in [m for m in group_state(s, name).members if m not in joined]:
                    heartbeats[m] = drive(s, name, node, m)
                    send(m, "rejoin")
            answers.setdefault(member, []).append(
                self._record(s, name, member, mode, plain(conn.receive())))
            i += 1
        return {"heartbeats": heartbeats,
                "answers": _new_leader(answers, previous_leader)}

    @staticmethod
    def _record(s, group: str, member: str, mode: str, answer: dict) -> dict:
        if answer["member_id"] and mode != "?" and \
                answer["error_code"] in ("none", "member_id_required"):
            if s.members.get(member) not in (None, answer["member_id"]):
                s.members[member + "-old"] = s.members[member]     # a replaced static member
            s.members[member] = answer["member_id"]
        if answer["error_code"] == "none":
            state = group_state(s, group)
            state.generation = answer["generation_id"]
            state.leader = answer["leader"]
            if answer["members"]:
                state.members = [s.member_name(m["member_id"]) for m in answer["members"]]
        return {**answer, "member_id": s.member_name(answer["member_id"]),
                "leader": s.member_name(answer["leader"]),
                "members": keyed([{**m, "member_id": s.member_name(m["member_id"])}
                                  for m in answer["members"]], "member_id")}


def _new_leader(answers: dict[str, list[dict]], previous: str | None) -> dict:
    """leader-after-leader-left: when the previous leader is not in the new
    generation, Kafka's choice of the next one is arbitrary (the first key
    of a HashMap of random member ids); what must hold is that the leader
    is a member of the generation and that its answer, and only its,
    carries the member list."""
    lists = {m: a["members"] for m, got in answers.items() for a in got
             if a["error_code"] == "none" and a["members"]}
    generation = next(iter(lists.values()), {})
    if previous is None or not generation or previous in generation:
        return answers
    out = {}
    for m, got in answers.items():
        out[m] = []
        for a in got:
            if a["error_code"] == "none" and a["leader"] in generation:
                a = {**a, "leader": "<a member of the generation>",
                     "members": "<the member list>" if a["members"] and a["leader"] == m
                     else a["members"]}
            out[m].append(a)
    return {"members of the generation": generation, "answers": out}


def _readable(conn, wait: float) -> bool:
    import select
    return bool(select.select([conn.sock], [], [], wait)[0])


def drive(s, group: str, node: int, member: str) -> str:
    """A member's heartbeats until the coordinator stops answering NONE:
    the error it then answers (REBALANCE_IN_PROGRESS when a rebalance
    started)."""
    deadline = time.monotonic() + HEARTBEAT_WAIT
    state = group_state(s, group)
    while True:
        answer = s.call(node, rq.heartbeat(s.v[rq.HEARTBEAT], group, state.generation,
                                           member_id(s, member), STATIC.get(member)),
                        _channel(member))
        if answer.error_code.name != "none" or time.monotonic() > deadline:
            return answer.error_code.name
        time.sleep(0.02)


@dataclass(frozen=True)
class Sync(Step):
    """SyncGroup from each of `members` at the generation last answered
    (+ `generation_delta`): the leader sends an assignment for every member
    of its JoinGroup answer, the others none; all are sent, then read."""
    group: str
    members: tuple[str, ...]
    generation_delta: int = 0
    api = "SyncGroup"

    def run(self, s) -> Any:
        name = s.group(self.group)
        node = s.coordinator(name)
        state = group_state(s, name)
        for member in self.members:
            mid = member_id(s, member)
            assignments = [(s.members[m], b"assignment-" + m.encode())
                           for m in state.members if m in s.members] \
                if mid == state.leader and mid else []
            s.conn(node, _channel(member)).send(rq.sync_group(
                s.v[rq.SYNC_GROUP], name, state.generation + self.generation_delta, mid,
                STATIC.get(member), assignments))
        return {m: plain(s.conn(node, _channel(m)).receive()) for m in self.members}


@dataclass(frozen=True)
class Heartbeat(Step):
    group: str
    member: str                 # a member name, "?" for an unknown id, "" for none
    generation_delta: int = 0
    api = "Heartbeat"

    def run(self, s) -> Any:
        name = s.group(self.group)
        node = s.coordinator(name)
        state = group_state(s, name)
        return plain(s.call(node, rq.heartbeat(
            s.v[rq.HEARTBEAT], name, state.generation + self.generation_delta,
            member_id(s, self.member), STATIC.get(self.member.removesuffix("-old"))),
            _channel(self.member)))


@dataclass(frozen=True)
class Leave(Step):
    group: str
    members: tuple[str, ...]
    api = "LeaveGroup"

    def run(self, s) -> Any:
        name = s.group(self.group)
        node = s.coordinator(name)
        answer = plain(s.call(node, rq.leave_group(
            s.v[rq.LEAVE_GROUP], name,
            [(member_id(s, m), STATIC.get(m.removesuffix("-old"))) for m in self.members])))
        if answer["error_code"] == "none":
            state = group_state(s, name)
            state.members = [m for m in state.members if m not in self.members]
        return {**answer, "members": [{**m, "member_id": s.member_name(m["member_id"])}
                                      for m in answer.get("members", [])]}


@dataclass(frozen=True)
class Commit(Step):
    """OffsetCommit by a member (its id, instance id and the generation
    last answered + delta) or, with member "", as a simple consumer
    (generation -1, no member id)."""
    group: str
    member: str
    # (topic, partition, offset, leader epoch, metadata)
    offsets: tuple[tuple[str, int, int, int, str | None], ...]
    generation_delta: int = 0
    api = "OffsetCommit"

    def run(self, s) -> Any:
        name = s.group(self.group)
        node = s.coordinator(name)
        state = group_state(s, name)
        generation = -1 if self.member == "" else state.generation + self.generation_delta
        answer = plain(s.call(node, rq.offset_commit(
            s.v[rq.OFFSET_COMMIT], name, generation, member_id(s, self.member),
            STATIC.get(self.member.removesuffix("-old")),
            [(s.topic(t), p, o, e, m) for t, p, o, e, m in self.offsets])))
        return {**answer, "topics": {t["name"]: keyed(t["partitions"], "partition_index")
                                     for t in answer["topics"]}}


@dataclass(frozen=True)
class FetchOffsets(Step):
    group: str
    partitions: tuple[tuple[str, tuple[int, ...]], ...] | None     # None: all
    require_stable: bool = False                                    # v7+, KIP-447
    api = "OffsetFetch"

    def run(self, s) -> Any:
        name = s.group(self.group)
        node = s.coordinator(name)
        answer = plain(s.call(node, rq.offset_fetch(
            s.v[rq.OFFSET_FETCH], name,
            None if self.partitions is None else {s.topic(t): list(ps)
                                                  for t, ps in self.partitions},
            self.require_stable)))
        return {**answer, "topics": {t["name"]: keyed(t["partitions"], "partition_index")
                                     for t in answer["topics"]}}
