"""Idempotent producer state (KIP-98): the 5-batch dedup window, sequence
and epoch rules, and rebuilding from the log."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_broker.log import LogConfig, PartitionLog, parse_batches, with_offsets
from reference_broker.producer_state import (
    DuplicateSequence, InvalidProducerEpoch, OutOfOrderSequence, ProducerState,
)
from tests.reference_broker.record_batches import kio_batch

PID = 1000


class Producer:
    """Batches of one producer with consecutive offsets, as a leader would
    have stamped them."""

    offsets = itertools.count()

    def __init__(self, producer_id: int = PID, epoch: int = 0):
        self.producer_id, self.epoch = producer_id, epoch

    def batch(self, sequence: int, records: int = 1, epoch: int | None = None, attributes: int = 0):
        raw = kio_batch([b"v"] * records, producer_id=self.producer_id,
                        producer_epoch=self.epoch if epoch is None else epoch,
                        base_sequence=sequence, attributes=attributes)
        return parse_batches(with_offsets(raw, next(self.offsets) * 100, 0))[0]


def append(state: ProducerState, header) -> None:
    state.check(header)
    state.record(header)


def test_batches_without_producer_id_are_ignored():
    state = ProducerState()
    header = parse_batches(kio_batch([b"x"]))[0]
    state.check(header)
    state.record(header)
    assert state.producers == {}


@pytest.mark.parametrize("first_sequence", [0, 17])
def test_a_producer_without_state_may_start_anywhere(first_sequence):
    # ProducerAppendInfo.checkSequence: no current epoch accepts any sequence (KIP-360).
    state = ProducerState()
    append(state, Producer().batch(first_sequence))
    assert state.producers[PID].last_sequence == first_sequence


def test_sequences_must_follow_on():
    state, producer = ProducerState(), Producer()
    append(state, producer.batch(0, records=3))
    append(state, producer.batch(3, records=2))
    with pytest.raises(OutOfOrderSequence, match="6 \\(incoming\\), 4"):
        state.check(producer.batch(6))
    with pytest.raises(OutOfOrderSequence):
        state.check(producer.batch(3, records=1))  # not the cached range 3..4
    state.check(producer.batch(5))


def test_a_retry_of_any_of_the_last_five_batches_answers_with_its_offsets():
    state, producer = ProducerState(), Producer()
    sent = [producer.batch(sequence * 2, records=2) for sequence in range(6)]
    for header in sent:
        append(state, header)
    for original in sent[1:]:
        retry = producer.batch(original.base_sequence, records=2)
        with pytest.raises(DuplicateSequence) as duplicate:
            state.check(retry)
        assert (duplicate.value.first_offset, duplicate.value.last_offset) == (
            original.base_offset, original.last_offset)
    # The sixth-oldest left the window: its retry is out of order, not a duplicate.
    with pytest.raises(OutOfOrderSequence):
        state.check(producer.batch(0, records=2))


def test_sequence_wraps_at_int32_max():
    state, producer = ProducerState(), Producer()
    append(state, producer.batch(2**31 - 3, records=3))  # ends at 2**31-1
    append(state, producer.batch(0))
    append(state, producer.batch(1, records=1))
    crossing = Producer(producer_id=PID + 1)
    append(state, crossing.batch(2**31 - 2, records=3))  # 2**31-2, 2**31-1, 0
    assert state.producers[PID + 1].last_sequence == 0
    append(state, crossing.batch(1))
    with pytest.raises(DuplicateSequence):
        state.check(crossing.batch(2**31 - 2, records=3))


def test_epoch_bump_restarts_sequences_at_zero():
    state, producer = ProducerState(), Producer(epoch=0)
    append(state, producer.batch(0, records=4))
    with pytest.raises(OutOfOrderSequence, match="new epoch 1"):
        state.check(producer.batch(4, epoch=1))
    bumped = producer.batch(0, epoch=1)
    append(state, bumped)
    assert state.producers[PID].epoch == 1 and len(state.producers[PID].batches) == 1
    with pytest.raises(InvalidProducerEpoch, match="is 0, below the last seen epoch 1"):
        state.check(producer.batch(0, records=4, epoch=0))  # the old epoch's retry is fenced
    append(state, producer.batch(1, epoch=1))


def test_an_older_epoch_is_fenced_before_its_sequence_is_looked_at():
    state, producer = ProducerState(), Producer(epoch=5)
    append(state, producer.batch(0))
    for sequence in (0, 1, 99):
        with pytest.raises(InvalidProducerEpoch):
            state.check(producer.batch(sequence, epoch=4))


def test_a_control_batch_moves_the_epoch_only():
    state, producer = ProducerState(), Producer(epoch=0)
    append(state, producer.batch(0, records=2))
    state.record(producer.batch(-1, epoch=1, attributes=0x30))  # a transaction marker
    assert state.producers[PID].epoch == 1 and not state.producers[PID].batches
    with pytest.raises(OutOfOrderSequence):
        state.check(producer.batch(2, epoch=1))
    state.check(producer.batch(0, epoch=1))


def test_producers_are_independent():
    state, one, two = ProducerState(), Producer(PID), Producer(PID + 1, epoch=3)
    append(state, one.batch(0))
    append(state, two.batch(40))
    append(state, one.batch(1))
    append(state, two.batch(41))
    assert {pid: entry.last_sequence for pid, entry in state.producers.items()} == {PID: 1, PID + 1: 41}


def test_rebuild_from_the_log_equals_the_live_state(tmp_path):
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=600))
    live = ProducerState()
    producers = [Producer(PID), Producer(PID + 1, epoch=2)]
    sequences = {PID: 0, PID + 1: 0}
    for step in range(30):
        producer = producers[step % 2]
        if step == 20:
            producer.epoch += 1
            sequences[producer.producer_id] = 0
        raw = kio_batch([b"r"] * (1 + step % 3), producer_id=producer.producer_id,
                        producer_epoch=producer.epoch, base_sequence=sequences[producer.producer_id])
        header = parse_batches(raw)[0]
        live.check(header)
        info = log.append_as_leader(raw, leader_epoch=0, headers=[header])
        live.record(info.batches[0])
        sequences[producer.producer_id] += 1 + step % 3
    assert ProducerState.rebuild(log.headers()) == live
    assert ProducerState.rebuild(header for header, _ in log.batches()) == live
    assert len(list((tmp_path / "t-0").glob("*.log"))) > 1


def expected_outcome(model: dict, header) -> str | tuple[int, int]:
    """The rules written plainly over the full history of accepted batches:
    'ok', 'epoch', 'order', or the offsets of the duplicated batch."""
    if header.producer_id not in model:
        return "ok"
    epoch, history = model[header.producer_id]
    if header.producer_epoch == epoch:
        for first_seq, last_seq, first_offset, last_offset in history[-5:]:
            if (first_seq, last_seq) == (header.base_sequence, header.last_sequence):
                return first_offset, last_offset
    if header.producer_epoch < epoch:
        return "epoch"
    if header.producer_epoch > epoch:
        return "ok" if header.base_sequence == 0 else "order"
    last = history[-1][1] if history else -1
    return "ok" if header.base_sequence == last + 1 else "order"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 12), st.integers(1, 4)),
                max_size=60))
def test_random_batches_follow_the_rules_and_rebuild(operations):
    """Random batches (producer, epoch, sequence, size) against a plain
    model of the rules; then `rebuild` of the accepted batches reproduces
    the live state."""
    live, model, accepted, offset = ProducerState(), {}, [], 0
    for producer_index, epoch, sequence, records in operations:
        raw = kio_batch([b"x"] * records, producer_id=PID + producer_index, producer_epoch=epoch,
                        base_sequence=sequence)
        header = parse_batches(with_offsets(raw, offset, 0))[0]
        expected = expected_outcome(model, header)
        try:
            live.check(header)
            outcome = "ok"
        except DuplicateSequence as duplicate:
            outcome = (duplicate.first_offset, duplicate.last_offset)
        except OutOfOrderSequence:
            outcome = "order"
        except InvalidProducerEpoch:
            outcome = "epoch"
        assert outcome == expected
        if outcome != "ok":
            continue
        live.record(header)
        accepted.append(header)
        current = model.get(header.producer_id)
        history = current[1] if current and current[0] == epoch else []
        model[header.producer_id] = (epoch, history + [
            (header.base_sequence, header.last_sequence, header.base_offset, header.last_offset)])
        offset = header.last_offset + 1
    assert ProducerState.rebuild(accepted) == live
