"""A partition's transactions through a real leader replica and log:
transactional batches from kio's encoder, markers written by the leader,
the last stable offset, the aborted ranges a read_committed fetch gets,
and the marker checks — and the same state rebuilt from the log."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode

from reference_broker.controller.records import PartitionState
from reference_broker.log import LogConfig, PartitionLog, segment
from reference_broker.partition import READ_COMMITTED, Partition
from reference_broker.txn.partition_txns import ABORT, COMMIT, AbortedTxn, Marker
from reference_broker.txn.verification_state import UNVERIFIED
from tests.reference_broker.log.test_disk_errors import eio
from tests.reference_broker.record_batches import values_batch

TRANSACTIONAL = 0x10


def leader(tmp_path, replicas=(1,)) -> Partition:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    p = Partition("t", 0, log, node_id=1)
    p.become_leader(PartitionState("t", 0, replicas, replicas, leader=1, leader_epoch=2,
                                   partition_epoch=0), now=0)
    return p


def send(p: Partition, producer_id: int, count: int, sequence: int, *, epoch: int = 0,
         transactional: bool = True, verified=None):
    return p.append(values_batch(count, producer_id=producer_id, producer_epoch=epoch,
                                 base_sequence=sequence,
                                 attributes=TRANSACTIONAL if transactional else 0),
                    1 << 20, verified=verified)


def test_an_open_transaction_holds_the_last_stable_offset_until_its_marker(tmp_path):
    p = leader(tmp_path)
    p.append(values_batch(2), 1 << 20)                  # 0-1, not transactional
    assert send(p, 7, 3, 0).base_offset == 2            # 2-4, producer 7 opens
    assert (p.high_watermark, p.last_stable_offset) == (5, 2)
    assert p.readable_end(READ_COMMITTED) == 2 and p.readable_end(0) == 5
    error, offset = p.append_marker(7, 0, Marker(COMMIT, 0))
    assert (error, offset) == (ErrorCode.none, 5)
    assert p.last_stable_offset == 6                    # the HW passed the marker
    assert p.aborted_transactions(0, 6) == []


def test_a_marker_not_yet_replicated_keeps_the_transaction_unstable(tmp_path):
    """Kafka's unreplicatedTxns: the LSO moves only once the HW passes the marker."""
    p = leader(tmp_path, replicas=(1, 2))
    send(p, 7, 2, 0)
    p.on_follower_fetch(2, 2)
    assert (p.high_watermark, p.last_stable_offset) == (2, 0)
    p.append_marker(7, 0, Marker(COMMIT, 0))
    assert p.last_stable_offset == 0                    # HW 2 <= marker at 2
    p.on_follower_fetch(2, 3)
    assert p.last_stable_offset == 3


def test_aborted_ranges_include_transactions_begun_before_the_fetch_offset(tmp_path):
    p = leader(tmp_path)
    send(p, 7, 2, 0)                                    # 0-1 producer 7
    send(p, 8, 2, 0)                                    # 2-3 producer 8
    p.append_marker(7, 0, Marker(ABORT, 0))             # 4: 7 aborted (0..4)
    p.append_marker(8, 0, Marker(COMMIT, 0))            # 5
    assert p.last_stable_offset == 6
    assert p.aborted_transactions(3, 6) == [AbortedTxn(7, 0, 4)]
    assert p.aborted_transactions(5, 6) == []           # ended before the read
    assert p.aborted_transactions(0, 0) == []           # nothing read


def test_the_state_is_rebuilt_from_the_log(tmp_path):
    p = leader(tmp_path)
    send(p, 7, 2, 0)
    p.append_marker(7, 0, Marker(ABORT, 3))
    send(p, 9, 1, 0)                                    # left open at offset 3
    p.log.flush()
    again = Partition("t", 0, PartitionLog.open(tmp_path / "t-0", LogConfig()), node_id=1)
    assert again.txns.ongoing == {9: 3}
    assert again.txns.aborted == [AbortedTxn(7, 0, 2)]
    assert again.txns.coordinator_epochs == {7: 3}


@pytest.mark.parametrize("marker_epoch, coordinator_epoch, expected", [
    (1, 5, ErrorCode.none),
    (0, 5, ErrorCode.invalid_producer_epoch),           # below the producer's epoch
    (1, 4, ErrorCode.transaction_coordinator_fenced),   # a deposed coordinator
])
def test_marker_checks(tmp_path, marker_epoch, coordinator_epoch, expected):
    p = leader(tmp_path)
    send(p, 7, 1, 0, epoch=1)
    p.append_marker(7, 1, Marker(COMMIT, 5))
    send(p, 7, 1, 1, epoch=1)
    end = p.log.log_end_offset
    error, _ = p.append_marker(7, marker_epoch, Marker(ABORT, coordinator_epoch))
    assert error == expected
    assert p.log.log_end_offset == (end + 1 if expected == ErrorCode.none else end)


def test_a_fenced_producers_late_batch_is_refused_after_a_bumped_marker(tmp_path):
    """The coordinator aborts at the next epoch (KAFKA-6119's fix): the
    marker moves the partition's producer epoch, so the zombie's batch is
    refused."""
    p = leader(tmp_path)
    send(p, 7, 1, 0, epoch=0)
    p.append_marker(7, 1, Marker(ABORT, 0))
    assert send(p, 7, 1, 1, epoch=0).error == ErrorCode.invalid_producer_epoch


def test_a_plain_batch_inside_an_open_transaction_is_refused(tmp_path):
    p = leader(tmp_path)
    send(p, 7, 1, 0)
    assert send(p, 7, 1, 1, transactional=False).error == ErrorCode.invalid_txn_state


def test_a_verification_overtaken_by_a_marker_no_longer_stands(tmp_path):
    """KIP-890 part 1's guard against the ABA case: verified, then the
    transaction ended by a marker, the batch may not open a new one."""
    p = leader(tmp_path)
    guard = p.begin_verification(7, 0, 0)
    p.append_marker(7, 0, Marker(ABORT, 0))
    assert send(p, 7, 1, 0, verified=guard).error == ErrorCode.invalid_txn_state
    fresh = p.begin_verification(7, 0, 0)
    assert send(p, 7, 1, 0, verified=fresh).error == ErrorCode.none


def test_a_batch_no_verification_covers_only_continues_an_open_transaction(tmp_path):
    """KIP-890 part 1's sentinel guard: a batch its request did not verify
    (the transaction was open when the request came, or this broker did not
    lead the partition then) appends while the transaction is open, and is
    refused once a marker ended it meanwhile: with no guard it would open a
    transaction its coordinator never hears of, and hold the last stable
    offset for good."""
    p = leader(tmp_path)
    assert send(p, 7, 1, 0, verified=p.begin_verification(7, 0, 0)).error == ErrorCode.none
    assert send(p, 7, 1, 1, verified=UNVERIFIED).error == ErrorCode.none
    p.append_marker(7, 0, Marker(ABORT, 0))
    assert send(p, 7, 1, 2, verified=UNVERIFIED).error == ErrorCode.invalid_txn_state
    assert p.last_stable_offset == p.high_watermark == p.log.log_end_offset
    # Verification off (None): the log takes it, as Kafka's does.
    assert send(p, 7, 1, 2).error == ErrorCode.none


def test_a_verification_that_stands_is_shared_by_batches_verified_at_once(tmp_path):
    """maybeCreateVerificationStateEntry keeps a standing entry: two
    requests verified before either appended both find their guard."""
    p = leader(tmp_path)
    first, second = p.begin_verification(7, 0, 0), p.begin_verification(7, 0, 0)
    assert first is second
    assert send(p, 7, 1, 0, verified=first).error == ErrorCode.none


def test_a_batch_above_a_standing_verifications_lowest_sequence_is_out_of_order(tmp_path):
    """VerificationStateEntry: a producer new to the partition (any first
    sequence goes in) has its batch 0 refused by the coordinator, a
    retriable refusal; its pipelined batch 1 is then verified, but is
    OUT_OF_ORDER_SEQUENCE_NUMBER, verified or not, transactional or not,
    until a transactional append of the producer ends the entry. Batch 0's
    retry goes in, then batch 1."""
    p = leader(tmp_path)
    p.begin_verification(7, 0, 0)                     # refused: NOT_COORDINATOR
    later = p.begin_verification(7, 1, 0)
    assert send(p, 7, 1, 1, verified=later).error == ErrorCode.out_of_order_sequence_number
    assert send(p, 7, 1, 1, transactional=False).error == \
        ErrorCode.out_of_order_sequence_number
    assert p.log.log_end_offset == 0
    assert send(p, 7, 1, 0, verified=p.begin_verification(7, 0, 0)).error == ErrorCode.none
    assert send(p, 7, 1, 1).error == ErrorCode.none                 # the entry is gone


def test_a_marker_or_a_new_epoch_moves_the_lowest_sequence(tmp_path):
    p = leader(tmp_path)
    p.begin_verification(7, 5, 0)
    entry = p.begin_verification(7, 0, 1)             # a higher epoch resets it
    assert entry.lowest_sequence == 0 and entry.epoch == 1
    p.begin_verification(7, 9, 0)                     # an older epoch does not
    assert entry.lowest_sequence == 0
    assert send(p, 7, 1, 0, epoch=1, transactional=False).error == ErrorCode.none
    assert send(p, 7, 1, 1, epoch=1, transactional=False).error == \
        ErrorCode.out_of_order_sequence_number
    assert p.append_marker(7, 1, Marker(ABORT, 0))[0] == ErrorCode.none
    assert send(p, 7, 1, 1, epoch=1, transactional=False).error == ErrorCode.none


def test_a_disk_error_answers_kafka_storage_error_and_changes_nothing(tmp_path, monkeypatch):
    """EIO on the segment write: a produce and a transaction marker are
    answered KAFKA_STORAGE_ERROR, which clients and the marker channel
    retry, and nothing moves, so the marker's retry still ends the
    transaction (raising instead closed the connection, and killed the
    coordinator task whose own write it was)."""
    p = leader(tmp_path)
    send(p, 7, 1, 0)
    with monkeypatch.context() as m:
        m.setattr(segment, "write_all_at", eio)
        assert send(p, 7, 1, 1).error == ErrorCode.kafka_storage_error
        assert p.append_marker(7, 0, Marker(ABORT, 0)) == (ErrorCode.kafka_storage_error, -1)
    assert p.log.log_end_offset == 1 and p.txns.is_open(7)
    assert p.append_marker(7, 0, Marker(ABORT, 0)) == (ErrorCode.none, 1)
    assert not p.txns.is_open(7)
