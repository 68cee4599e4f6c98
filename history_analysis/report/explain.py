"""Anomalies in plain words: what each type means (docs/anomalies.md says
how it is judged), and for each case a sentence built from the history —
who sent the value, when, at which offset, who read the offsets around it
— so a reader sees why it counts, for example

    value 17 was acknowledged at offset 40 of t-2 by process 3 at 12.4 s;
    offsets 41–90 were read by processes 5 and 8; no read ever returned 17

Lookups go through `Evidence`, which filters the big tables once for all
the values and partitions the cases name.
"""

from __future__ import annotations

from collections import defaultdict

import pyarrow as pa
import pyarrow.compute as pc

from history_analysis.report.run_data import RunData

MEANING = {
    "lost-write": "A write that certainly happened was never read back, although reads did "
                  "return later offsets of the same partition: the record disappeared from "
                  "the log.",
    "unseen": "The broker acknowledged the write, no read ever returned it, and the final "
              "reads (after every fault was healed) read the partition to the end the "
              "broker reported. The acknowledged record is gone.",
    "stale-end": "The broker reported a partition's end (ListOffsets, the high watermark) "
                 "below an offset a consumer had already been given: the end went back. A "
                 "new leader answered with a high watermark that had not caught up "
                 "(KAFKA-2334), or consumers had read records the log did not commit.",
    "duplicate": "One value, sent once, is at more than one offset or in more than one "
                 "partition: the record was written twice.",
    "inconsistent-offsets": "Readers (or a reader and the producer's acknowledgement) disagree "
                            "about which value one offset holds: the replicas' logs diverged.",
    "garbage-read": "A read returned a value no operation ever sent, or bytes that do not "
                    "decode as a value.",
    "aborted-read": "A read returned a value whose send failed definitely: the client was told "
                    "the record was not written.",
    "nonmonotonic-send": "One producer sent two values to a partition in two operations, one "
                         "after the other, and the later one landed at an earlier offset: the "
                         "log reordered the producer's writes.",
    "int-nonmonotonic-send": "Inside one send operation, a later record landed at an earlier "
                             "offset than the record before it.",
    "int-send-skip": "Inside one send operation, two consecutive records to a partition are not "
                     "adjacent: another producer's records came between. Normal for Kafka; "
                     "reported, allowed.",
    "nonmonotonic-poll": "A consumer went backwards: its next poll of a partition started at or "
                         "before the last offset it had read, and nobody told it to seek.",
    "poll-skip": "A consumer jumped forwards: between two of its polls of a partition, records "
                 "exist that it never read, and nobody told it to move.",
    "int-nonmonotonic-poll": "Inside one poll, the records of a partition went backwards.",
    "int-poll-skip": "Inside one poll, the records of a partition skipped over records that "
                     "exist.",
    "stale-committed-offset": "The broker acknowledged a commit of a group's offset, and a "
                              "later fetch of the committed offsets returned a lower one, or "
                              "none: the broker forgot a commit.",
    "zombie-commit": "The broker accepted a commit from a consumer its group had already "
                     "replaced (the partition was given to another member, and this one "
                     "had not rejoined): a correct broker refuses it, ILLEGAL_GENERATION "
                     "or UNKNOWN_MEMBER_ID (KIP-62).",
    "group-lost": "A consumer group committed past a record that no member of the group was "
                  "ever given: at-least-once delivery is broken.",
    "resume-skip": "A member that was given a partition started reading after the group's "
                   "committed offset: the records in between were skipped.",
    "precommitted-read": "A read returned a value of a transaction before the client had asked "
                         "to commit it: a read_committed consumer saw a transaction still "
                         "open (an inclusive last stable offset does this).",
    "torn-transaction": "A committed transaction is visible in some of its partitions and "
                        "lost in others (read past, never read): the commit was not atomic.",
    "stuck-lso": "After the faults, with every producer stopped and longer than a transaction "
                 "may stay open, a partition's last stable offset stayed below its high "
                 "watermark: a transaction hangs, and read_committed consumers see nothing "
                 "after it.",
    "eos-duplicate": "A consume-transform-produce pipeline committed its output for one "
                     "input twice: two transactions processed the same record and both "
                     "committed (a zombie member not fenced, or offsets a coordinator lost).",
    "eos-missing": "A consume-transform-produce pipeline's group committed its offsets past "
                   "an input record whose output was never committed: the record was "
                   "skipped, not processed exactly once.",
    "resume-rewind": "A member that was given a partition started reading before the group's "
                     "committed offset and re-delivered committed records. Normal for Kafka; "
                     "reported, allowed.",
}


def _tp(case: dict) -> str:
    return f"{case.get('topic')}-{case.get('partition')}"


def _who(processes) -> str:
    names = sorted({int(p) for p in processes})
    if not names:
        return "nobody"
    words = [str(p) for p in names[:6]] + ([f"{len(names) - 6} more"] if len(names) > 6 else [])
    shown = words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
    return ("process " if len(names) == 1 else "processes ") + shown


class Evidence:
    """The sends and reads of the values and partitions the cases name,
    filtered out of the run's tables once."""

    def __init__(self, data: RunData, cases: list[dict]):
        values = {v for c in cases for v in [c.get("value"), *(c.get("values") or [])]
                  if v is not None}
        value_array = pa.array(sorted(values), pa.int64())
        self.sends = _by_value(data.sends.filter(pc.is_in(data.sends["value"], value_array)))
        self.reads = _by_value(data.reads.filter(pc.is_in(data.reads["value"], value_array)))
        self._data = data
        self._partitions: dict[tuple, pa.Table] = {}

    def partition_reads(self, topic: str, partition: int) -> pa.Table:
        key = (topic, partition)
        if key not in self._partitions:
            reads = self._data.reads
            self._partitions[key] = reads.filter(pc.and_(
                pc.equal(reads["topic"], topic), pc.equal(reads["partition"], partition)))
        return self._partitions[key]

    def send(self, value) -> str:
        rows = self.sends.get(value, [])
        if not rows:
            return f"no operation sent {value}"
        done = ", ".join(f"{_outcome(r['type'])} by process {r['process']}"
                         + (f" at offset {r['offset']}" if r["offset"] is not None else "")
                         + (f" at {r['time']:.2f} s" if r["time"] is not None else "")
                         for r in rows[:3])
        return f"value {value} was sent: {done}"

    def reads_of(self, value) -> str:
        rows = self.reads.get(value, [])
        if not rows:
            return f"no read ever returned {value}"
        places = sorted({(r["topic"], r["partition"], r["offset"]) for r in rows})
        where = "; ".join(f"at offset {o} of {t}-{p} by "
                          + _who(r["process"] for r in rows if (r["topic"], r["partition"],
                                                                r["offset"]) == (t, p, o))
                          for t, p, o in places[:4])
        return f"{value} was read {len(rows)} time(s): {where}"

    def read_after(self, topic: str, partition: int, offset: int) -> str:
        reads = self.partition_reads(topic, partition)
        later = reads.filter(pc.greater(reads["offset"], offset))
        if not len(later):
            return f"no read returned an offset after {offset} of {topic}-{partition}"
        lo, hi = pc.min(later["offset"]).as_py(), pc.max(later["offset"]).as_py()
        processes = pc.unique(later["process"]).to_pylist()
        return f"offsets {lo}–{hi} of {topic}-{partition} were read by {_who(processes)}"

    def holders(self, topic: str, partition: int) -> str:
        """Who held the partition's last stable offset, as the final phase
        asked (workloads/open_transactions.py), or "" when it did not ask."""
        final = (self._data.test.get("outcome") or {}).get("final") or {}
        return held_by(final.get("open_transactions"), topic, partition)


def held_by(entries: list[dict] | None, topic: str, partition: int) -> str:
    """The clause naming the transactions open on a partition at the end of
    the final phase's wait, as its leader and their coordinators told them."""
    if entries is None:
        return ""
    errors = [e["error"] for e in entries if "error" in e]
    if errors:
        return f"; asking who held it failed: {errors[0]}"
    held = [e for e in entries if (e["topic"], e["partition"]) == (topic, partition)]
    if not held:
        return ("; asked right after, its leader named no open transaction there (the "
                "last stable offset moved at the last moment)")
    told = []
    for e in held[:3]:
        who = f"producer {e['producer_id']} epoch {e['producer_epoch']}" + (
            f" ({e['transactional_id']})" if e.get("transactional_id") else "")
        coordinator = e.get("coordinator")
        side = "no coordinator lists it" if coordinator is None else (
            f"its coordinator has it {coordinator['state']} at epoch "
            f"{coordinator['producer_epoch']} over "
            f"{', '.join(coordinator['partitions']) or 'no partitions'}")
        told.append(f"{who} holds a transaction open from offset {e['first_offset']}; {side}")
    return "; its leader said: " + "; ".join(told)


def _by_value(table: pa.Table) -> dict:
    rows = defaultdict(list)
    for row in table.to_pylist():
        rows[row["value"]].append(row)
    return rows


def _outcome(type_: str) -> str:
    return {"ok": "acknowledged", "info": "indeterminate (info)", "fail": "failed"}.get(
        type_, type_)


def sentence(type_: str, case: dict, evidence: Evidence) -> str:
    """One case in words."""
    tp, value, offset = _tp(case), case.get("value"), case.get("offset")
    if type_ in ("lost-write", "unseen"):
        parts = [evidence.send(value)]
        if offset is not None:
            parts.append(evidence.read_after(case["topic"], case["partition"], offset))
        if type_ == "unseen" and case.get("end_offset") is not None:
            parts.append(f"the final reads read {tp} to its end, offset {case['end_offset']}")
        parts.append(evidence.reads_of(value))
        return "; ".join(parts)
    if type_ == "stale-end":
        read_epoch, end_epoch = case.get("read_epoch"), case.get("end_epoch")
        if read_epoch is None or end_epoch is None:
            return f"a poll had read offset {offset} of {tp}; the end-offsets asked after " \
                   f"it answered {case['end_offset']}"
        return f"a poll had read offset {offset} of {tp}, appended in leader epoch " \
               f"{read_epoch}; the end-offsets asked after it answered {case['end_offset']} " \
               f"from the leader of epoch {end_epoch}, which must hold that record"
    if type_ == "duplicate":
        places = ", ".join(f"offset {p['offset']} of {p['topic']}-{p['partition']}"
                           for p in (case.get("places") or [])[:6])
        return f"value {value} is at {places}; {evidence.send(value)}; " \
               f"{evidence.reads_of(value)}"
    if type_ == "inconsistent-offsets":
        values = case.get("values") or []
        return f"offset {offset} of {tp} holds {len(values)} values: " + "; ".join(
            f"{evidence.send(v)}, and {evidence.reads_of(v)}" for v in values[:4])
    if type_ == "garbage-read":
        what = f"value {value}" if value is not None else f"undecodable bytes {case.get('raw')!r}"
        return f"offset {offset} of {tp} was read holding {what}; {evidence.send(value)}" \
            if value is not None else f"offset {offset} of {tp} was read holding {what}"
    if type_ == "aborted-read":
        return f"{evidence.reads_of(value)}; {evidence.send(value)}"
    if type_ == "precommitted-read":
        return f"{evidence.reads_of(value)}; {evidence.send(value)}, in a transaction " \
               f"(history line {min(case['evidence'])}) that had not yet asked to commit"
    if type_ == "stuck-lso":
        holders = evidence.holders(case["topic"], case["partition"]) if evidence else ""
        return f"the final phase's last read_committed end of {tp} was {offset} (the last " \
               f"stable offset), below its high watermark {case['end_offset']}{holders}"
    if type_ == "torn-transaction":
        lost = ", ".join(f"{v} at offset {p['offset']} of {p['topic']}-{p['partition']}"
                         for v, p in zip(case["lost_values"][:4], case["places"][:4]))
        return f"process {case['process']} committed a transaction; its values " \
               f"{', '.join(map(str, case['values'][:4]))} were read, while {lost} were " \
               f"read past and never read"
    if type_ == "eos-duplicate":
        places = ", ".join(f"offset {p['offset']} of {p['topic']}-{p['partition']}"
                           for p in case["places"][:4])
        return f"input value {value} of {tp} was written to the output at {places}, each " \
               f"committed (history lines {', '.join(map(str, case['evidence'][:6]))})"
    if type_ == "eos-missing":
        return f"group {case['group']} committed offset {case['committed_offset']} of {tp} " \
               f"in a transaction; value {value} at offset {offset} below it was never " \
               f"written to the output ({evidence.reads_of(value)})"
    if "offsets" in case and "values" in case and case.get("process") is not None:
        (a, b), (x, y) = case["offsets"][:2], case["values"][:2]
        return f"in {tp}, process {case['process']}: value {x} at offset {a}, then value {y} " \
               f"at offset {b}"
    if type_ == "stale-committed-offset":
        returned = case.get("returned_offset")
        return f"group {case['group']} committed offset {case['committed_offset']} of {tp} " \
               f"(acknowledged); a later fetch of its committed offsets returned " \
               f"{'none' if returned is None else returned}"
    if type_ == "zombie-commit":
        return f"process {case['process']} of group {case['group']} committed offset " \
               f"{case['offset']} of {tp} after another member had been given {tp}, and " \
               f"the broker answered ok"
    if type_ == "group-lost":
        return f"group {case['group']} committed up to offset {case['committed_offset']} of " \
               f"{tp}; value {value} at offset {offset} was never delivered to a member " \
               f"({evidence.reads_of(value)})"
    if type_ in ("resume-skip", "resume-rewind"):
        return f"{tp} was given to process {case['process']} of group {case['group']}, whose " \
               f"committed offset was {case['committed_offset']}; its first read was at " \
               f"offset {case['first_read_offset']}"
    return ", ".join(f"{k} {v}" for k, v in case.items() if k != "evidence")
