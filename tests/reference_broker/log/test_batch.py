"""Batch headers against real encoders (kio, kafka-python): parsing,
corruption detection, re-stamping, client validation, timestamp search."""

from __future__ import annotations

import crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_broker.log import (
    BatchHeader, CorruptRecordError, InvalidRecordError, parse_batches, validate_client_batches,
    with_offsets,
)
from reference_broker.log.batch import first_record_at_or_after, increment_sequence
from tests.reference_broker.record_batches import (
    BASE_TIME_MS, kafka_python_batch, kio_batch, values_batch,
)


def test_header_fields_match_what_kio_encoded():
    raw = kio_batch([b"a", b"bb", b"ccc"], producer_id=42, producer_epoch=3, base_sequence=7,
                    timestamps=[BASE_TIME_MS, BASE_TIME_MS + 9, BASE_TIME_MS + 4],
                    partition_leader_epoch=5)
    [header] = parse_batches(raw)
    assert header.size == len(raw)
    assert (header.base_offset, header.last_offset, header.records_count) == (0, 2, 3)
    assert header.partition_leader_epoch == 5 and header.magic == 2
    assert (header.producer_id, header.producer_epoch) == (42, 3)
    assert (header.base_sequence, header.last_sequence) == (7, 9)
    assert (header.base_timestamp, header.max_timestamp) == (BASE_TIME_MS, BASE_TIME_MS + 9)
    assert header.has_producer_id and not header.is_transactional and not header.is_control
    assert header.timestamp_type == 0 and header.compression == 0


def test_flags_come_from_attributes():
    header = parse_batches(kio_batch([b"x"], attributes=0x10 | 0x20 | 0x08))[0]
    assert header.is_transactional and header.is_control and header.timestamp_type == 1
    assert not header.has_producer_id and header.last_sequence == -1


def test_kafka_python_gzip_batch_parses_with_its_crc():
    raw = kafka_python_batch([b"v" * 200] * 5, compression=1)
    [header] = parse_batches(raw)
    assert header.compression == 1 and header.records_count == 5 and header.last_offset_delta == 4


def test_several_batches_and_empty_data():
    first, second = values_batch(3), values_batch(2, size=50)
    headers = parse_batches(first + second)
    assert [h.size for h in headers] == [len(first), len(second)]
    assert parse_batches(b"") == []


def test_incomplete_batch_is_corrupt_with_its_byte():
    raw = values_batch(3) + values_batch(4)
    first_size = parse_batches(raw)[0].size
    with pytest.raises(CorruptRecordError, match=f"at byte {first_size}: declares"):
        parse_batches(raw[:-1])
    with pytest.raises(CorruptRecordError, match=f"at byte {first_size}: 20 bytes left"):
        parse_batches(raw[:first_size + 20])


def test_crc_mismatch_is_corrupt_and_can_be_skipped():
    raw = bytearray(values_batch(3))
    raw[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="at byte 0: CRC-32C mismatch"):
        parse_batches(raw)
    assert parse_batches(raw, verify_crc=False)[0].records_count == 3


def test_wrong_magic_and_short_length_are_corrupt():
    raw = bytearray(values_batch(1))
    raw[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1"):
        parse_batches(raw)
    raw = bytearray(values_batch(1))
    raw[8:12] = (10).to_bytes(4, "big")
    with pytest.raises(CorruptRecordError, match="batch_length 10"):
        parse_batches(raw)


def test_with_offsets_rewrites_only_offset_and_epoch():
    raw = values_batch(3) + values_batch(2)
    stamped = with_offsets(raw, 100, 7)
    headers = parse_batches(stamped)  # CRCs still valid
    assert [(h.base_offset, h.last_offset) for h in headers] == [(100, 102), (103, 104)]
    assert {h.partition_leader_epoch for h in headers} == {7}
    size = headers[0].size
    for start in (0, size):
        assert stamped[start + 8:start + 12] == raw[start + 8:start + 12]
        assert stamped[start + 16:start + size] == raw[start + 16:start + size]


def test_sequence_wraps_like_kafka():
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1
    assert increment_sequence(5, 3) == 8
    header = parse_batches(kio_batch([b"a"] * 3, producer_id=1, producer_epoch=0,
                                     base_sequence=2**31 - 2))[0]
    assert header.last_sequence == 0


def _header(**fields) -> BatchHeader:
    base = parse_batches(kio_batch([b"a", b"b"], producer_id=1, producer_epoch=0, base_sequence=0))[0]
    values = {name: getattr(base, name) for name in BatchHeader.__slots__}
    return BatchHeader(**(values | fields))


def test_validate_client_batches_accepts_a_normal_batch():
    validate_client_batches([_header()])
    validate_client_batches([])


@pytest.mark.parametrize("headers, message", [
    ([_header(), _header()], "2 record batches"),
    ([_header(last_offset_delta=-1)], "invalid offset range"),
    ([_header(records_count=0, last_offset_delta=0)], "invalid reported count"),
    ([_header(records_count=3)], "inconsistent batch offset range"),
    ([_header(attributes=0x20)], "control records"),
    ([_header(base_sequence=-1)], "invalid sequence number -1"),
])
def test_validate_client_batches_rejects_what_log_validator_rejects(headers, message):
    with pytest.raises(InvalidRecordError, match=message):
        validate_client_batches(headers)


def test_first_record_at_or_after_finds_the_record_not_the_batch():
    timestamps = [BASE_TIME_MS + 10, BASE_TIME_MS + 30, BASE_TIME_MS + 20, BASE_TIME_MS + 40]
    for raw in (kio_batch([b"a", b"b", b"c", b"d"], timestamps=timestamps),
                kafka_python_batch([b"a", b"b", b"c", b"d"], timestamps=timestamps, compression=1)):
        stamped = with_offsets(raw, 50, 0)
        [header] = parse_batches(stamped)
        assert first_record_at_or_after(stamped, header, BASE_TIME_MS) == (50, BASE_TIME_MS + 10)
        assert first_record_at_or_after(stamped, header, BASE_TIME_MS + 15) == (51, BASE_TIME_MS + 30)
        assert first_record_at_or_after(stamped, header, BASE_TIME_MS + 40) == (53, BASE_TIME_MS + 40)
        assert first_record_at_or_after(stamped, header, BASE_TIME_MS + 41) is None


def test_first_record_at_or_after_with_log_append_time_uses_the_batch_time():
    raw = kio_batch([b"a", b"b"], attributes=0x08, timestamps=[BASE_TIME_MS, BASE_TIME_MS + 5])
    [header] = parse_batches(raw)
    assert first_record_at_or_after(raw, header, BASE_TIME_MS + 1) == (0, header.max_timestamp)


def test_records_that_do_not_decode_let_the_batch_answer():
    raw = bytearray(kio_batch([b"a", b"b"], timestamps=[BASE_TIME_MS, BASE_TIME_MS + 5]))
    raw[61] = 0xFF  # an endless varint
    raw[62:] = b"\xff" * (len(raw) - 62)
    [header] = parse_batches(raw, verify_crc=False)
    assert first_record_at_or_after(raw, header, BASE_TIME_MS + 1) == (0, BASE_TIME_MS + 5)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.binary(max_size=300), min_size=1, max_size=20), min_size=1, max_size=5),
       st.integers(0, 2**40), st.integers(0, 2**31 - 1))
def test_parse_restamp_roundtrip(batches, base_offset, epoch):
    raw = b"".join(kio_batch(values) for values in batches)
    headers = parse_batches(raw)
    assert [h.records_count for h in headers] == [len(values) for values in batches]
    assert sum(h.size for h in headers) == len(raw)
    stamped = parse_batches(with_offsets(raw, base_offset, epoch))
    expected, offset = [], base_offset
    for values in batches:
        expected.append((offset, offset + len(values) - 1))
        offset += len(values)
    assert [(h.base_offset, h.last_offset) for h in stamped] == expected
    for header, batch_start in zip(headers, _starts(headers)):
        body = raw[batch_start + 21:batch_start + header.size]
        assert crc32c.crc32c(body) == header.crc


def _starts(headers):
    position = 0
    for header in headers:
        yield position
        position += header.size
