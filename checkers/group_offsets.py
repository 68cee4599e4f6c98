"""Consumer groups: what the broker remembers of a group's commits, and what
the group's members read because of it.

Owns five anomaly types of docs/anomalies.md: `stale-committed-offset`,
`zombie-commit`, `group-lost`, `resume-skip` and `resume-rewind` (allowed
by default).

The one idea: history index order is real-time order (the writer appends in
real time), so "op A completed before op B was invoked" is A.op_index <
B.invoke_index, and "what had group G committed for partition P when B
started" is a running aggregate over one timeline per (group, partition)
that interleaves commit completions with the invocations of the ops that
ask. State is sized by commits and records, never by offsets.

Choices where the definitions (docs/anomalies.md) are silent:
- Commits overwrite (a later, legitimate commit may be lower), so a
  `committed` op is held to W, the LATEST `ok` commit completed before it
  was invoked (c = W's offset), zombie commits (below) aside. It may still
  return the offset of any commit that could have landed after W: not
  `fail`, not completed before W was invoked (an `info` commit may take
  effect at any later time), and invoked before the `committed` op
  completed. A returned offset above c is not in the catalogue and is
  ignored.
- A zombie commit is an `ok` commit of (G, P) by a process whose last
  rebalance callback for P before the commit was `assigned`, invoked after
  another process of G reported `assigned` for P, an assignment the broker
  took (that process's next event for P is an ok commit): the group had
  given P to someone else and the committer had not been told. Under the eager
  protocol the new owner's generation is one the committer was not in, so
  a broker must refuse the commit (Kafka's GroupCoordinator:
  ILLEGAL_GENERATION or UNKNOWN_MEMBER_ID); an `ok` one is a
  `zombie-commit` (KIP-62's fencing missing), it neither sets W nor
  explains a fetch, and a fetch that returns it is stale. A zombie commit
  can be overwritten by the new owner's next commit within milliseconds,
  before any fetch shows it: the ok answer is the sign that does not race.
- A stale answer is proven only outside the faults that can leave a broker
  cut off from the controller without knowing it (a network partition,
  packet loss, a pause: UNSURE_FAULTS) and GRACE after them. There a
  coordinator that was replaced answers OffsetFetch from its own cache, as
  Kafka's does (librdkafka #2631 shows one answering for minutes): seen on
  the correct broker, a paused coordinator resumed into a partition that cut
  it off from the controller and answered the offsets of 20 s before. An
  answer that overlaps such a fault is undecided (STALE_UNDECIDED), which
  makes the verdict unknown rather than invalid: the history cannot tell a
  stale cache from a lost commit.
- A process belongs to G if it subscribed with G (ok/info), reported a
  rebalance callback of G, or sent any commit for G; its reads of P at any
  time count as deliveries to G.
- Assignments: `assigned` callbacks, plus `subscribe` ops of processes that
  never report `assigned` for that topic (each partition the process reads
  afterwards is then "assigned" at the subscribe). The first read is the
  first record of P (in the order returned) of the process's next ok/info
  poll that returned P, unless another assign/revoke/lost of P for that
  process comes first (then that assignment was never read from). Inside
  one poll: revocations, then assignments, then the records returned.
- c is the highest `ok` commit offset completed before the assignment op
  was invoked (docs/anomalies.md: the highest, not the latest: so a skip is
  reported only past every acknowledged commit).
- A commit "in flight" at an assignment: any commit that is not `fail` and
  overlaps the span from the assignment op's invocation to the first read's
  completion (the position is fetched somewhere in that span: a commit
  racing with the rebalance can legitimately move it). Such assignments are
  skipped; so are those with no `ok` commit before them (auto.offset.reset
  decides).
"""

from __future__ import annotations

import numpy as np

from checkers.collected import Collected, family_result
from checkers.findings import STALE_UNDECIDED, Findings, nullable, pairs
from checkers.grouping import (
    NONE, among, following, joint_keys, latest, lists, min_by_key, order, reduce, starts, take,
)
from checkers.partition import (
    ASSIGNED, FAIL, INFO, LOST, OK, READS, RESET, REVOKED, SUBSCRIBE, Columns, Partition,
)
from checkers.result import CheckResult
from checkers.summary import Summary

FAMILY = "group-offsets"
STALE = "stale-committed-offset"
TYPES = (STALE, "zombie-commit", "group-lost", "resume-skip",
         "resume-rewind")

NEVER = np.iinfo(np.int64).max   # when an `info` op can no longer take effect
# Faults (their start verbs) that can cut a live broker off from the
# controller, and how long after one a replaced broker may still answer:
# it learns of its successor at its next heartbeat (broker.heartbeat.interval.ms,
# 2 s by default), requests queued while it was paused are served first.
UNSURE_FAULTS = frozenset({"start-partition", "packet-loss", "pause"})
GRACE = 3_000_000_000            # ns
UNKNOWN_REASON = (
    "committed ops answered older offsets than an acknowledged commit while a network "
    "partition, packet loss or pause was in force (or within 3 s of its end): a "
    "coordinator cut off from the controller answers from its own cache until it learns "
    "it was replaced, as Kafka's does, so a stale answer then does not prove a lost commit")
READ = READS + 100               # a first read, in an assignment timeline


def findings(part: Partition, out: Findings) -> None:
    commits = part.commits.where(part.commits.type != FAIL)
    settled = np.where(commits.type == OK, commits.op, NEVER)
    zombie, given_at = _zombies(part, commits)
    _zombie_commits(part, out, commits.where(zombie), given_at[zombie])
    _stale(part, out, commits.where(~zombie), settled[~zombie])
    _group_lost(part, out)
    _resumes(part, out, commits, settled)


def _zombie_commits(part: Partition, out: Findings, z: Columns, given_at: np.ndarray) -> None:
    """`zombie-commit`: an ok commit by a zombie (module docstring), which
    a correct broker refuses; evidence: the poll in which the new owner
    reported the partition assigned, and the commit. Not judged while a
    broker may be cut off from the controller (a replaced coordinator, whose
    generation is the zombie's too, may take it)."""
    sure = ~_during(part.context.fault_spans, z.invoke_time, z.time)
    out.cases("zombie-commit", group=_group_names(part, z.group[sure]),
              process=z.process[sure], offset=z.offset[sure],
              evidence=pairs(given_at[sure], z.op[sure]))


def _group_names(part: Partition, codes: np.ndarray) -> np.ndarray:
    return part.groups[codes] if len(codes) else np.zeros(0, dtype=object)


def _zombies(part: Partition, commits: Columns) -> np.ndarray:
    """Per commit: is it a zombie's (module docstring)? One timeline per
    group of rebalance callbacks at their poll's completion and ok commits
    at their invocation."""
    a = part.assignments
    callback = np.isin(a.kind, (ASSIGNED, REVOKED, LOST)) & (a.group != NONE)
    ok = commits.type == OK
    n = int(callback.sum())
    group = np.concatenate([a.group[callback], commits.group[ok]])
    process = np.concatenate([a.process[callback], commits.process[ok]])
    at = np.concatenate([a.op[callback], commits.invoke[ok]])
    kind = np.concatenate([a.kind[callback], np.full(ok.sum(), NONE)])
    # Inside one poll: revocations, then assignments; commits after both.
    rank = np.concatenate([np.where(a.kind[callback] == ASSIGNED, 1, 0),
                           np.full(ok.sum(), 2)])
    is_commit = np.arange(len(group)) >= n

    own = np.full(len(group), NONE)
    by = order(group, process, at, rank)
    first = starts(group[by], process[by])
    own[by] = take(kind[by], latest(~is_commit[by], first), NONE)
    # An assignment the broker took: its process's next row for P is an ok
    # commit, not another callback. One it did not (the member's commits
    # refused, its partitions then `lost`: a coordinator that failed over
    # and restored an older generation) makes no one a zombie.
    next_commit = _upcoming(is_commit[by], first)
    next_callback = _upcoming(~is_commit[by], first)
    taken = np.zeros(len(group), dtype=bool)
    taken[by] = (next_commit != NONE) & ((next_callback == NONE) | (next_commit < next_callback))

    owner = np.full(len(group), NONE)
    by = order(group, at, rank)
    assigned = (kind[by] == ASSIGNED) & taken[by]
    given = latest(assigned, starts(group[by]))
    owner[by] = take(process[by], given, NONE)
    owner_at = np.full(len(group), NONE)
    owner_at[by] = take(at[by], given, NONE)

    zombie = is_commit & (own == ASSIGNED) & (owner != NONE) & (owner != process)
    result = np.zeros(len(commits), dtype=bool)
    result[np.flatnonzero(ok)] = zombie[n:]
    given_at = np.full(len(commits), NONE)
    given_at[np.flatnonzero(ok)] = owner_at[n:]
    return result, given_at


def _upcoming(present: np.ndarray, first: np.ndarray) -> np.ndarray:
    """For each sorted row, the position of the earliest row of its group
    strictly after it where `present` holds; NONE if none (`latest`, run
    backwards)."""
    n = len(present)
    last = np.append(first[1:], True) if n else first
    back = latest(present[::-1], last[::-1], strictly_before=True)[::-1]
    return np.where(back != NONE, n - 1 - back, NONE)


def _stale(part: Partition, out: Findings, commits: Columns, settled: np.ndarray) -> None:
    """`stale-committed-offset`: an ok committed op returned less than (or
    no) offset c of the latest ok commit W completed before it was invoked,
    and no commit that could have landed after W explains the value."""
    k = part.committed
    fetch = k.where(k.type == OK)
    ok = commits.type == OK
    m = int(ok.sum())
    group = np.concatenate([commits.group[ok], fetch.group])
    at = np.concatenate([commits.op[ok], fetch.invoke])
    by = order(group, at)
    is_commit = np.arange(len(group)) < m
    at_sorted = latest(is_commit[by], starts(group[by]))
    w = np.full(len(group), NONE)
    w[by] = take(by, at_sorted, NONE)
    w = w[m:]                                  # per fetch: W's row among the ok commits
    has_w = w != NONE
    w_offset = take(commits.offset[ok], w, NONE)
    suspect = has_w & ((fetch.offset == NONE) | (fetch.offset < w_offset))
    if not suspect.any():
        return
    s = np.flatnonzero(suspect)
    w_invoke = take(commits.invoke[ok], w, NONE)[s]
    w_op = take(commits.op[ok], w, NONE)[s]
    # Candidates that could explain each suspect: same group and offset.
    key, asked = joint_keys((commits.group, commits.offset), (fetch.group[s], fetch.offset[s]))
    by = np.argsort(key, kind="stable")
    key, c_settled, c_invoke = key[by], settled[by], commits.invoke[by]
    lo, hi = np.searchsorted(key, asked, "left"), np.searchsorted(key, asked, "right")
    sizes = np.where(fetch.offset[s] == NONE, 0, hi - lo)
    explained = np.zeros(len(s), dtype=bool)
    if sizes.sum():
        which = np.repeat(np.arange(len(s)), sizes)
        rows = np.repeat(lo - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) \
            + np.arange(sizes.sum())
        hit = (c_settled[rows] > w_invoke[which]) & (c_invoke[rows] < fetch.op[s][which])
        explained[np.unique(which[hit])] = True
    unsure = _during(part.context.fault_spans, fetch.invoke_time[s], fetch.time[s])
    for type_, mask in ((STALE, ~explained & ~unsure),
                        (STALE_UNDECIDED, ~explained & unsure)):
        out.cases(type_, group=_group_names(part, fetch.group[s][mask]),
                  committed_offset=w_offset[s][mask],
                  returned_offset=nullable(fetch.offset[s][mask]),
                  evidence=pairs(w_op[mask], fetch.op[s][mask]))


def _during(spans, starts_: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Per op [start, end] (ns): whether it overlaps an UNSURE_FAULTS span
    or the GRACE after one."""
    hit = np.zeros(len(starts_), dtype=bool)
    for f, begin, end in spans:
        if f in UNSURE_FAULTS:
            hit |= (starts_ <= end + GRACE) & (ends >= begin)
    return hit


def _group_lost(part: Partition, out: Findings) -> None:
    """`group-lost`: a value of the version order below C, the highest ok
    commit of (G, P), that no member of G was delivered."""
    c = part.commits.where(part.commits.type == OK)
    if len(c) == 0:
        return
    offsets, values = part.records
    r = part.reads.where(np.isin(part.reads.type, (OK, INFO)) & part.reads.has_value)
    s = part.sends
    obs = part.observations
    for code in np.unique(c.group):
        mine = c.group == code
        top = order(c.offset[mine], -c.op[mine])[-1]     # highest; ties: the earliest
        committed, commit_index = c.offset[mine][top], c.op[mine][top]
        name = part.groups[code]
        members = np.array([p for g, p in part.context.members if g == name], dtype=np.int64)
        delivered = r.value[np.isin(r.process, members)]
        owed = offsets < committed
        lost = owed & ~among(values, delivered)
        if not lost.any():
            continue
        lost_offsets, lost_values = offsets[lost], values[lost]
        # Evidence: a send of the value (any type), else an op that saw it there.
        sent_by = min_by_key((s.value,), s.op, (lost_values,))
        seen_by = min_by_key((obs.offset, obs.value), obs.op, (lost_offsets, lost_values))
        out.cases("group-lost", group=np.full(lost.sum(), name, dtype=object),
                  value=lost_values, offset=lost_offsets,
                  committed_offset=np.full(lost.sum(), committed),
                  evidence=pairs(np.where(sent_by != NONE, sent_by, seen_by),
                                  np.full(lost.sum(), commit_index)))


def _resumes(part: Partition, out: Findings, commits: Columns, settled: np.ndarray) -> None:
    """`resume-skip` and `resume-rewind`: per group assignment of the
    partition that the member then read, with an ok commit before it and
    none in flight, compare the first read f with c."""
    r = part.reads.where(np.isin(part.reads.type, (OK, INFO)))
    # First reads: per delivering poll, the offset of its first record here.
    by = order(r.process, r.op, r.pos)
    first = starts(r.process[by], r.op[by])
    fr_process, fr_op, fr_offset = r.process[by][first], r.op[by][first], r.offset[by][first]

    # A client's own reset moves no group assignment.
    a = part.assignments.where(part.assignments.kind != RESET)
    rank = np.where(np.isin(a.kind, (REVOKED, LOST)), 0, 1)
    process, op, kind, group, invoke = a.process, a.op, a.kind, a.group, a.invoke
    subscribed = [s for s in part.context.subscriptions if s[0] == part.topic
                  and (s[3], part.topic) not in part.context.assigned_topics]
    if subscribed:
        s_op, s_invoke, s_process = (np.array([s[i] for s in subscribed], np.int64)
                                     for i in (1, 2, 3))
        s_group = part.group_codes(np.array([s[4] for s in subscribed], dtype=object))
        # Only a subscriber that later read the partition was "assigned" it.
        last_read = np.full(len(s_op), NONE)
        if len(fr_op):
            pby = order(fr_process, fr_op)
            pf = starts(fr_process[pby])
            procs, last = fr_process[pby][pf], reduce(np.maximum, fr_op[pby], pf)
            at = np.searchsorted(procs, s_process)
            at = np.minimum(at, len(procs) - 1)
            last_read = np.where(procs[at] == s_process, last[at], NONE)
        keep = (last_read != NONE) & (last_read > s_op)
        process = np.concatenate([process, s_process[keep]])
        op = np.concatenate([op, s_op[keep]])
        kind = np.concatenate([kind, np.full(keep.sum(), SUBSCRIBE)])
        group = np.concatenate([group, s_group[keep]])
        invoke = np.concatenate([invoke, s_invoke[keep]])
        rank = np.concatenate([rank, np.ones(keep.sum(), np.int64)])

    n = len(process)
    process = np.concatenate([process, fr_process])
    op = np.concatenate([op, fr_op])
    kind = np.concatenate([kind, np.full(len(fr_op), READ)])
    group = np.concatenate([group, np.full(len(fr_op), NONE)])
    invoke = np.concatenate([invoke, np.full(len(fr_op), NONE)])
    rank = np.concatenate([rank, np.full(len(fr_op), 2)])
    offset = np.concatenate([np.full(n, NONE), fr_offset])
    by = order(process, op, rank)
    process, op, kind, group, invoke, offset = (x[by] for x in (process, op, kind, group,
                                                                  invoke, offset))
    first = starts(process)
    next_kind, next_op = following(kind, first, NONE), following(op, first, NONE)
    next_offset = following(offset, first, NONE)
    resume = np.isin(kind, (ASSIGNED, SUBSCRIBE)) & (next_kind == READ) & (group != NONE)
    if not resume.any():
        return
    group, process, assignment, assigned_at = group[resume], process[resume], op[resume], \
        invoke[resume]
    read_index, first_read = next_op[resume], next_offset[resume]

    c_offset, c_op = np.full(len(group), NONE), np.full(len(group), NONE)
    last_settled = np.full(len(group), NONE)
    ok = commits.type == OK
    for code in np.unique(group):
        mine = group == code
        done = ok & (commits.group == code)
        if done.any():
            c_offset[mine], c_op[mine] = _highest_before(commits.op[done], commits.offset[done],
                                                         assigned_at[mine])
        asked = commits.group == code
        if asked.any():
            last_settled[mine] = _max_before(commits.invoke[asked], settled[asked],
                                             read_index[mine])
    keep = (c_op != NONE) & ((last_settled == NONE) | (last_settled < assigned_at))
    names = _group_names(part, group)
    evidence = np.column_stack([c_op, assignment, read_index])

    def report(type_: str, mask: np.ndarray) -> None:
        if mask.any():
            out.cases(type_, group=names[mask], process=process[mask],
                      committed_offset=c_offset[mask], first_read_offset=first_read[mask],
                      evidence=lists(np.full(mask.sum(), 3), evidence[mask].ravel()))

    report("resume-rewind", keep & (first_read < c_offset))
    ahead = keep & (first_read > c_offset)
    if ahead.any():
        # Values at offsets in [c, f): a gap of markers or compacted offsets is no skip.
        held = part.value_offsets
        at = np.searchsorted(held, c_offset)
        next_value = np.where(at < len(held), held[np.minimum(at, max(len(held) - 1, 0))]
                              if len(held) else NONE, NONE)
        report("resume-skip", ahead & (next_value != NONE) & (next_value < first_read))


def _highest_before(ops: np.ndarray, offsets: np.ndarray, before: np.ndarray):
    """Per `before`: (offset, op) of the highest commit completed before it
    (ties: the latest), or NONEs."""
    by = np.argsort(ops, kind="stable")
    ops, offsets = ops[by], offsets[by]
    pair_rank = np.lexsort((ops, offsets))     # rank of (offset, op) among commits
    ranks = np.empty(len(ops), np.int64)
    ranks[pair_rank] = np.arange(len(ops))
    best = np.maximum.accumulate(ranks)        # prefix maximum, in completion order
    upto = np.searchsorted(ops, before) - 1    # commits completed before
    found = upto >= 0
    winner = pair_rank[best[np.maximum(upto, 0)]]
    return (np.where(found, offsets[winner], NONE), np.where(found, ops[winner], NONE))


def _max_before(at: np.ndarray, values: np.ndarray, before: np.ndarray) -> np.ndarray:
    """Per `before`: the largest value among rows whose `at` is below it."""
    by = np.argsort(at, kind="stable")
    at, best = at[by], np.maximum.accumulate(values[by])
    upto = np.searchsorted(at, before) - 1
    return np.where(upto >= 0, best[np.maximum(upto, 0)], NONE)


def check(found: Collected, summary: Summary) -> CheckResult:
    result = family_result(found, FAMILY, TYPES)
    undecided = found.counts.get(STALE_UNDECIDED, 0)
    if undecided:
        result.unknown[STALE] = {
            "count": undecided, "reason": UNKNOWN_REASON,
            "examples": found.plain(STALE_UNDECIDED)}
    return result
