"""The grudge shapes of the network faults: pure functions, tested without
root; and the faults' arguments, refused before anything runs."""

from __future__ import annotations

import random

import pytest

from nemesis.net import (PacketLossFault, PartitionFault, bridge, grudge, halves, isolate,
                         majorities_ring, one_way)

N3 = ["n1", "n2", "n3"]
N5 = ["n1", "n2", "n3", "n4", "n5"]


def views(connectivity) -> dict[str, set[str]]:
    """Whom each node hears, itself included."""
    return {node: {node, *connectivity[node]} for node in connectivity}


def test_halves_cut_the_first_half_from_the_rest():
    assert grudge(halves(N3)) == {"n1": ["n2", "n3"], "n2": ["n1"], "n3": ["n1"]}
    assert grudge(halves(N5)) == {"n1": ["n3", "n4", "n5"], "n2": ["n3", "n4", "n5"],
                                  "n3": ["n1", "n2"], "n4": ["n1", "n2"], "n5": ["n1", "n2"]}


def test_isolate_cuts_one_node_from_all_others():
    assert grudge(isolate(N5, "n3")) == {"n1": ["n3"], "n2": ["n3"],
                                         "n3": ["n1", "n2", "n4", "n5"],
                                         "n4": ["n3"], "n5": ["n3"]}


@pytest.mark.parametrize("n", range(3, 10))
def test_majorities_ring_every_node_sees_a_majority_and_no_two_the_same(n):
    ring = [f"n{i}" for i in random.Random(n).sample(range(1, n + 1), n)]
    seen = views(majorities_ring(ring))
    assert all(len(view) >= n // 2 + 1 for view in seen.values())
    assert len({frozenset(view) for view in seen.values()}) == n


def test_majorities_ring_on_5_hears_ring_neighbours_only():
    ring = ["n3", "n1", "n5", "n2", "n4"]
    assert grudge(majorities_ring(ring)) == {
        "n1": ["n2", "n4"], "n2": ["n1", "n3"], "n3": ["n2", "n5"],
        "n4": ["n1", "n5"], "n5": ["n3", "n4"]}


def test_majorities_ring_on_3_is_a_line():
    assert grudge(majorities_ring(["n2", "n3", "n1"])) == {"n1": ["n2"], "n2": ["n1"]}


def test_bridge_joins_two_halves_through_one_node():
    assert grudge(bridge(N5)) == {"n1": ["n4", "n5"], "n2": ["n4", "n5"],
                                  "n4": ["n1", "n2"], "n5": ["n1", "n2"]}
    assert grudge(bridge(N3)) == {"n1": ["n3"], "n3": ["n1"]}


def test_one_way_the_deaf_node_drops_everyone_and_no_one_drops_it():
    assert grudge(one_way(N3, "n2")) == {"n2": ["n1", "n3"]}


def test_bad_arguments_are_refused_naming_them():
    with pytest.raises(ValueError, match="kind='triangle'"):
        PartitionFault("triangle")
    with pytest.raises(ValueError, match="target='follower'"):
        PartitionFault("isolate-leader", target="follower")
    with pytest.raises(ValueError, match="probability=1.5"):
        PacketLossFault(probability=1.5)
    with pytest.raises(ValueError, match="targets='some'"):
        PacketLossFault("some")
