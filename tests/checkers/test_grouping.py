"""checkers/grouping.py's sorts and look-ups agree with numpy's plain ones
on every shape of column the checks meet: nearly in order, reversed, few
distinct keys, and keys spanning all of int64 (where no row index fits
beside the key), with and without ties."""

import numpy as np
from hypothesis import given, settings, strategies as st

from checkers import grouping

SHAPES = ("few", "wide", "wide-few", "sorted", "reversed", "nearly")


def column(rng: np.random.Generator, shape: str, n: int) -> np.ndarray:
    if shape == "few":
        return rng.integers(-3, 3, n)
    if shape == "wide":
        return rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n)
    if shape == "wide-few":
        return rng.choice(column(rng, "wide", 4), n)
    if shape == "sorted":
        return np.sort(rng.integers(0, max(1, n // 2), n))
    if shape == "reversed":
        return np.arange(n, dtype=np.int64)[::-1].copy()
    nearly = np.arange(n, dtype=np.int64)
    swaps = rng.integers(0, max(1, n), max(1, n // 200)) if n > 1 else []
    for i in swaps:
        j = min(n - 1, i + 1)
        nearly[[i, j]] = nearly[[j, i]]
    return nearly


columns = st.builds(lambda seed, n, shapes: [column(np.random.default_rng(seed), s, n)
                                             for s in shapes],
                    st.integers(0, 2**32), st.sampled_from([0, 1, 2, 7, 300, 5000]),
                    st.lists(st.sampled_from(SHAPES), min_size=1, max_size=3))


@settings(max_examples=120, deadline=None)
@given(columns)
def test_order_is_a_stable_lexicographic_sort(keys):
    expected = np.lexsort(keys[::-1]) if len(keys[0]) else np.zeros(0, np.int64)
    assert grouping.order(*keys).tolist() == expected.tolist()


@settings(max_examples=120, deadline=None)
@given(columns, columns)
def test_among_distinct_and_lookup_agree_with_numpy(values, pool):
    values, pool = values[0], pool[0]
    assert grouping.among(values, pool).tolist() == np.isin(values, pool).tolist()
    keys = grouping.distinct(pool)
    assert keys.tolist() == np.unique(pool).tolist()
    at = grouping.lookup(keys, values)
    found = at != grouping.NONE
    assert found.tolist() == np.isin(values, pool).tolist()
    assert (keys[at[found]] == values[found]).all()
