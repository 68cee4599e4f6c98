"""The positions librdkafka restarts by itself: read from its log, placed
where the consumer's records go back (workloads/clients/librdkafka_log.py).

The retry cannot be made to happen on demand: it needs an old leader's
ListOffsets answer to arrive after the partition has moved to a new leader
and started fetching there. So these tests feed the log lines that
librdkafka 2.16 wrote in a failover run (the `(re)starting` line rewound a
partition from offset 151 to 0; the `already scheduled` line came while the
partition was still looking up its offset, and rewound nothing)."""

from __future__ import annotations

import logging

import pytest

from workloads.clients import librdkafka_log
from workloads.clients.librdkafka_log import PositionResets, Rewinds, consumer_log

RESTARTED = ("OFFSET [kchaos-c1#consumer-7] [thrd:main]: kchaos-t0 [0]: outdated offset "
             "response: (re)starting offset query timer for offset BEGINNING (leader epoch -1)")
ALREADY = ("OFFSET [kchaos-c1#consumer-7] [thrd:main]: kchaos-t0 [3]: outdated offset "
           "response: offset query timer already scheduled for offset BEGINNING (leader "
           "epoch -1)")


def reads(*offsets, partition=0):
    return [{"topic": "kchaos-t0", "partition": partition, "offset": o} for o in offsets]


def logged(*lines) -> PositionResets:
    resets = PositionResets()
    log = consumer_log(resets)
    for line in lines:
        log.log(logging.DEBUG, line)
    return resets


def test_only_a_restarted_query_is_a_reset():
    assert logged(ALREADY, "FETCH [c] [thrd:main]: kchaos-t0 [0]: fetch decide").take() == []
    resets = logged(ALREADY, RESTARTED)
    assert resets.take() == [("kchaos-t0", 0)]
    assert resets.take() == []


def test_the_reset_goes_with_the_poll_whose_records_go_back():
    resets = PositionResets()
    rewinds = Rewinds(resets)
    assert rewinds.place(reads(149, 150), set()) == (reads(149, 150), [], [])
    resets.emit(logging.makeLogRecord({"msg": RESTARTED}))
    # Records fetched before the restart still come, then the rewind.
    assert rewinds.place(reads(151), set()) == (reads(151), [], [])
    assert rewinds.place(reads(0, 1), set()) == (reads(0, 1), [("kchaos-t0", 0)], [])
    # Once placed it is spent: a later rewind is not excused.
    assert rewinds.place(reads(0), set()) == (reads(0), [], [])


def test_a_poll_that_goes_back_after_records_of_its_own_is_cut_there():
    resets = PositionResets()
    rewinds = Rewinds(resets)
    rewinds.place(reads(150), set())
    resets.emit(logging.makeLogRecord({"msg": RESTARTED}))
    other = reads(7, partition=1)
    polled = reads(151) + other + reads(0, 1)
    assert rewinds.place(polled, set()) == (reads(151) + other, [], reads(0, 1))
    assert rewinds.place(reads(0, 1), set()) == (reads(0, 1), [("kchaos-t0", 0)], [])


def test_a_restart_that_never_goes_back_is_forgotten(monkeypatch):
    resets = PositionResets()
    rewinds = Rewinds(resets)
    resets.emit(logging.makeLogRecord({"msg": RESTARTED}))
    rewinds.place([], set())
    clock = librdkafka_log.time.monotonic()
    monkeypatch.setattr(librdkafka_log.time, "monotonic",
                        lambda: clock + librdkafka_log.EXPIRY + 1)
    rewinds.place(reads(5), set())
    assert rewinds.place(reads(0), set()) == (reads(0), [], [])


@pytest.mark.parametrize("moved", [True, False])
def test_a_rebalance_of_the_partition_cancels_a_pending_restart(moved):
    resets = PositionResets()
    rewinds = Rewinds(resets)
    rewinds.place(reads(9), set())
    resets.emit(logging.makeLogRecord({"msg": RESTARTED}))
    rewinds.place([], {("kchaos-t0", 0)} if moved else set())
    placed = rewinds.place(reads(3), set())[1]
    assert placed == ([] if moved else [("kchaos-t0", 0)])


def test_lines_at_info_and_above_reach_the_run_log(caplog):
    log = consumer_log(PositionResets())
    with caplog.at_level(logging.INFO, logger=librdkafka_log.LIBRDKAFKA_LOG.name):
        log.log(logging.DEBUG, RESTARTED)
        log.log(logging.WARNING, "FAIL [c] broker down")
    assert [r.getMessage() for r in caplog.records] == ["FAIL [c] broker down"]
