"""The metadata image: applying records in order, and refusing records
that do not fit it without changing anything."""

from __future__ import annotations

import pytest

from reference_broker.controller import (
    BrokerInfo, CreateTopic, DeleteTopic, FenceBroker, InconsistentMetadataRecord, MetadataImage,
    PartitionState, RegisterBroker, UnfenceBroker)

P0 = PartitionState("t", 0, (1, 2), (1, 2), 1, 0, 0)
P1 = PartitionState("t", 1, (2, 3), (2, 3), 2, 0, 0)


def built(*records) -> MetadataImage:
    image = MetadataImage()
    for record in records:
        image.apply(record)
    return image


def test_brokers_register_fenced_and_unfence():
    image = built(RegisterBroker(1, "h1", 9092, 0), UnfenceBroker(1),
                  RegisterBroker(2, "h2", 9093, 2))
    assert image.brokers == {1: BrokerInfo(1, "h1", 9092, 0, fenced=False),
                             2: BrokerInfo(2, "h2", 9093, 2, fenced=True)}
    assert image.offset == 3
    assert image.is_active(1) and not image.is_active(2) and not image.is_active(9)
    image.apply(FenceBroker(1))
    assert image.brokers[1].fenced and not image.is_active(1)


def test_registering_again_starts_fenced_with_the_new_epoch():
    image = built(RegisterBroker(1, "h", 1, 0), UnfenceBroker(1), RegisterBroker(1, "h", 2, 2))
    assert image.brokers[1] == BrokerInfo(1, "h", 2, 2, fenced=True)


def test_topics_and_partitions():
    image = built(CreateTopic("t", "id-t"), P0, P1, CreateTopic("u", "id-u"),
                  PartitionState("u", 0, (3,), (3,), 3, 0, 0))
    assert image.topics["t"].topic_id == "id-t"
    assert image.partition("t", 1) == P1
    assert image.partition("t", 2) is None and image.partition("x", 0) is None
    assert [(s.topic, s.partition) for s in image.partitions()] == [("t", 0), ("t", 1), ("u", 0)]
    assert image.partitions_of(2) == [P0, P1]
    assert image.partitions_of(3) == [P1, image.partition("u", 0)]
    changed = PartitionState("t", 0, (1, 2), (2,), 2, 1, 1)
    image.apply(changed)
    assert image.partition("t", 0) == changed
    image.apply(DeleteTopic("t"))
    assert list(image.topics) == ["u"]
    assert image.offset == 7


@pytest.mark.parametrize("prefix, record", [
    ((), FenceBroker(1)),
    ((), UnfenceBroker(1)),
    ((), PartitionState("t", 0, (1,), (1,), 1, 0, 0)),
    ((), DeleteTopic("t")),
    ((CreateTopic("t", "a"),), CreateTopic("t", "b")),
])
def test_a_record_that_does_not_fit_raises_and_changes_nothing(prefix, record):
    image = built(*prefix)
    with pytest.raises(InconsistentMetadataRecord, match=f"offset {len(prefix)}"):
        image.apply(record)
    assert image.offset == len(prefix)
    assert image.brokers == {}
    assert list(image.topics) == (["t"] if prefix else [])


def test_apply_refuses_what_is_not_a_record():
    with pytest.raises(TypeError):
        MetadataImage().apply(("FenceBroker", 1))
