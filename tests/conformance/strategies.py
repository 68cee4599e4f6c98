"""Hypothesis strategies: scenarios (lists of steps) per area, for a
cluster of `size` brokers. Each scenario starts from nothing of its own
(its topics and groups are named per example), so examples never see each
other's state.

Choices are drawn where the two brokers could differ: valid and invalid
partition counts, replication factors, manual assignments and configs;
acks; record timestamps out of order; fetch offsets and leader epochs in
and out of range; idempotent sequences in order, duplicated, with gaps,
from old and bumped epochs; group moves with right, stale and unknown
generations and members. Values that one broker refuses on purpose are
sent where nothing else depends on them (validate-only requests), so a
documented divergence does not cascade into the rest of a scenario.
"""

from __future__ import annotations

import time

from hypothesis import strategies as st

from tests.conformance import requests as rq
from tests.conformance.records import Rec
from tests.conformance.steps_groups import (
    Commit, FetchOffsets, FindCoordinator, Heartbeat, Join, Leave, Sync,
)
from tests.conformance.steps_records import (
    Batch, Fetch, InitProducerId, ListOffsets, OffsetForLeaderEpoch, Produce,
)
from tests.conformance.steps_topics import (
    AlterConfigs, CreateTopics, DescribeConfigs, Metadata, TopicSpec,
)

HOUR_MS = 3_600_000
# Record timestamps: T0 + a few seconds, CreateTime an hour or two in the
# past. Not a fixed date: Kafka deletes a segment whose newest record is
# older than retention.ms (7 days), log.initial.task.delay.ms (30 s) after
# it starts, whatever log.retention.check.interval.ms says of the checks
# after that; with 2023 timestamps a scenario's records went mid-example (a
# fetch from 0 out of range), which this broker never does. Not ahead of
# the clock either, which Kafka may refuse (log.message.timestamp.after.max.ms).
T0 = (time.time_ns() // 1_000_000 // HOUR_MS - 1) * HOUR_MS

# Topic configs both brokers accept and honour alike: for topics the rest
# of a scenario uses.
SAFE_CONFIGS = {
    "min.insync.replicas": ["1", "2", "3"],
    "unclean.leader.election.enable": ["true", "false"],
    "max.message.bytes": ["1048588", "2000", "100000"],
    "segment.bytes": ["1048576", "2097152"],
    "index.interval.bytes": ["4096", "100"],
    "flush.messages": ["1", "9223372036854775807"],
    "flush.ms": ["1000"],
    "cleanup.policy": ["delete"],
    "retention.ms": ["-1", "604800000"],
    "retention.bytes": ["-1"],
    "compression.type": ["producer"],
    "message.timestamp.type": ["CreateTime"],
    "delete.retention.ms": ["1000"],
    "segment.ms": ["3600000"],
    "preallocate": ["true", "false"],
    "min.cleanable.dirty.ratio": ["0.3"],
}
# Anything: invalid values, refused keys, keys of one Kafka version only.
ANY_CONFIGS = {
    **{k: v + ["x"] for k, v in SAFE_CONFIGS.items()},
    "min.insync.replicas": ["0", "-1", " 2 ", "two", "", None],
    "unclean.leader.election.enable": ["TRUE", "yes"],
    "segment.bytes": ["1000", "14"],
    "cleanup.policy": ["compact", "delete,compact", "shred"],
    "retention.ms": ["1000", "-2"],
    "compression.type": ["gzip", "zstd", "none"],
    "message.timestamp.type": ["LogAppendTime"],
    "message.timestamp.after.max.ms": ["3600000", "9223372036854775807"],
    "message.format.version": ["3.0-IV1"],
    "compression.gzip.level": ["5"],
    "no.such.config": ["1"],
    "max.message.bytes": ["-5"],
}
TOPIC_NAMES = ["t0", "t1", "t2", "c.x", "c_x"]
RAW_NAMES = ["!bad name", "!" + "a" * 250, "!.", "!..", "!__consumer_offsets", "!has/slash"]


def configs(pool: dict, max_size: int) -> st.SearchStrategy:
    pairs = st.sampled_from(sorted(pool)).flatmap(
        lambda k: st.tuples(st.just(k), st.sampled_from(pool[k])))
    return st.lists(pairs, max_size=max_size, unique_by=lambda kv: kv[0]).map(tuple)


@st.composite
def assignment(draw, size: int, partitions: int):
    """Manual replica assignments: mostly valid, sometimes with a broker
    that does not exist, a repeated broker, uneven lengths or a gap."""
    brokers = list(range(1, size + 1))
    rf = draw(st.integers(1, size))
    rows = []
    for p in range(partitions):
        row = draw(st.permutations(brokers))[:rf]
        rows.append((p, tuple(row)))
    flaw = draw(st.sampled_from([None] * 6 + ["unknown", "repeat", "uneven", "gap", "empty"]))
    if flaw == "unknown":
        rows[0] = (0, rows[0][1][:-1] + (size + 1,))
    elif flaw == "repeat":
        rows[0] = (0, rows[0][1] + rows[0][1][:1])
    elif flaw == "uneven" and partitions > 1:
        rows[-1] = (rows[-1][0], rows[-1][1] + ((rows[-1][1][0] % size) + 1,))
    elif flaw == "gap":
        rows[-1] = (rows[-1][0] + 1, rows[-1][1])
    elif flaw == "empty":
        rows[0] = (0, ())
    return tuple(rows)


@st.composite
def topic_spec(draw, size: int, name: str, pool: dict):
    if draw(st.booleans()):
        partitions = draw(st.integers(1, 3))
        return TopicSpec(name, -1, -1, draw(assignment(size, partitions)), draw(configs(pool, 3)))
    return TopicSpec(name, draw(st.sampled_from([-1, 0, 1, 2, 3])),
                     draw(st.sampled_from([-1, 0, 1, 2, 3, 4])), None, draw(configs(pool, 3)))


@st.composite
def topic_scenarios(draw, size: int):
    steps = []
    names = draw(st.lists(st.sampled_from(TOPIC_NAMES), min_size=1, max_size=3, unique=True))
    if draw(st.booleans()):
        probes = [draw(topic_spec(size, n, ANY_CONFIGS)) for n in names]
        probes += [TopicSpec(r) for r in draw(st.lists(st.sampled_from(RAW_NAMES), max_size=2))]
        steps.append(CreateTopics(tuple(probes), validate_only=True))
    specs = tuple(draw(topic_spec(size, n, SAFE_CONFIGS)) for n in names)
    steps.append(CreateTopics(specs))
    if draw(st.booleans()):
        steps.append(CreateTopics(specs[:1]))                  # already exists
    steps.append(Metadata(tuple(names) + tuple(draw(st.lists(
        st.sampled_from(["nope", "!__consumer_offsets"]), max_size=2, unique=True)))))
    keys = st.none() | st.lists(st.sampled_from(sorted(ANY_CONFIGS)), min_size=1,
                                max_size=4, unique=True).map(tuple)
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["describe", "alter", "alter", "probe-alter"]))
        name = draw(st.sampled_from(names + ["nope"]))
        if kind == "describe":
            name = draw(st.sampled_from([name] * 4 + ["!__consumer_offsets"]))
            steps.append(DescribeConfigs(((rq.TOPIC_RESOURCE, name, draw(keys)),),
                                         synonyms=draw(st.booleans())))
        else:
            # What is really changed both brokers take alike (SET and DELETE
            # of safe values), so that no accepted divergence cascades into
            # later steps; everything else is sent validate-only.
            pool = SAFE_CONFIGS if kind == "alter" else ANY_CONFIGS
            ops = [rq.SET, rq.DELETE] if kind == "alter" else \
                [rq.SET, rq.SET, rq.DELETE, rq.APPEND, rq.SUBTRACT, 7]
            changes = draw(st.lists(
                st.sampled_from(sorted(pool)).flatmap(lambda k: st.tuples(
                    st.just(k), st.sampled_from(ops), st.sampled_from(pool[k]))),
                min_size=1, max_size=3))
            steps.append(AlterConfigs(((rq.TOPIC_RESOURCE, name, tuple(changes)),),
                                      validate_only=kind == "probe-alter"))
    steps.append(DescribeConfigs(tuple((rq.TOPIC_RESOURCE, n, None) for n in names),
                                 synonyms=True))
    if draw(st.booleans()):
        node = str(draw(st.integers(1, size + 1)))
        steps.append(DescribeConfigs(((rq.BROKER_RESOURCE, node, BROKER_KEYS),),
                                     synonyms=draw(st.booleans())))
    if draw(st.integers(0, 4)) == 0:      # resource types beyond TOPIC and BROKER
        kind = draw(st.sampled_from([8, 16, 32, 9]))
        name = {8: "1", 16: "metrics", 32: "a-group", 9: "x"}[kind]
        if draw(st.booleans()):
            steps.append(DescribeConfigs(((rq.TOPIC_RESOURCE, names[0], ("retention.ms",)),
                                          (kind, name, None))))
        else:
            steps.append(AlterConfigs(((kind, name, ()),), validate_only=True))
    if draw(st.booleans()):
        node = draw(st.sampled_from(["1", "", str(size + 1)]))
        changes = draw(st.lists(st.tuples(
            st.sampled_from(BROKER_KEYS + ("log.flush.interval.ms", "replica.lag.time.max.ms",
                                           "no.such.setting")),
            st.sampled_from([rq.SET, rq.SET, rq.DELETE]),
            st.sampled_from(["1", "5000", "x"])), min_size=1, max_size=2,
            unique_by=lambda c: c[0]))
        steps.append(AlterConfigs(((rq.BROKER_RESOURCE, node, tuple(changes)),),
                                  validate_only=True))
    return steps


# Broker settings both have (the reference broker's SETTINGS Kafka knows).
BROKER_KEYS = ("num.partitions", "default.replication.factor", "min.insync.replicas",
               "unclean.leader.election.enable", "message.max.bytes", "log.segment.bytes",
               "offsets.topic.num.partitions", "group.min.session.timeout.ms")


def records(draw, n: int | None = None) -> tuple[Rec, ...]:
    n = n if n is not None else draw(st.integers(1, 4))
    return tuple(Rec(value=draw(st.sampled_from([b"v", b"", None, b"x" * 40])),
                     key=draw(st.sampled_from([None, b"k", b"key-2"])),
                     timestamp=T0 + draw(st.integers(0, 6)) * 1000,
                     headers=draw(st.sampled_from([(), (("h", b"1"),), (("h", None),)])))
                 for _ in range(n))


@st.composite
def record_scenarios(draw, size: int):
    partitions = draw(st.integers(1, 2))
    rf = draw(st.integers(1, size))
    min_isr = draw(st.integers(1, rf))
    configs = (("min.insync.replicas", str(min_isr)),)
    if draw(st.integers(0, 3)) == 0:        # batches of 3-4 40-byte values are too large
        configs += (("max.message.bytes", "200"),)
    steps = [CreateTopics((TopicSpec("t0", partitions, rf, None, configs),))]
    if draw(st.integers(0, 9)) == 0:     # a partition that cannot take acks=all
        steps.append(CreateTopics((TopicSpec("t1", 1, rf, None,
                                             (("min.insync.replicas", str(rf + 1)),)),)))
        steps.append(Produce("t1", 0, Batch(records(draw)), -1))
    part = st.integers(0, partitions - 1)
    epochs = st.sampled_from([-1, -1, 0, 1])
    via = st.sampled_from(["leader"] * 6 + ["follower", "other"]) if size > 1 else \
        st.just("leader")
    for _ in range(draw(st.integers(3, 12))):
        kind = draw(st.sampled_from(["produce"] * 4 + ["fetch"] * 2 + ["list", "list", "epoch",
                                                                      "bad-partition"]))
        if kind == "produce":
            flaw = draw(st.sampled_from([None] * 8 + ["corrupt", "two"]))
            acks = draw(st.sampled_from([0, 1, -1] * 5 + [2]))
            steps.append(Produce("t0", draw(part), Batch(records(draw), gzip=draw(st.booleans()),
                                                         flaw=flaw), acks, draw(via)))
        elif kind == "bad-partition":
            steps.append(Produce("t0", partitions, Batch(records(draw)),
                                 draw(st.sampled_from([0, 1, -1]))))
        elif kind == "fetch":
            offset = draw(st.sampled_from([0, 0, 1, 2, 3, 5, 9, 30, -1]))
            steps.append(Fetch("t0", draw(part), offset,
                               draw(epochs), draw(st.sampled_from([1 << 20, 1 << 20, 1])),
                               draw(via)))
        elif kind == "list":
            ts = draw(st.sampled_from([rq.EARLIEST, rq.LATEST, -3, -5]) |
                      st.builds(lambda k, ms: T0 + k * 1000 + ms, st.integers(-1, 8),
                                st.sampled_from([0, 1, 999])))
            steps.append(ListOffsets("t0", draw(part), ts, draw(epochs), draw(via)))
        else:
            epoch = draw(st.sampled_from([-1, 0, 1, 2]))
            steps.append(OffsetForLeaderEpoch("t0", draw(part), epoch,
                                              draw(epochs), draw(via)))
    steps.append(Fetch("t0", 0, 0))
    return steps


@st.composite
def producer_scenarios(draw, size: int):
    rf = draw(st.integers(1, size))
    steps = [CreateTopics((TopicSpec("t0", 1, rf),)), InitProducerId("p0")]
    producers = ["p0"]
    if draw(st.booleans()):
        steps.append(InitProducerId("p1"))
        producers.append("p1")
    sent: dict[tuple[str, int], list[tuple[int, int]]] = {}    # (producer, epoch) -> (seq, n)
    for _ in range(draw(st.integers(2, 10))):
        if draw(st.integers(0, 5)) == 0:
            steps.append(draw(st.sampled_from([Fetch("t0", 0, 0),
                                               ListOffsets("t0", 0, rq.LATEST)])))
            continue
        producer = draw(st.sampled_from(producers))
        epoch = draw(st.sampled_from([0, 0, 0, 0, 1, 2]))
        history = sent.setdefault((producer, epoch), [])
        n = draw(st.integers(1, 3))
        following = history[-1][0] + history[-1][1] if history else 0
        how = draw(st.sampled_from(["next"] * 4 + ["duplicate", "gap", "zero", "old"]))
        if how == "duplicate" and history:
            seq, n = draw(st.sampled_from(history[-6:]))
        elif how == "gap":
            seq = following + draw(st.integers(1, 3))
        elif how == "zero":
            seq = 0
        elif how == "old" and len(history) > 5:
            seq, n = history[-7] if len(history) > 6 else history[0]
        else:
            seq = following
        history.append((seq, n))
        steps.append(Produce("t0", 0, Batch(records(draw, n), producer, epoch, seq),
                             draw(st.sampled_from([1, -1]))))
    steps.append(Fetch("t0", 0, 0))
    return steps


@st.composite
def group_scenarios(draw, size: int):
    """Moves on one group with a model of what it should be (members in
    join order; empty, completing, stable or preparing), so that every
    JoinGroup that waits for a rebalance has the members it waits for
    driven; the brokers' answers are what is compared."""
    g = "g0"
    offsets = st.lists(st.tuples(st.sampled_from(["t0", "nx"]), st.integers(0, 2),
                                 st.integers(0, 50), st.sampled_from([-1, 0, 3]),
                                 st.sampled_from([None, "", "meta"])),
                       min_size=1, max_size=3, unique_by=lambda o: o[:2]).map(tuple)
    steps = [CreateTopics((TopicSpec("t0", 2, min(size, 2)),)), FindCoordinator(g)]
    if draw(st.integers(0, 4)) == 0:
        steps.append(FindCoordinator(draw(st.sampled_from(["!", "!" + "g" * 300]))))
    members: list[str] = []
    state = "empty"
    for _ in range(draw(st.integers(3, 14))):
        moves = ["heartbeat", "commit", "fetch"]
        if state in ("empty", "stable"):
            moves += ["add"] * 4 + (["replace"] if "s" in members and state == "stable" else [])
        if state == "completing":
            moves += ["sync"] * 4
        if state in ("completing", "stable") and members:
            moves += ["bad-sync"]
        if state in ("stable", "completing") and members:
            moves += ["leave"]
        if state == "preparing":
            moves += ["rejoin"] * 4
        move = draw(st.sampled_from(moves))
        if move == "add":
            free = [m for m in ("a", "b", "s", "t", "z", "q") if m not in members]
            if not free:
                continue
            m = draw(st.sampled_from(free))
            # z speaks only a protocol no other member has: it joins an
            # empty group only, and nobody joins a group it is in
            # (INCONSISTENT_GROUP_PROTOCOL, at once: nobody is driven);
            # q's session timeout is below the minimum: it never joins.
            compatible = m != "q" and (not members or ("z" not in members and m != "z"))
            others = tuple(members) if compatible else ()
            if m in ("s", "t"):
                steps.append(Join(g, ((m, "new"),), others))
            else:
                steps.append(Join(g, ((m, "new"),)))            # MEMBER_ID_REQUIRED
                if compatible:
                    steps.append(Join(g, ((m, "rejoin"),), others))
            if compatible:
                members.append(m)
                state = "completing"
        elif move == "sync":
            steps.append(Sync(g, tuple(members)))
            state = "stable"
        elif move == "bad-sync":          # answered at once: nothing changes
            who = draw(st.sampled_from(members + ["?"]))
            delta = draw(st.sampled_from([-1, 1])) if who != "?" else 0
            steps.append(Sync(g, (who,), delta))
        elif move == "rejoin":
            steps.append(Join(g, tuple((m, "rejoin") for m in members)))
            state = "completing"
        elif move == "replace":
            steps.append(Join(g, (("s", "new"),)))
            steps.append(Heartbeat(g, "s-old"))
        elif move == "leave":
            leaving = draw(st.lists(st.sampled_from(members), min_size=1, unique=True))
            extra = draw(st.sampled_from([(), ("?",)]))
            steps.append(Leave(g, tuple(leaving) + extra))
            members = [m for m in members if m not in leaving]
            state = "preparing" if members else "empty"
        elif move == "heartbeat":
            who = draw(st.sampled_from(members + ["?", ""] if members else ["?", ""]))
            steps.append(Heartbeat(g, who, draw(st.sampled_from([0, 0, -1, 1]))))
        elif move == "commit":
            who = draw(st.sampled_from(members + ["", "?"] if members else ["", "?"]))
            steps.append(Commit(g, who, draw(offsets), draw(st.sampled_from([0, 0, -1, 1]))))
        else:
            steps.append(FetchOffsets(g, draw(st.none() | st.just(
                (("t0", (0, 1)), ("nx", (0,)))))))
    steps.append(FetchOffsets(g, None))
    return steps


def transaction_scenarios(size: int):
    """In a module of its own (strategies_transactions.py), which draws
    this one's timestamps."""
    from tests.conformance.strategies_transactions import transaction_scenarios as scenarios
    return scenarios(size)


AREAS = {
    "topics": topic_scenarios,
    "records": record_scenarios,
    "producer": producer_scenarios,
    "groups": group_scenarios,
    "transactions": transaction_scenarios,
}
