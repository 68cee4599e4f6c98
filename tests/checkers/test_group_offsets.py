"""group_offsets: stale-committed-offset, group-lost, resume-skip, resume-rewind.

One history per family; each partition holds one scenario (all three
families are judged per group and partition, so they do not interfere), and
near-misses sit next to the cases. Offsets reach 2**62: state must be sized
by records, never by offsets.
"""

from __future__ import annotations

import itertools

import pytest

from checkers import group_offsets
from tests.checkers.conftest import Ops

pytestmark = pytest.mark.spark

T, G = "t", "g"
BIG = 2 ** 62


def rebalance(kind, *partitions, group=G):
    return {"kind": kind, "group": group,
            "partitions": [{"topic": t, "partition": p} for t, p in partitions]}


def by_partition(cases):
    return {(case["topic"], case["partition"]): case for case in cases}


def test_stale_committed_offset(run_checker):
    ops, proc, at = Ops(), itertools.count(), {}
    # t/0: an ok commit of BIG+5, then a fetch returns BIG+3.
    ops.commit(next(proc), G, T, 0, BIG + 5); at["w0"] = ops.last
    ops.committed(next(proc), G, T, 0, BIG + 3); at["q0"] = ops.last
    # t/1: the broker forgot the commit: none returned.
    ops.commit(next(proc), G, T, 1, 4); at["w1"] = ops.last
    ops.committed(next(proc), G, T, 1, None); at["q1"] = ops.last
    # t/2 (near-miss): an exact answer, then a later, legitimate lower commit.
    ops.commit(next(proc), G, T, 2, 5)
    ops.committed(next(proc), G, T, 2, 5)
    ops.commit(next(proc), G, T, 2, 3)
    ops.committed(next(proc), G, T, 2, 3)
    # t/3 (near-miss): a commit of 3 concurrent with W (5) may land after it.
    a, b = next(proc), next(proc)
    ops.commit(a, G, T, 3, 3, pending=True).commit(b, G, T, 3, 5, pending=True)
    ops.complete(a).complete(b)
    ops.committed(next(proc), G, T, 3, 3)
    # t/4 (near-miss): the fetch began before the commit completed.
    a = next(proc)
    ops.commit(a, G, T, 4, 5, pending=True)
    ops.committed(next(proc), G, T, 4, None)
    ops.complete(a)
    # t/5: a failed commit of 3 concurrent with W explains nothing.
    a = next(proc)
    ops.commit(a, G, T, 5, 3, type="fail", error="rebalance in progress", pending=True)
    ops.commit(next(proc), G, T, 5, 5); at["w5"] = ops.last
    ops.complete(a)
    ops.committed(next(proc), G, T, 5, 3); at["q5"] = ops.last
    # t/6 (near-miss): an info commit of 3, done before W, may land any time.
    ops.commit(next(proc), G, T, 6, 3, type="info", error="timeout")
    ops.commit(next(proc), G, T, 6, 5)
    ops.committed(next(proc), G, T, 6, 3)
    # t/7: a commit of 3 invoked after the fetch completed cannot explain it.
    ops.commit(next(proc), G, T, 7, 5); at["w7"] = ops.last
    ops.committed(next(proc), G, T, 7, 3); at["q7"] = ops.last
    ops.commit(next(proc), G, T, 7, 3)
    # t/8 (near-miss): higher than committed is not in the catalogue; a
    # fetch for another group than the commit's; a failed fetch.
    ops.commit(next(proc), G, T, 8, 5)
    ops.committed(next(proc), G, T, 8, 7)
    ops.committed(next(proc), "other", T, 8, None)
    ops.committed(next(proc), G, T, 8, None, type="fail", error="coordinator not available")

    # t/9: a zombie commit. x owned t/9, the group gave it to y, y
    # committed 5; x, not told, commits 3 and the broker takes it.
    x, y = next(proc), next(proc)
    x9 = x
    ops.poll(x, rebalances=[rebalance("assigned", (T, 9))])
    ops.poll(y, rebalances=[rebalance("assigned", (T, 9))]); at["y9"] = ops.last
    ops.commit(y, G, T, 9, 5); at["w9"] = ops.last
    ops.commit(x, G, T, 9, 3); at["z9"] = ops.last
    ops.committed(y, G, T, 9, 3); at["q9"] = ops.last
    # t/10 (near-miss): x was told (revoked) before y's assignment; its
    # later lower commit after being assigned t/10 again is its right.
    x, y = next(proc), next(proc)
    ops.poll(x, rebalances=[rebalance("assigned", (T, 10))])
    ops.poll(x, rebalances=[rebalance("revoked", (T, 10))])
    ops.poll(y, rebalances=[rebalance("assigned", (T, 10))])
    ops.commit(y, G, T, 10, 5)
    ops.poll(y, rebalances=[rebalance("revoked", (T, 10))])
    ops.poll(x, rebalances=[rebalance("assigned", (T, 10))])
    ops.commit(x, G, T, 10, 3)
    ops.committed(x, G, T, 10, 3)
    # t/11 (near-miss): x's commit was invoked before y's assignment was
    # reported: it may have landed while x still owned the partition.
    x, y = next(proc), next(proc)
    ops.poll(x, rebalances=[rebalance("assigned", (T, 11))])
    ops.commit(x, G, T, 11, 3, pending=True)
    ops.poll(y, rebalances=[rebalance("assigned", (T, 11))])
    ops.commit(y, G, T, 11, 5)
    ops.complete(x)
    ops.committed(y, G, T, 11, 3)
    # t/12 (near-miss): the superseded x lost the partition and says so;
    # the lower commit comes from y itself (a rewind it may make).
    x, y = next(proc), next(proc)
    ops.poll(x, rebalances=[rebalance("assigned", (T, 12))])
    ops.poll(y, rebalances=[rebalance("assigned", (T, 12))])
    ops.commit(y, G, T, 12, 5)
    ops.poll(x, rebalances=[rebalance("lost", (T, 12))])
    ops.commit(y, G, T, 12, 3)
    ops.committed(x, G, T, 12, 3)

    result = run_checker(group_offsets, ops)

    # t/9's zombie commit is also an anomaly of its own; the near-misses
    # t/10 to t/12 are not zombies.
    assert result.counts == {"stale-committed-offset": 5, "zombie-commit": 1}
    assert result.anomalies["zombie-commit"] == [{
        "type": "zombie-commit", "group": G, "topic": T, "partition": 9, "process": x9,
        "offset": 3, "evidence": [at["y9"], at["z9"]]}]
    cases = by_partition(result.anomalies["stale-committed-offset"])
    expected = {0: (BIG + 5, BIG + 3, "w0", "q0"), 1: (4, None, "w1", "q1"),
                5: (5, 3, "w5", "q5"), 7: (5, 3, "w7", "q7"), 9: (5, 3, "w9", "q9")}
    assert cases == {(T, p): {
        "type": "stale-committed-offset", "group": G, "topic": T, "partition": p,
        "committed_offset": c, "returned_offset": r, "evidence": [at[w], at[q]]}
        for p, (c, r, w, q) in expected.items()}


def test_while_a_broker_may_be_cut_off_stale_answers_are_unknown_and_zombies_not_judged(run_checker):
    # One event a second. A replaced coordinator cut off from the
    # controller answers from its cache (as Kafka's does): a stale answer
    # during a partition, a pause or packet loss, or within GRACE (3 s)
    # after one, proves nothing. During a kill, or long after, it does.
    ops, proc, at = Ops(), itertools.count(), {}
    for p in range(4):
        ops.commit(next(proc), G, T, p, 5)
    ops.op(-1, "start-partition", {"kind": "halves"}, {"kind": "halves", "nodes": ["n1"]},
           type="info")
    ops.committed(next(proc), G, T, 0, 3); at["during"] = ops.last      # t/0: unknown
    # t/4: a zombie's ok commit in the partition is not judged (a replaced
    # coordinator shares the zombie's generation).
    x, y = next(proc), next(proc)
    ops.poll(x, rebalances=[rebalance("assigned", (T, 4))])
    ops.poll(y, rebalances=[rebalance("assigned", (T, 4))])
    ops.commit(x, G, T, 4, 1)
    ops.op(-1, "stop-partition", {"kind": "halves"}, {"kind": "halves", "nodes": ["n1"]},
           type="info")
    ops.committed(next(proc), G, T, 1, 3); at["just-after"] = ops.last  # t/1: unknown
    for _ in range(3):
        ops.committed(next(proc), G, T, 3, 5)           # time passes, nothing stale
    ops.committed(next(proc), G, T, 2, 3); at["later"] = ops.last       # t/2: stale
    ops.op(-1, "kill", {"targets": "one"}, {"targets": "one", "nodes": ["n2"]}, type="info")
    ops.committed(next(proc), G, T, 3, 3); at["killed"] = ops.last      # t/3: stale
    for i, event in enumerate(ops.events):
        event["time"] = i * 1_000_000_000

    result = run_checker(group_offsets, ops)

    assert result.counts == {"stale-committed-offset": 2}     # no zombie-commit
    assert {c["partition"]: c["evidence"][1] for c in result.anomalies[
        "stale-committed-offset"]} == {2: at["later"], 3: at["killed"]}
    unknown = result.unknown["stale-committed-offset"]
    assert unknown["count"] == 2 and "cut off from the controller" in unknown["reason"]
    assert sorted(c["partition"] for c in unknown["examples"]) == [0, 1]


def test_a_zombie_needs_a_new_owner_the_broker_took(run_checker):
    # t/0 (near-miss, seen on the correct broker after a restart of every
    # node): y reports t/0 assigned, but its commit is refused and it loses
    # the partition; the coordinator had restored an older generation, in
    # which x's commit is the member's right.
    ops, proc, at = Ops(), itertools.count(), {}
    x, y = next(proc), next(proc)
    ops.poll(x, rebalances=[rebalance("assigned", (T, 0))])
    ops.poll(y, rebalances=[rebalance("assigned", (T, 0))])
    ops.commit(x, G, T, 0, 7)
    ops.commit(y, G, T, 0, 6, type="fail", error="UNKNOWN_MEMBER_ID")
    ops.poll(y, rebalances=[rebalance("lost", (T, 0))])
    # t/1: the same, but y's commit was taken: x's is a zombie's.
    x, y = next(proc), next(proc)
    ops.poll(x, rebalances=[rebalance("assigned", (T, 1))])
    ops.poll(y, rebalances=[rebalance("assigned", (T, 1))]); at["y1"] = ops.last
    ops.commit(x, G, T, 1, 7); at["x1"] = ops.last
    ops.commit(y, G, T, 1, 8)

    result = run_checker(group_offsets, ops)

    assert result.counts == {"zombie-commit": 1}
    assert [(c["partition"], c["evidence"]) for c in result.anomalies["zombie-commit"]] == \
        [(1, [at["y1"], at["x1"]])]


def test_group_lost(run_checker):
    ops, proc, at = Ops(), itertools.count(), {}
    # t/0: a subscriber is delivered 100 (ok poll) and 101 (info poll); a
    # member commits 3, but 102 at 2 reached nobody in the group. 103 at 3
    # is at the commit, not before it (near-miss).
    ops.send(next(proc), T, 0, 100, 101, 102, 103, offsets=[0, 1, 2, 3]); at["s0"] = ops.last
    m = next(proc)
    ops.subscribe(m, G, T)
    ops.poll(m, (T, 0, 0, 100))
    ops.poll(m, (T, 0, 1, 101), type="info", error="timeout")
    ops.commit(next(proc), G, T, 0, 3); at["c0"] = ops.last
    # t/1: 201 (from an info send) was read only by a consumer outside the
    # group; 200 reached a member that joined by a rebalance callback.
    ops.send(next(proc), T, 1, 200, offsets=[0])
    ops.send(next(proc), T, 1, 201, type="info"); at["s1"] = ops.last
    m = next(proc)
    ops.poll(m, (T, 1, 0, 200), rebalances=[rebalance("assigned", (T, 1))])
    outsider = next(proc)
    ops.assign(outsider, (T, 1)).poll(outsider, (T, 1, 1, 201))
    ops.commit(m, G, T, 1, 2); at["c1"] = ops.last
    # t/2 (near-miss): a member only by its commits, in assign mode; the
    # values come from info sends it read.
    ops.send(next(proc), T, 2, 300, 301, type="info")
    m = next(proc)
    ops.assign(m, (T, 2)).poll(m, (T, 2, 0, 300), (T, 2, 1, 301))
    ops.commit(m, G, T, 2, 2)
    # t/3: offsets beyond 2**62; the first record was never delivered. A
    # failed commit higher still does not count.
    ops.send(next(proc), T, 3, 400, 401, offsets=[BIG, BIG + 1]); at["s3"] = ops.last
    m = next(proc)
    ops.subscribe(m, G, T).poll(m, (T, 3, BIG + 1, 401))
    ops.commit(m, G, T, 3, BIG + 2); at["c3"] = ops.last
    ops.commit(m, G, T, 3, BIG + 9, type="fail", error="rebalance in progress")
    # t/4: a value nobody sent, read only by an outsider: the read proves it.
    outsider = next(proc)
    ops.assign(outsider, (T, 4)).poll(outsider, (T, 4, 0, 500)); at["r4"] = ops.last
    ops.commit(next(proc), G, T, 4, 1); at["c4"] = ops.last
    # t/5 (near-miss): nothing was committed ok by the group.
    ops.send(next(proc), T, 5, 600, offsets=[0])
    ops.commit(next(proc), G, T, 5, 1, type="info", error="timeout")

    result = run_checker(group_offsets, ops)

    assert result.counts == {"group-lost": 4}
    expected = {0: (102, 2, 3, "s0", "c0"), 1: (201, 1, 2, "s1", "c1"),
                3: (400, BIG, BIG + 2, "s3", "c3"), 4: (500, 0, 1, "r4", "c4")}
    assert by_partition(result.anomalies["group-lost"]) == {(T, p): {
        "type": "group-lost", "group": G, "topic": T, "partition": p, "value": v,
        "offset": o, "committed_offset": c, "evidence": [at[s], at[k]]}
        for p, (v, o, c, s, k) in expected.items()}


def test_resume_skip_and_rewind(run_checker):
    ops, proc, at = Ops(), itertools.count(), {}

    def first_owner(partition, values, commit_to):
        """Send `values` at offsets 0…, have a member read the first
        `commit_to` of them (its assignment has no commit before it: skipped)
        and commit `commit_to`. Returns that commit's index."""
        ops.send(next(proc), T, partition, *values, offsets=list(range(len(values))))
        owner = next(proc)
        ops.poll(owner, *((T, partition, o, values[o]) for o in range(commit_to)),
                 rebalances=[rebalance("assigned", (T, partition))])
        ops.commit(owner, G, T, partition, commit_to)
        return ops.last

    # t/0: the next owner starts at 4 although 2 was committed: skip.
    at["k0"] = first_owner(0, [10, 11, 12, 13, 14], 2)
    b0 = next(proc)
    ops.poll(b0, (T, 0, 4, 14), rebalances=[rebalance("assigned", (T, 0))])
    at["a0"] = ops.last
    # t/1: the assignment poll returns nothing; the next poll starts at 1
    # although 3 was committed: rewind.
    at["k1"] = first_owner(1, [20, 21, 22, 23], 3)
    b1 = next(proc)
    ops.poll(b1, rebalances=[rebalance("assigned", (T, 1))]); at["a1"] = ops.last
    ops.poll(b1, (T, 1, 1, 21), (T, 1, 2, 22)); at["r1"] = ops.last
    # t/2 (near-miss): resumes exactly at the commit.
    first_owner(2, [30, 31, 32], 2)
    ops.poll(next(proc), (T, 2, 2, 32), rebalances=[rebalance("assigned", (T, 2))])
    # t/3 (near-miss): offset 2 holds no value (a transaction marker).
    ops.send(next(proc), T, 3, 40, 41, 43, offsets=[0, 1, 3])
    a = next(proc)
    ops.poll(a, (T, 3, 0, 40), (T, 3, 1, 41), rebalances=[rebalance("assigned", (T, 3))])
    ops.commit(a, G, T, 3, 2)
    ops.poll(next(proc), (T, 3, 3, 43), rebalances=[rebalance("assigned", (T, 3))])
    # t/4 (near-miss): a commit of 4 is in flight when the assignment starts.
    first_owner(4, [50, 51, 52, 53, 54], 2)
    a = next(proc)
    ops.poll(a, (T, 4, 2, 52), (T, 4, 3, 53))
    ops.commit(a, G, T, 4, 4, pending=True)
    ops.poll(next(proc), (T, 4, 4, 54), rebalances=[rebalance("assigned", (T, 4))])
    ops.complete(a)
    # t/5 (near-miss): a commit of 4 lands while the assignment poll runs.
    first_owner(5, [60, 61, 62, 63, 64], 2)
    a, b = next(proc), next(proc)
    ops.poll(a, (T, 5, 2, 62), (T, 5, 3, 63))
    ops.poll(b, (T, 5, 4, 64), rebalances=[rebalance("assigned", (T, 5))], pending=True)
    ops.commit(a, G, T, 5, 4)
    ops.complete(b)
    # t/6 (near-miss): an assignment never read from (revoked first); the
    # member's next assignment resumes exactly at the newer commit.
    first_owner(6, [70, 71, 72, 73, 74], 2)
    a, b = next(proc), next(proc)
    ops.poll(b, rebalances=[rebalance("assigned", (T, 6))])
    ops.poll(b, rebalances=[rebalance("revoked", (T, 6))])
    ops.poll(a, (T, 6, 2, 72), (T, 6, 3, 73), rebalances=[rebalance("assigned", (T, 6))])
    ops.commit(a, G, T, 6, 4)
    ops.poll(b, (T, 6, 4, 74), rebalances=[rebalance("assigned", (T, 6))])
    # u/0: a subscriber that reports no callbacks starts past the commit of
    # a consumer in assign mode: skip, offsets beyond 2**62.
    ops.send(next(proc), "u", 0, 80, 81, 82, 83, offsets=[BIG + o for o in range(4)])
    x = next(proc)
    ops.assign(x, ("u", 0)).poll(x, ("u", 0, BIG, 80), ("u", 0, BIG + 1, 81))
    ops.commit(x, G, "u", 0, BIG + 2); at["ku"] = ops.last
    y = next(proc)
    ops.subscribe(y, G, "u"); at["su"] = ops.last
    ops.poll(y, ("u", 0, BIG + 3, 83)); at["ru"] = ops.last
    # u/1 (near-miss): an assignment after which the member never reads.
    ops.send(next(proc), "u", 1, 90, offsets=[0])
    ops.commit(next(proc), G, "u", 1, 0)
    ops.poll(next(proc), rebalances=[rebalance("assigned", ("u", 1))])

    result = run_checker(group_offsets, ops)

    assert result.counts == {"resume-skip": 2, "resume-rewind": 1}
    skips = by_partition(result.anomalies["resume-skip"])
    assert skips == {
        (T, 0): {"type": "resume-skip", "group": G, "topic": T, "partition": 0,
                 "process": b0, "committed_offset": 2, "first_read_offset": 4,
                 "evidence": [at["k0"], at["a0"], at["a0"]]},
        ("u", 0): {"type": "resume-skip", "group": G, "topic": "u", "partition": 0,
                   "process": y, "committed_offset": BIG + 2,
                   "first_read_offset": BIG + 3,
                   "evidence": [at["ku"], at["su"], at["ru"]]},
    }
    assert result.anomalies["resume-rewind"] == [{
        "type": "resume-rewind", "group": G, "topic": T, "partition": 1,
        "process": b1,
        "committed_offset": 3, "first_read_offset": 1,
        "evidence": [at["k1"], at["a1"], at["r1"]]}]
