"""Metadata records: JSON with a "type" field, round trips for every record
type, and decode errors that name the bad field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reference_broker.controller import (
    CorruptMetadataRecord, CreateTopic, DeleteTopic, FenceBroker, PartitionState, RegisterBroker,
    SetTopicConfig, UnfenceBroker, decode, encode)

ids = st.integers(min_value=-1, max_value=2 ** 31 - 1)
names = st.text(min_size=1, max_size=30)
records = st.one_of(
    st.builds(RegisterBroker, ids, names, st.integers(0, 65535), st.integers(0, 2 ** 40)),
    st.builds(FenceBroker, ids),
    st.builds(UnfenceBroker, ids),
    st.builds(CreateTopic, names, st.uuids().map(str)),
    st.builds(PartitionState, names, st.integers(0, 1000),
              st.lists(ids, max_size=5).map(tuple), st.lists(ids, max_size=5).map(tuple),
              ids, st.integers(0, 2 ** 31 - 1), st.integers(0, 2 ** 31 - 1)),
    st.builds(SetTopicConfig, names, names, st.none() | names),
    st.builds(DeleteTopic, names),
)


@settings(max_examples=300, deadline=None)
@given(records)
def test_every_record_round_trips_on_one_line(record):
    data = encode(record)
    assert b"\n" not in data
    assert decode(data) == record


def test_encoding_is_json_with_a_type_field():
    state = PartitionState("t", 2, (1, 2, 3), (1, 3), 1, 4, 9)
    assert json.loads(encode(state)) == {
        "type": "PartitionState", "topic": "t", "partition": 2, "replicas": [1, 2, 3],
        "isr": [1, 3], "leader": 1, "leader_epoch": 4, "partition_epoch": 9}
    assert encode(FenceBroker(3)) == b'{"type":"FenceBroker","broker_id":3}'


def test_newlines_in_names_stay_escaped():
    record = CreateTopic("a\nb", "id")
    assert b"\n" not in encode(record)
    assert decode(encode(record)) == record


@pytest.mark.parametrize("data, named", [
    (b"not json", "not JSON"),
    (b"\xff\xfe", "not JSON"),
    (b"[1, 2]", "JSON list"),
    (b'{"broker_id": 1}', "'type'"),
    (b'{"type": "Nope", "broker_id": 1}', "'Nope'"),
    (b'{"type": 7}', "'type'"),
    (b'{"type": "FenceBroker"}', "'broker_id' is missing"),
    (b'{"type": "FenceBroker", "broker_id": "1"}', "'broker_id' is '1'; expected an integer"),
    (b'{"type": "FenceBroker", "broker_id": true}', "'broker_id' is True"),
    (b'{"type": "FenceBroker", "broker_id": 1.5}', "'broker_id' is 1.5"),
    (b'{"type": "FenceBroker", "broker_id": 1, "epoch": 2}', "unknown field(s) epoch"),
    (b'{"type": "CreateTopic", "name": 5, "topic_id": "x"}', "'name' is 5; expected a string"),
    (b'{"type": "PartitionState", "topic": "t", "partition": 0, "replicas": [1, "2"],'
     b' "isr": [1], "leader": 1, "leader_epoch": 0, "partition_epoch": 0}',
     "'replicas' is [1, '2']; expected a list of integers"),
    (b'{"type": "PartitionState", "topic": "t", "partition": 0, "replicas": [1],'
     b' "isr": 1, "leader": 1, "leader_epoch": 0, "partition_epoch": 0}', "'isr' is 1"),
])
def test_decode_errors_name_the_bad_field(data, named):
    with pytest.raises(CorruptMetadataRecord) as error:
        decode(data)
    assert named in str(error.value)


def test_encode_refuses_what_is_not_a_record():
    with pytest.raises(TypeError, match="not a metadata record"):
        encode({"type": "FenceBroker", "broker_id": 1})
