"""Mutations of a model run (model.py) for property tests of the checker
suite: `MUTATIONS` break one thing each, in place; each returns the exact
set of anomaly types the suite must then report (a lost write, say, is also
a skip for the reader that read past it), or None when the run offers no
place for it.
"""

from __future__ import annotations

import copy

from hypothesis import strategies as st

from tests.checkers.model import TOPIC, Op, Run, tp


def _acked(run: Run) -> dict[int, tuple[Op, dict]]:
    """value -> (send op, send) for every acknowledged record."""
    return {s["value"]: (op, s) for op in run.ops if op.f == "send" and op.type == "ok"
            for s in op.done["sends"]}


def _final_polls(run: Run) -> dict[int, Op]:
    return {op.done["reads"][0]["partition"]: op for op in run.ops
            if op.f == "poll" and op.phase == "final" and op.done["reads"]}


def _undelivered(run: Run, partition: int, value: int) -> set:
    """{"group-lost"} if `value` is (still) a record below the group's highest
    commit that no member of the group read; set() otherwise."""
    acked = _acked(run)
    offsets = [r["offset"] for _, r in run.reads() if r["value"] == value
               and r["partition"] == partition]
    if value in acked:
        offsets.append(acked[value][1]["offset"])
    members = {o.process for o in run.ops if o.f == "subscribe"}
    delivered = any(r["value"] == value for o, r in run.reads() if o.process in members)
    commits = [x["offset"] for o in run.ops if o.f == "commit" and o.type == "ok"
               for x in o.done["offsets"] if x["partition"] == partition]
    lost = offsets and not delivered and commits and min(offsets) < max(commits)
    return {"group-lost"} if lost else set()


def _unread(run: Run, partition: int, value: int) -> set:
    """What it means that no poll reads `value` any more: a lost write if an
    ok poll read past its position, else (acknowledged) proven unseen, as the
    model's final phase always reaches the partition ends."""
    if any(r["value"] == value for _, r in run.reads()):
        return set()
    acked = _acked(run)
    if value not in acked:
        return set()  # an indeterminate send nobody read: never evidence
    position = acked[value][1]["offset"]
    later = any(r["partition"] == partition and r["offset"] > position
                for _, r in run.reads())
    return {"lost-write"} if later else {"unseen"}


def _read_by_other_ok_poll(run: Run, value: int, besides: Op) -> bool:
    return any(r["value"] == value for op, r in run.reads()
               if op is not besides and op.type == "ok")


def drop_read_inside_a_poll(run: Run, draw) -> set | None:
    """The final reader misses one acknowledged record: int-poll-skip, and a
    lost write unless someone else read it."""
    acked = _acked(run)
    spots = [(op, i) for op in _final_polls(run).values()
             for i in range(1, len(op.done["reads"]) - 1)
             if op.done["reads"][i]["value"] in acked]
    if not spots:
        return None
    op, i = draw(st.sampled_from(spots))
    value = op.done["reads"].pop(i)["value"]
    return {"int-poll-skip"} | (set() if _read_by_other_ok_poll(run, value, op)
                                else {"lost-write"})


def reorder_a_producer(run: Run, draw) -> set | None:
    """Two records a producer sent one after the other to a partition trade
    places in the log: nonmonotonic-send (int- when one operation sent both)."""
    pairs = []
    for process in {op.process for op in run.ops if op.f == "send"}:
        sends = [(op, s) for op in run.ops if op.f == "send" and op.process == process
                 for s in op.done["sends"]]
        for p in range(run.partitions):
            mine = [(op, s) for op, s in sends if s["partition"] == p]
            for (op1, s1), (op2, s2) in zip(mine, mine[1:]):
                # Alone in their operations' sends to p, so no neighbour inside
                # an operation moves (which would add int-send-skip).
                count = [sum(x["partition"] == p for x in op.done["sends"]) for op in (op1, op2)]
                shape = count[0] == 2 if op1 is op2 else count == [1, 1]
                if op1.type == op2.type == "ok" and shape:
                    pairs.append((op1, s1, op2, s2))
    if not pairs:
        return None
    op1, s1, op2, s2 = draw(st.sampled_from(pairs))
    where = {s1["offset"]: s2["value"], s2["offset"]: s1["value"]}
    s1["offset"], s2["offset"] = s2["offset"], s1["offset"]
    for _, read in run.reads():
        if read["partition"] == s1["partition"] and read["offset"] in where:
            read["value"] = where[read["offset"]]
    return {"int-nonmonotonic-send"} if op1 is op2 else {"nonmonotonic-send"}


def duplicate_a_record(run: Run, draw) -> set | None:
    """The log holds an acknowledged value twice: duplicate."""
    acked = _acked(run)
    if not acked:
        return None
    value = draw(st.sampled_from(sorted(acked)))
    p = acked[value][1]["partition"]
    final = _final_polls(run)[p]
    end = len(final.done["reads"])
    final.done["reads"].append({"topic": TOPIC, "partition": p, "offset": end,
                                "value": value})
    for op in run.ops:
        if op.f == "end-offsets":
            for o in op.done["offsets"]:
                if o["partition"] == p:
                    o["offset"] = end + 1
    return {"duplicate"}


def regress_a_commit(run: Run, draw) -> set | None:
    """The coordinator answers OffsetFetch with less than it acknowledged."""
    spots = [o for op in run.ops if op.f == "committed" for o in op.done["offsets"]
             if o["offset"]]
    if not spots:
        return None
    o = draw(st.sampled_from(spots))
    o["offset"] = draw(st.sampled_from((None, o["offset"] - 1)))
    return {"stale-committed-offset"}


def _resumes(run: Run):
    """(poll, partition, reads of it) for a member's first poll after an
    assigned callback, where a commit for the partition came before."""
    committed: set[int] = set()
    for op in run.ops:
        if op.f == "commit" and op.type == "ok":
            committed.update(o["partition"] for o in op.done["offsets"])
        if op.f == "poll" and op.done.get("rebalances"):
            for p in sorted(committed):
                reads = [r for r in op.done["reads"] if r["partition"] == p]
                if reads:
                    yield op, p, reads


def skip_after_reassignment(run: Run, draw) -> set | None:
    """A new member starts one record past the committed offset: resume-skip,
    and group-lost if no member of the group ever got that record."""
    spots = [(op, p, reads) for op, p, reads in _resumes(run) if len(reads) >= 2]
    if not spots:
        return None
    op, p, reads = draw(st.sampled_from(spots))
    skipped = reads[0]
    op.done["reads"].remove(skipped)
    return {"resume-skip"} | _undelivered(run, p, skipped["value"])


def rewind_after_reassignment(run: Run, draw) -> set | None:
    """A new member starts one record before the committed offset."""
    spots = [(op, p, reads) for op, p, reads in _resumes(run) if reads[0]["offset"] > 0]
    if not spots:
        return None
    op, p, reads = draw(st.sampled_from(spots))
    final = _final_polls(run)[p].done["reads"]
    before = dict(final[reads[0]["offset"] - 1])
    op.done["reads"].insert(op.done["reads"].index(reads[0]), before)
    return {"resume-rewind"}


def fail_a_send_that_was_read(run: Run, draw) -> set | None:
    """The client was told the send failed, yet it was read: aborted-read."""
    spots = [op for op in run.ops if op.f == "send" and op.type == "ok"]
    if not spots:
        return None
    op = draw(st.sampled_from(spots))
    op.type, op.error = "fail", "invalid config"
    op.done = {"sends": [dict(s, offset=None) for s in op.done["sends"]]}
    return {"aborted-read"}


def read_garbage(run: Run, draw) -> set | None:
    """A read returns a value nobody sent: garbage-read, and inconsistent
    offsets when the real record at that offset is known too."""
    spots = list(run.reads())
    if not spots:
        return None
    op, read = draw(st.sampled_from(spots))
    original = read["value"]
    read["value"] = 10**15 + 7
    acked = _acked(run)
    still_there = (original in acked and acked[original][1]["offset"] == read["offset"]) or any(
        r["value"] == original and r["offset"] == read["offset"] for _, r in run.reads())
    # The group must also have received every value below its commit, the
    # garbage one included.
    return ({"garbage-read"} | ({"inconsistent-offsets"} if still_there else set())
            | _undelivered(run, read["partition"], original)
            | _undelivered(run, read["partition"], read["value"])
            | _unread(run, read["partition"], original))


def diverge_a_read(run: Run, draw) -> set | None:
    """A main-phase read returns another value (one an indeterminate send may
    have written) at an offset the final reader saw differently."""
    spots = [(op, r) for op, r in run.reads("main")]
    if not spots:
        return None
    op, read = draw(st.sampled_from(spots))
    process = max(o.process for o in run.ops) + 1
    asked = {"sends": [{"topic": TOPIC, "partition": read["partition"], "value": 10**15 + 9,
                        "offset": None}]}
    run.ops.insert(0, Op(process, "send", asked, copy.deepcopy(asked), type="info",
                         error="timed out"))
    original, read["value"] = read["value"], 10**15 + 9
    return ({"inconsistent-offsets"} | _undelivered(run, read["partition"], original)
            | _undelivered(run, read["partition"], read["value"]))


def _consecutive_polls(run: Run):
    """(earlier poll, later poll, partition) of one consumer, no reset between."""
    last: dict[tuple[int, int], Op] = {}
    for op in run.ops:
        if op.f in ("assign", "subscribe"):
            for key in [k for k in last if k[0] == op.process]:
                del last[key]
        if op.f != "poll" or op.phase != "main":
            continue
        if op.done.get("rebalances"):
            for key in [k for k in last if k[0] == op.process]:
                del last[key]
        for p in sorted({r["partition"] for r in op.done["reads"]}):
            if (op.process, p) in last:
                yield last[(op.process, p)], op, p
            last[(op.process, p)] = op


def reread_across_polls(run: Run, draw) -> set | None:
    """A consumer's next poll starts again at the last record it had read."""
    spots = list(_consecutive_polls(run))
    if not spots:
        return None
    earlier, later, p = draw(st.sampled_from(spots))
    again = dict([r for r in earlier.done["reads"] if r["partition"] == p][-1])
    first = [r for r in later.done["reads"] if r["partition"] == p][0]
    later.done["reads"].insert(later.done["reads"].index(first), again)
    return {"nonmonotonic-poll"}


def reread_inside_a_poll(run: Run, draw) -> set | None:
    """A poll returns one record twice in a row."""
    spots = [(n, i) for n, op in enumerate(run.ops) if op.f == "poll"
             for i in range(len(op.done["reads"]))]
    if not spots:
        return None
    n, i = draw(st.sampled_from(spots))
    reads = run.ops[n].done["reads"]
    reads.insert(i + 1, dict(reads[i]))
    return {"int-nonmonotonic-poll"}


def skip_across_polls(run: Run, draw) -> set | None:
    """A consumer's next poll starts one record late (others read it)."""
    spots = [(e, later, p) for e, later, p in _consecutive_polls(run)
             if sum(r["partition"] == p for r in later.done["reads"]) >= 2]
    if not spots:
        return None
    _, later, p = draw(st.sampled_from(spots))
    skipped = [r for r in later.done["reads"] if r["partition"] == p][0]
    later.done["reads"].remove(skipped)
    return {"poll-skip"} | _undelivered(run, p, skipped["value"])


def lose_an_acknowledged_tail(run: Run, draw) -> set | None:
    """An acknowledged record past the end the final phase saw: unseen, proven."""
    p = draw(st.integers(0, run.partitions - 1))
    end = len(_final_polls(run).get(p, Op(0, "poll", {}, {"reads": []})).done["reads"])
    process = max(o.process for o in run.ops) + 1
    asked = {"sends": [{"topic": TOPIC, "partition": p, "value": 10**15 + 11, "offset": None}]}
    done = {"sends": [dict(asked["sends"][0], offset=end)]}
    first_final = next(i for i, o in enumerate(run.ops) if o.phase == "final")
    run.ops.insert(first_final, Op(process, "send", asked, done))
    return {"unseen"}


def answer_a_stale_end(run: Run, draw) -> set | None:
    """The final phase's end of a partition is answered at (or below) an
    offset a main-phase poll had already read (KAFKA-2334); the final reads
    read past it as before."""
    read = [r for op in run.ops if op.f == "poll" and op.type == "ok" and op.phase == "main"
            for r in op.done["reads"]]
    if not read:
        return None
    r = draw(st.sampled_from(read))
    end = next(o for op in run.ops if op.f == "end-offsets" for o in op.done["offsets"]
               if o["partition"] == r["partition"])
    end["offset"] = draw(st.integers(0, r["offset"]))
    return {"stale-end"}


def answer_an_end_in_a_later_epoch(run: Run, draw) -> set | None:
    """An end asked during the main phase, after a poll read a record
    appended in epoch 3, is answered at or below that record's offset by the
    leader of epoch 4: a new leader's stale high watermark (KAFKA-2334)."""
    return _end_after_a_read(run, draw, answer_epoch=4)


def answer_an_end_from_a_replaced_leader(run: Run, draw) -> set | None:
    """The near-miss: the same answer in epoch 3, the record's own, as a
    replaced leader that has not learned it answers; nothing to report."""
    return _end_after_a_read(run, draw, answer_epoch=3)


def _end_after_a_read(run: Run, draw, answer_epoch: int) -> set | None:
    polls = [i for i, op in enumerate(run.ops) if op.f == "poll" and op.type == "ok"
             and op.phase == "main" and op.done["reads"]]
    if not polls:
        return None
    at = draw(st.sampled_from(polls))
    read = draw(st.sampled_from(run.ops[at].done["reads"]))
    read["epoch"] = 3
    process = max(o.process for o in run.ops) + 1
    end = dict(tp(read["partition"]), offset=draw(st.integers(0, read["offset"])),
               epoch=answer_epoch)
    run.ops.insert(at + 1, Op(process, "end-offsets", {"partitions": [tp(read["partition"])]},
                              {"offsets": [end]}))
    return {"stale-end"} if answer_epoch > read["epoch"] else set()


MUTATIONS = (
    drop_read_inside_a_poll, reorder_a_producer, duplicate_a_record, regress_a_commit,
    skip_after_reassignment, rewind_after_reassignment, fail_a_send_that_was_read,
    read_garbage, diverge_a_read, reread_across_polls, reread_inside_a_poll,
    skip_across_polls, lose_an_acknowledged_tail, answer_a_stale_end,
    answer_an_end_in_a_later_epoch, answer_an_end_from_a_replaced_leader,
)
