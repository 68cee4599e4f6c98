"""The leader epoch cache: Kafka's assign/endOffsetFor/truncate rules and
its checkpoint file (cases after LeaderEpochFileCacheTest)."""

from __future__ import annotations

import pytest

from reference_broker.log.leader_epoch_cache import LeaderEpochCache


@pytest.fixture
def cache(tmp_path):
    return LeaderEpochCache(tmp_path / "leader-epoch-checkpoint")


def test_assign_keeps_the_first_start_of_an_epoch(cache):
    cache.assign(2, 10)
    cache.assign(2, 15)
    assert cache.entries() == [(2, 10)]
    cache.assign(2, 5)  # the same epoch starting earlier replaces it
    assert cache.entries() == [(2, 5)]


def test_assign_drops_entries_it_contradicts(cache):
    for epoch, start in [(0, 0), (1, 10), (3, 20)]:
        cache.assign(epoch, start)
    cache.assign(2, 15)  # epoch 3 is later: it goes
    assert cache.entries() == [(0, 0), (1, 10), (2, 15)]
    cache.assign(4, 10)  # starts at or before 1 and 2: they go
    assert cache.entries() == [(0, 0), (4, 10)]
    assert cache.latest_epoch() == 4


def test_assign_rejects_negative_entries(cache):
    with pytest.raises(ValueError, match=r"\(-1, 0\)"):
        cache.assign(-1, 0)


@pytest.mark.parametrize("requested, expected", [
    (-1, (-1, -1)),    # UNDEFINED_EPOCH
    (5, (5, 30)),      # the latest epoch ends at the log end offset
    (4, (2, 20)),      # largest epoch <= 4 is 2; it ends where 5 starts
    (3, (2, 20)),
    (2, (2, 20)),
    (1, (1, 10)),      # below the first cached epoch: its start offset
    (0, (0, 10)),
    (6, (-1, -1)),     # above every epoch
])
def test_end_offset_for(cache, requested, expected):
    cache.assign(2, 10)
    cache.assign(5, 20)
    assert cache.end_offset_for(requested, 30) == expected


def test_end_offset_for_an_empty_cache_is_undefined(cache):
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert cache.latest_epoch() is None


def test_epoch_for_offset(cache):
    cache.assign(1, 0)
    cache.assign(3, 10)
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 50)] == [1, 1, 3, 3]
    empty = LeaderEpochCache(cache.path.with_name("other"))
    assert empty.epoch_for_offset(0) is None


def test_truncate_from_end_drops_entries_at_or_past_the_offset(cache):
    for epoch, start in [(0, 0), (1, 10), (2, 20)]:
        cache.assign(epoch, start)
    cache.truncate_from_end(25)
    assert cache.entries() == [(0, 0), (1, 10), (2, 20)]
    cache.truncate_from_end(10)
    assert cache.entries() == [(0, 0)]
    assert LeaderEpochCache(cache.path).entries() == [(0, 0)]


def test_checkpoint_is_kafkas_text_format_and_reloads(cache):
    cache.assign(0, 0)
    cache.assign(3, 120)
    assert cache.path.read_text() == "0\n2\n0 0\n3 120\n"
    assert LeaderEpochCache(cache.path).entries() == [(0, 0), (3, 120)]
    assert not cache.path.with_name("leader-epoch-checkpoint.tmp").exists()


@pytest.mark.parametrize("text", ["0\n2\n0 0\n", "1\n0\n", "0\nx\n", "0\n1\n0\n"])
def test_malformed_checkpoint_names_the_file(tmp_path, text):
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_text(text)
    with pytest.raises(ValueError, match="malformed leader epoch checkpoint .*leader-epoch-checkpoint"):
        LeaderEpochCache(path)
