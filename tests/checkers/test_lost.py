"""lost-write and unseen (docs/anomalies.md), on hand-written histories.

Each partition of a history holds one scenario; partitions do not interfere
(both anomalies are judged per partition).
"""

from __future__ import annotations

import itertools

import pytest

from checkers import lost
from tests.checkers.conftest import Ops

pytestmark = pytest.mark.spark

T = "t"
BIG = 2 ** 62


class Run(Ops):
    """Ops with a fresh process per operation (an info completion ends its
    process) and the index of each op's completion under a name."""

    def __init__(self):
        super().__init__()
        self.processes = itertools.count()
        self.at: dict[str, int] = {}

    def named(self, name, call, *args, **kw):
        call(next(self.processes), *args, **kw)
        self.at[name] = self.last
        return self


def by_partition(cases):
    return {case["partition"]: case for case in cases}


def test_lost_write_and_its_near_misses(run_checker):
    h = Run()
    # P0 basic: ok send at offset 1 never read; two ok polls read past it.
    h.named("s0", h.send, T, 0, 9, 10, 11, offsets=[0, 1, 2])
    h.named("r0_first", h.poll, (T, 0, 0, 9), (T, 0, 2, 11))
    h.named("r0_later", h.poll, (T, 0, 2, 11))
    # P1: an ok send without offset, read only by an info poll at 1; an ok
    # poll reads 2.
    h.named("s1", h.send, T, 1, 20)
    h.named("s1_rest", h.send, T, 1, 21, 22, offsets=[0, 2])
    h.named("r1_info", h.poll, (T, 1, 1, 20), type="info")
    h.named("r1", h.poll, (T, 1, 0, 21), (T, 1, 2, 22))
    # P2: an info send read only by an info poll at 1; an ok poll reads 2.
    h.named("s2", h.send, T, 2, 30, type="info")
    h.named("s2_rest", h.send, T, 2, 31, 32, offsets=[0, 2])
    h.named("r2_info", h.poll, (T, 2, 1, 30), type="info")
    h.named("r2", h.poll, (T, 2, 0, 31), (T, 2, 2, 32))
    # P3 near-miss: an info send (even with an offset) nobody read.
    h.named("s3_info", h.send, T, 3, 40, offsets=[1], type="info")
    h.named("s3", h.send, T, 3, 41, 42, offsets=[0, 2])
    h.named("r3", h.poll, (T, 3, 0, 41), (T, 3, 2, 42))
    # P4 near-miss: ok send at 3 not read, nothing read after it: unseen.
    h.named("s4", h.send, T, 4, 51, 52, 53, 50, offsets=[0, 1, 2, 3])
    h.named("r4", h.poll, (T, 4, 0, 51), (T, 4, 1, 52), (T, 4, 2, 53))
    # P5 near-miss: a value read only by an info poll, at 5; ok polls read
    # only before it.
    h.named("s5_info", h.send, T, 5, 60, type="info")
    h.named("s5", h.send, T, 5, 61, offsets=[2])
    h.named("r5_info", h.poll, (T, 5, 5, 60), type="info")
    h.named("r5", h.poll, (T, 5, 2, 61))
    # P6 near-miss: ok send with null offset never read: unseen, not lost.
    h.named("s6", h.send, T, 6, 70)
    h.named("s6_rest", h.send, T, 6, 71, offsets=[3])
    h.named("r6", h.poll, (T, 6, 3, 71))
    # P7: huge offsets. 2**62 is lost (2**62+5 was read); 2**62+10 is unseen.
    h.named("s7", h.send, T, 7, 80, 81, 82, offsets=[BIG, BIG + 5, BIG + 10])
    h.named("r7", h.poll, (T, 7, BIG + 5, 81))

    result = run_checker(lost, h)

    assert result.counts == {"lost-write": 4}
    at = h.at
    assert by_partition(result.anomalies["lost-write"]) == {
        0: {"type": "lost-write", "topic": T, "partition": 0, "value": 10, "offset": 1,
            "send_type": "ok", "evidence": [at["s0"], at["r0_first"]]},
        1: {"type": "lost-write", "topic": T, "partition": 1, "value": 20, "offset": 1,
            "send_type": "ok", "evidence": [at["s1"], at["r1"]]},
        2: {"type": "lost-write", "topic": T, "partition": 2, "value": 30, "offset": 1,
            "send_type": "info", "evidence": [at["s2"], at["r2"]]},
        7: {"type": "lost-write", "topic": T, "partition": 7, "value": 80, "offset": BIG,
            "send_type": "ok", "evidence": [at["s7"], at["r7"]]},
    }

    # No end-offsets at all: the unseen sends are unknown, not anomalies.
    unseen = result.unknown["unseen"]
    assert unseen["count"] == 3
    assert unseen["partitions"] == [
        {"topic": T, "partition": p, "count": 1, "end_offset": None, "final_read_to": None}
        for p in (4, 6, 7)]
    assert {(e["partition"], e["value"], e["offset"], tuple(e["evidence"]))
            for e in unseen["examples"]} == {
        (4, 50, 3, (at["s4"],)), (6, 70, None, (at["s6"],)), (7, 82, BIG + 10, (at["s7"],))}

    # Acknowledged and not (yet) read by an ok poll: at the end, the four
    # unseen-or-lost ok sends of P0, P1, P4, P6 and two of P7.
    series = result.stats["unseen"]["series"]
    assert 0 < len(series) <= 100
    assert [t for t, _ in series] == sorted(t for t, _ in series)
    assert series[-1][1] == 6


def test_unseen_proven_only_where_the_final_reads_reached_the_end(run_checker):
    h = Run()
    # Q0: acknowledged at 3, then truncated: the end is 3 and the final
    # reads read up to 2 (strict rule).
    h.named("s0", h.send, T, 0, 100, 101, 102, 103, offsets=[0, 1, 2, 3])
    h.named("r0", h.poll, (T, 0, 0, 100), (T, 0, 1, 101))
    # Q1: no end recorded for this partition.
    h.named("s1", h.send, T, 1, 110, offsets=[0])
    # Q2: final reads stopped short: read 0 of 0..3, end 4.
    h.named("s2", h.send, T, 2, 120, 121, 122, 123, offsets=[0, 1, 2, 3])
    # Q3: gaps (transaction markers at 2 and 4): values at 0, 1, 3, end 5;
    # the final reads read 3, which reaches the end. 135 was acked at 5.
    h.named("s3", h.send, T, 3, 130, 131, 133, 135, offsets=[0, 1, 3, 5])
    # Q4: gaps, but an ok send without offset nobody read could sit in one.
    h.named("s4", h.send, T, 4, 141, 142, offsets=[0, 2])
    h.named("s4_unplaced", h.send, T, 4, 140)
    # Q5: the same, but the final reads read up to end - 1.
    h.named("s5", h.send, T, 5, 151, 152, offsets=[0, 2])
    h.named("s5_unplaced", h.send, T, 5, 150)
    # Q6: an empty log (end 0) after an acknowledged send.
    h.named("s6", h.send, T, 6, 160, offsets=[0])

    h.named("end", h.end_offsets, (T, 0, 3), (T, 2, 4), (T, 3, 5), (T, 4, 4), (T, 5, 3),
            (T, 6, 0))
    h.named("final", h.poll, (T, 0, 2, 102), (T, 2, 0, 120),
            (T, 3, 0, 130), (T, 3, 1, 131), (T, 3, 3, 133),
            (T, 4, 0, 141), (T, 4, 2, 142), (T, 5, 0, 151), (T, 5, 2, 152), phase="final")

    result = run_checker(lost, h)

    at = h.at
    assert result.counts == {"unseen": 4}
    assert by_partition(result.anomalies["unseen"]) == {
        0: {"type": "unseen", "topic": T, "partition": 0, "value": 103, "offset": 3,
            "end_offset": 3, "evidence": [at["s0"], at["end"]]},
        3: {"type": "unseen", "topic": T, "partition": 3, "value": 135, "offset": 5,
            "end_offset": 5, "evidence": [at["s3"], at["end"]]},
        5: {"type": "unseen", "topic": T, "partition": 5, "value": 150, "offset": None,
            "end_offset": 3, "evidence": [at["s5_unplaced"], at["end"]]},
        6: {"type": "unseen", "topic": T, "partition": 6, "value": 160, "offset": 0,
            "end_offset": 0, "evidence": [at["s6"], at["end"]]},
    }

    unseen = result.unknown["unseen"]
    assert unseen["count"] == 5
    assert unseen["partitions"] == [
        {"topic": T, "partition": 1, "count": 1, "end_offset": None, "final_read_to": None},
        {"topic": T, "partition": 2, "count": 3, "end_offset": 4, "final_read_to": 0},
        {"topic": T, "partition": 4, "count": 1, "end_offset": 4, "final_read_to": 2},
    ]
    assert {(e["partition"], e["value"]) for e in unseen["examples"]} == {
        (1, 110), (2, 121), (2, 122), (2, 123), (4, 140)}
    assert result.stats["unseen"]["series"][-1][1] == 9


def test_ends_asked_in_the_main_phase_decide_nothing(run_checker):
    h = Run()
    # M0 near-miss: a poll read up to 4, then a main-phase end-offsets
    # answered 3 — as a replaced leader that has not learned it answers.
    # The final phase's end (5) is not stale: no finding.
    h.named("s0", h.send, T, 0, 300, 301, 302, 303, 304, offsets=[0, 1, 2, 3, 4])
    h.named("r0", h.poll, *[(T, 0, o, 300 + o) for o in range(5)])
    h.named("mid0", h.end_offsets, (T, 0, 3), phase=None)
    # M1 near-miss: the main phase's end (1) was right when asked; 311 and
    # 312 were acknowledged after it. With no final end for M1, reads to
    # that old end prove nothing: unknown, not unseen.
    h.named("s1_first", h.send, T, 1, 310, offsets=[0])
    h.named("r1", h.poll, (T, 1, 0, 310))
    h.named("mid1", h.end_offsets, (T, 1, 1), phase=None)
    h.named("s1_later", h.send, T, 1, 311, 312, offsets=[1, 2])
    h.named("final", h.poll, (T, 0, 4, 304), (T, 1, 0, 310), phase="final")
    h.named("end", h.end_offsets, (T, 0, 5))

    result = run_checker(lost, h)

    assert result.counts == {}
    assert result.unknown["unseen"]["partitions"] == [
        {"topic": T, "partition": 1, "count": 2, "end_offset": None, "final_read_to": 0}]


def test_ends_asked_in_the_main_phase_are_judged_by_epochs(run_checker):
    h = Run()
    # M0: records 0-4 appended in epoch 1 were read; then a main-phase end
    # answered 3 in epoch 2 — a new leader's stale high watermark.
    h.named("s0", h.send, T, 0, 400, 401, 402, 403, 404, offsets=[0, 1, 2, 3, 4])
    h.named("r0", h.poll, *[(T, 0, o, 400 + o, 1) for o in range(5)])
    h.named("mid0", h.end_offsets, (T, 0, 3, 2), phase=None)
    # M1 near-miss: a replaced leader answers 3 in its own epoch 2; what was
    # read at 3 and 4 was appended by its successor, in epoch 3.
    h.named("s1", h.send, T, 1, 410, 411, 412, 413, 414, offsets=[0, 1, 2, 3, 4])
    h.named("r1", h.poll, *[(T, 1, o, 410 + o, 1 if o < 3 else 3) for o in range(5)])
    h.named("mid1", h.end_offsets, (T, 1, 3, 2), phase=None)
    # M2 near-miss: an end without an epoch (kafka-python's) is not judged.
    h.named("s2", h.send, T, 2, 420, 421, offsets=[0, 1])
    h.named("r2", h.poll, (T, 2, 0, 420, 1), (T, 2, 1, 421, 1))
    h.named("mid2", h.end_offsets, (T, 2, 1), phase=None)
    # M3 near-miss: reads without an epoch are not evidence for this rule.
    h.named("s3", h.send, T, 3, 430, 431, offsets=[0, 1])
    h.named("r3", h.poll, (T, 3, 0, 430), (T, 3, 1, 431))
    h.named("mid3", h.end_offsets, (T, 3, 1, 5), phase=None)
    # M4 near-miss: the read completed after the end was asked.
    h.named("s4", h.send, T, 4, 440, 441, offsets=[0, 1])
    h.end_offsets(90, (T, 4, 1, 2), phase=None, pending=True)
    h.named("r4", h.poll, (T, 4, 0, 440, 1), (T, 4, 1, 441, 1))
    h.complete(90)
    # M5 near-miss, seen on the correct broker: the leader of epoch 9
    # appended offset 1 and was replaced before committing it; its
    # successor (epoch 10) committed and served it; the replaced leader,
    # not yet aware, answered its own high watermark 1, in epoch 9.
    h.named("s5", h.send, T, 5, 450, 451, offsets=[0, 1])
    h.named("r5", h.poll, (T, 5, 0, 450, 9), (T, 5, 1, 451, 9))
    h.named("mid5", h.end_offsets, (T, 5, 1, 9), phase=None)
    h.named("final", h.poll, *[(T, p, o, 400 + 10 * p + o) for p in range(6)
                               for o in range(5 if p < 2 else 2)], phase="final")
    h.named("end", h.end_offsets, *[(T, p, 5 if p < 2 else 2) for p in range(6)])

    result = run_checker(lost, h)

    assert result.counts == {"stale-end": 1}, result.anomalies
    [case] = result.anomalies["stale-end"]
    assert (case["partition"], case["offset"], case["end_offset"], case["read_epoch"],
            case["end_epoch"], case["evidence"]) == (0, 4, 3, 1, 2, [h.at["r0"], h.at["mid0"]])


def test_no_acknowledged_send_no_finding(run_checker):
    h = Run()
    h.named("info", h.send, T, 0, 1, type="info")
    h.named("fail", h.send, T, 0, 2, type="fail")
    h.named("poll", h.poll)

    result = run_checker(lost, h)

    assert result.counts == {}
    assert result.unknown == {}
    assert result.stats["unseen"] == {"series": []}


def test_stale_end_and_its_near_misses(run_checker):
    h = Run()
    # S0: a poll read up to 4, then the end was answered as 3.
    h.named("s0", h.send, T, 0, 200, 201, 202, 203, 204, offsets=[0, 1, 2, 3, 4])
    h.named("r0", h.poll, *[(T, 0, o, 200 + o) for o in range(5)])
    # S1 near-miss: read up to 2, end 3 (the end is one past the last record).
    h.named("s1", h.send, T, 1, 210, 211, 212, offsets=[0, 1, 2])
    h.named("r1", h.poll, *[(T, 1, o, 210 + o) for o in range(3)])
    # S2 near-miss: a poll of offset 5 that completed only after the end
    # was asked (concurrent: the end may have been asked first).
    h.named("s2", h.send, T, 2, 220, offsets=[5])
    h.poll(99, (T, 2, 5, 220), pending=True)
    # S3 near-miss: an info poll "read" offset 9.
    h.named("r3", h.poll, (T, 3, 9, 230), type="info")
    # S4: the highest read (6) came before a lower one; the first is the evidence.
    h.named("s4", h.send, T, 4, 240, 241, offsets=[2, 6])
    h.named("r4_high", h.poll, (T, 4, 6, 241))
    h.named("r4_low", h.poll, (T, 4, 2, 240))

    h.named("end", h.end_offsets, (T, 0, 3), (T, 1, 3), (T, 2, 1), (T, 3, 0), (T, 4, 4))
    h.complete(99)

    result = run_checker(lost, h)

    at = h.at
    assert result.counts.get("stale-end") == 2, result.counts
    assert by_partition(result.anomalies["stale-end"]) == {
        # No epochs in this history: the final phase's rule needs none.
        0: {"type": "stale-end", "topic": T, "partition": 0, "offset": 4, "end_offset": 3,
            "read_epoch": None, "end_epoch": None, "evidence": [at["r0"], at["end"]]},
        4: {"type": "stale-end", "topic": T, "partition": 4, "offset": 6, "end_offset": 4,
            "read_epoch": None, "end_epoch": None, "evidence": [at["r4_high"], at["end"]]},
    }
