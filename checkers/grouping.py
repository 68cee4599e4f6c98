"""Group-by over numpy columns: the few operations the per-partition checks
are written in, each vectorised (no Python loop over rows).

The one idea: sort once by the group keys, mark where each group starts,
and every per-group question (first, minimum, the previous row, the latest
row with some property) becomes a `reduceat`, a shifted comparison or an
accumulate over that one order.
"""

from __future__ import annotations

import numpy as np

NONE = -1  # null, in columns whose values are never negative (offsets, indexes)


def order(*keys: np.ndarray) -> np.ndarray:
    """Indexes that sort rows by keys[0], then keys[1], … (stable).

    Integer keys are packed into one when their ranges allow; otherwise
    the keys are sorted least significant first, each pass stable (a
    radix sort whose digits are the keys): np.lexsort is several times
    slower on columns this size.
    """
    if not keys or len(keys[0]) == 0:
        return np.zeros(0, dtype=np.int64)
    packed = _packed(keys) if len(keys) > 1 else None
    if packed is not None:
        return _stable(packed)
    by = _stable(keys[-1])
    for key in keys[-2::-1]:
        by = by[_stable(key[by])]
    return by


def _stable(key: np.ndarray) -> np.ndarray:
    """np.argsort(key, kind="stable"), by the fastest way for the key.

    Rows usually come nearly in history order, where the stable sort
    (timsort, for 64-bit keys) is fastest. In any other order numpy's
    vectorised unstable sorts are 3-10x faster, and made stable by a
    row's position in the low bits of a unique key: the key's own, when
    its range leaves room, else its rank among the distinct keys."""
    n = len(key)
    if not (key[1:] < key[:-1]).any():
        return np.arange(n)
    if _nearly_sorted(key) or key.dtype.kind != "i":
        return np.argsort(key, kind="stable")
    bits = n.bit_length()
    low, high = int(key.min()), int(key.max())
    if (high - low) >> (62 - bits) == 0:
        return np.sort(((key.astype(np.int64) - low) << bits) | np.arange(n)) & ((1 << bits) - 1)
    by = np.argsort(key)
    rank = group_ids(starts(key[by]))
    return np.sort((rank << bits) | by) & ((1 << bits) - 1)


def _nearly_sorted(values: np.ndarray) -> bool:
    """Fewer than one row in 64 smaller than the row before it."""
    return np.count_nonzero(values[1:] < values[:-1]) * 64 < len(values)


def _packed(keys: tuple[np.ndarray, ...]) -> np.ndarray | None:
    """The integer keys as one int64 in the same order, or None when their
    ranges do not fit."""
    if not all(k.dtype.kind in "iub" for k in keys):
        return None
    lows = [int(k.min()) for k in keys]
    spans = [int(k.max()) - low + 1 for k, low in zip(keys, lows)]
    if np.prod([float(s) for s in spans]) >= 2.0 ** 62:
        return None
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    for key, low, span in zip(keys, lows, spans):
        packed = packed * span + (key.astype(np.int64) - low)
    return packed


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted (np.unique by sorting: numpy's
    hash-based unique is several times slower on large int64 columns)."""
    ordered = np.sort(values)
    return ordered[starts(ordered)] if len(ordered) else ordered


def among(values: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """np.isin(values, pool), by sorting both and one search of sorted
    keys: on columns of a million values 7x faster than np.isin (which
    hashes, or sorts both together with a stable sort)."""
    return lookup(distinct(pool), values) != NONE


def starts(*sorted_keys: np.ndarray) -> np.ndarray:
    """True at the first row of each run of equal keys (rows already sorted)."""
    n = len(sorted_keys[0]) if sorted_keys else 0
    first = np.zeros(n, dtype=bool)
    if n:
        first[0] = True
        for key in sorted_keys:
            first[1:] |= key[1:] != key[:-1]
    return first


def group_ids(first: np.ndarray) -> np.ndarray:
    """0, 0, 1, 1, 1, 2, …: the group of each sorted row."""
    return np.cumsum(first) - 1


def reduce(ufunc: np.ufunc, values: np.ndarray, first: np.ndarray) -> np.ndarray:
    """ufunc over each group of sorted rows (one result per group)."""
    if len(values) == 0:
        return values[:0]
    return ufunc.reduceat(values, np.flatnonzero(first))


def group_start(first: np.ndarray) -> np.ndarray:
    """The position of each sorted row's group's first row."""
    index = np.arange(len(first))
    return np.maximum.accumulate(np.where(first, index, 0)) if len(first) else index


def rank(first: np.ndarray) -> np.ndarray:
    """0, 1, 2, … within each group of sorted rows."""
    return np.arange(len(first)) - group_start(first)


def previous(values: np.ndarray, first: np.ndarray, fill) -> np.ndarray:
    """Each sorted row's predecessor in its group (`fill` for the first)."""
    out = np.empty_like(values)
    if len(values):
        out[1:] = values[:-1]
        out[first] = fill
    return out


def following(values: np.ndarray, first: np.ndarray, fill) -> np.ndarray:
    """Each sorted row's successor in its group (`fill` for the last)."""
    out = np.empty_like(values)
    if len(values):
        out[:-1] = values[1:]
        last = np.append(first[1:], True)
        out[last] = fill
    return out


def latest(present: np.ndarray, first: np.ndarray, *, strictly_before: bool = False) -> np.ndarray:
    """For each sorted row, the position of the latest row of its group, up
    to itself (or strictly before it), where `present` holds; NONE if none:
    a running "last non-null"."""
    n = len(present)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    upto = np.maximum.accumulate(np.where(present, np.arange(n), NONE))
    if strictly_before:
        upto = np.concatenate([[NONE], upto[:-1]])
    return np.where(upto >= group_start(first), upto, NONE)


def take(values: np.ndarray, at: np.ndarray, fill) -> np.ndarray:
    """values[at], `fill` where `at` is NONE."""
    out = np.full(len(at), fill, dtype=np.asarray(values).dtype)
    found = at != NONE
    out[found] = np.asarray(values)[at[found]]
    return out


def lookup(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Index of each `wanted` in sorted, distinct `keys`, or NONE."""
    if len(keys) == 0:
        return np.full(len(wanted), NONE, dtype=np.int64)
    at = np.minimum(_search(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, at, NONE)


def _search(keys: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """np.searchsorted(keys, wanted), asking in sorted order when `wanted`
    is far from it: numpy's search starts from the previous answer, so
    sorted questions cost a pass, and random ones a cache miss each."""
    if _nearly_sorted(wanted):
        return np.searchsorted(keys, wanted)
    by = np.argsort(wanted)
    at = np.empty(len(wanted), dtype=np.int64)
    at[by] = np.searchsorted(keys, wanted[by])
    return at


def joint_keys(left: tuple[np.ndarray, ...], right: tuple[np.ndarray, ...]):
    """Rows of two tables with the same columns as one int64 key each, in
    the same lexicographic order as the rows (codes of each column's values
    over both tables, combined in mixed radix)."""
    key_left = np.zeros(len(left[0]), dtype=np.int64)
    key_right = np.zeros(len(right[0]), dtype=np.int64)
    for a, b in zip(left, right):
        domain, codes = np.unique(np.concatenate([a, b]), return_inverse=True)
        key_left = key_left * len(domain) + codes[:len(a)]
        key_right = key_right * len(domain) + codes[len(a):]
    return key_left, key_right


def min_by_key(keys: tuple[np.ndarray, ...], ops: np.ndarray,
               wanted: tuple[np.ndarray, ...]) -> np.ndarray:
    """Per row of `wanted`: the lowest of `ops` among the rows whose `keys`
    equal it, or NONE."""
    key, asked = joint_keys(keys, wanted)
    by = order(key, ops)
    first = starts(key[by])
    return take(ops[by][first], lookup(key[by][first], asked), NONE)


def lists(lengths: np.ndarray, values: np.ndarray):
    """An Arrow list array from per-row lengths and the flat values."""
    import pyarrow as pa
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), pa.array(values))
