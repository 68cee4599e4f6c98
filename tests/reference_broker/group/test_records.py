"""The `__consumer_offsets` key/value formats: exact bytes as Kafka lays them
out (GroupMetadataManager + the coordinator message specs), older value
versions, round trips, and the group -> partition hash."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_broker.group import partition_for, records
from reference_broker.group.records import (
    CorruptCoordinatorRecord, GroupMetadataValue, MemberMetadataValue, OffsetCommitValue)


def test_offset_commit_key_and_value_bytes():
    assert records.offset_commit_key("g", "t", 3) == (
        b"\x00\x01" b"\x00\x01g" b"\x00\x01t" b"\x00\x00\x00\x03")
    value = OffsetCommitValue(offset=42, leader_epoch=7, metadata="md",
                              commit_timestamp_ms=1000)
    assert records.offset_commit_value(value) == (
        b"\x00\x03" + struct.pack(">qi", 42, 7) + b"\x00\x02md" + struct.pack(">q", 1000))


def test_group_metadata_key_and_value_bytes():
    assert records.group_metadata_key("grp") == b"\x00\x02\x00\x03grp"
    value = GroupMetadataValue("consumer", 5, "range", "m1", 99, (
        MemberMetadataValue("m1", "i1", "c", "h", 300, 100, b"sub", b"asg"),))
    assert records.group_metadata_value(value) == (
        b"\x00\x03" b"\x00\x08consumer" + struct.pack(">i", 5) + b"\x00\x05range"
        b"\x00\x02m1" + struct.pack(">qi", 99, 1)
        + b"\x00\x02m1" b"\x00\x02i1" b"\x00\x01c" b"\x00\x01h" + struct.pack(">ii", 300, 100)
        + b"\x00\x00\x00\x03sub" b"\x00\x00\x00\x03asg")


def test_empty_group_value_has_null_protocol_and_leader():
    value = GroupMetadataValue("consumer", 2, None, None, -1, ())
    raw = records.group_metadata_value(value)
    assert raw == (b"\x00\x03\x00\x08consumer" + struct.pack(">i", 2) + b"\xff\xff\xff\xff"
                   + struct.pack(">qi", -1, 0))
    assert records.parse_group_metadata_value(raw) == value


def test_older_value_versions_decode():
    v1_offset = (b"\x00\x01" + struct.pack(">q", 9) + b"\x00\x00" + struct.pack(">qq", 5, 6))
    assert records.parse_offset_commit_value(v1_offset) == OffsetCommitValue(9, -1, "", 5)
    v0_group = (b"\x00\x00\x00\x08consumer" + struct.pack(">i", 1) + b"\x00\x01r\x00\x01m"
                + struct.pack(">i", 1) + b"\x00\x01m\x00\x01c\x00\x01h"
                + struct.pack(">i", 10_000) + b"\x00\x00\x00\x01s\x00\x00\x00\x01a")
    assert records.parse_group_metadata_value(v0_group) == GroupMetadataValue(
        "consumer", 1, "r", "m", -1,
        (MemberMetadataValue("m", None, "c", "h", 10_000, 10_000, b"s", b"a"),))


def test_legacy_and_unknown_key_types():
    legacy = b"\x00\x00\x00\x01g\x00\x01t\x00\x00\x00\x01"
    assert records.parse_key(legacy) == records.OffsetCommitKey("g", "t", 1)
    assert records.parse_key(b"\x00\x05anything") == 5


@pytest.mark.parametrize("raw", [b"\x00", b"\x00\x03\x00\x00", b"\x00\x09" + bytes(30)])
def test_corrupt_values_raise(raw):
    with pytest.raises(CorruptCoordinatorRecord):
        records.parse_offset_commit_value(raw)


texts = st.text(max_size=20)
members = st.builds(MemberMetadataValue, texts, st.none() | texts, texts, texts,
                    st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1),
                    st.binary(max_size=20), st.binary(max_size=20))


@settings(max_examples=100, deadline=None)
@given(st.builds(GroupMetadataValue, texts, st.integers(0, 2**31 - 1), st.none() | texts,
                 st.none() | texts, st.integers(-1, 2**62),
                 st.lists(members, max_size=4).map(tuple)))
def test_group_metadata_value_round_trip(value):
    assert records.parse_group_metadata_value(records.group_metadata_value(value)) == value


@settings(max_examples=100, deadline=None)
@given(texts, texts, st.integers(0, 2**31 - 1), st.integers(-1, 2**62),
       st.integers(-1, 2**31 - 1), texts, st.integers(0, 2**62))
def test_offset_commit_round_trip(group, topic, partition, offset, epoch, metadata, ts):
    assert records.parse_key(records.offset_commit_key(group, topic, partition)) == (
        records.OffsetCommitKey(group, topic, partition))
    value = OffsetCommitValue(offset, epoch, metadata, ts)
    assert records.parse_offset_commit_value(records.offset_commit_value(value)) == value


def test_partition_for_matches_java_string_hash():
    # "Aa" and "BB" collide in Java (2112); "polygenelubricants" hashes to
    # Integer.MIN_VALUE, which Kafka's Utils.abs maps to 0.
    assert partition_for("Aa", 10_000) == partition_for("BB", 10_000) == 2112
    assert partition_for("polygenelubricants", 50) == 0
    # String.hashCode values printed by a JVM (UTF-16, so the emoji is a surrogate pair).
    for group_id, java_hash in [("console-consumer", -648006740),
                                ("test-consumer-group", -1793216381),
                                ("h\u00e9llo-\U0001F600", 395420098)]:
        assert partition_for(group_id, 50) == abs(java_hash) % 50
    assert partition_for("", 50) == 0
