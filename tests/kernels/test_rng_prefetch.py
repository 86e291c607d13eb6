"""The kernels' SplitMix64 shuffle and the prefetch hint."""

from __future__ import annotations

import numba
import numpy as np

from streamsvm.kernels._prefetch import prefetch, prefetch2
from streamsvm.kernels._rng import rand_below, shuffle_prefix


@numba.njit
def _draws(seed, m, n):
    state = np.array([seed], dtype=np.uint64)
    out = np.empty(n, np.int64)
    for t in range(n):
        out[t] = rand_below(state, m)
    return out


@numba.njit
def _shuffle(seed, work, m):
    state = np.array([seed], dtype=np.uint64)
    shuffle_prefix(work, m, state)
    return state[0]


def test_rand_below_range_and_uniformity():
    x = _draws(np.uint64(12345), 7, 70000)
    assert x.min() == 0 and x.max() == 6
    counts = np.bincount(x, minlength=7)
    assert np.all(np.abs(counts - 10000) < 5 * np.sqrt(10000))     # chi-like bound
    assert np.array_equal(x, _draws(np.uint64(12345), 7, 70000))   # reproducible
    assert not np.array_equal(x, _draws(np.uint64(12346), 7, 70000))
    assert set(_draws(np.uint64(1), 1, 100)) == {0}


def test_shuffle_prefix_permutes_only_the_prefix():
    w = np.arange(100, dtype=np.int64)
    s1 = _shuffle(np.uint64(9), w, 60)
    assert sorted(w[:60]) == list(range(60)) and list(w[60:]) == list(range(60, 100))
    assert not np.array_equal(w[:60], np.arange(60))
    w2 = np.arange(100, dtype=np.int64)
    assert _shuffle(np.uint64(9), w2, 60) == s1 and np.array_equal(w, w2)
    # every position is reachable: first element over many seeds
    firsts = set()
    for seed in range(200):
        v = np.arange(5, dtype=np.int64)
        _shuffle(np.uint64(seed), v, 5)
        firsts.add(int(v[0]))
    assert firsts == {0, 1, 2, 3, 4}


@numba.njit
def _sum_with_prefetch(a, b):
    s = 0.0
    for i in range(len(a)):
        if i + 8 < len(a):
            prefetch(a, i + 8)
            prefetch2(b, i + 8, 0)
        s += a[i] + b[i, 0]
    return s


def test_prefetch_is_only_a_hint():
    a = np.arange(100.0)
    b = np.ones((100, 3))
    assert _sum_with_prefetch(a, b) == a.sum() + 100.0
