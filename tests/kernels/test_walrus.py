"""Walrus (spec_002 §3): the exact minimizer of ½‖b‖² + ½(1ᵀb)² − vᵀb over [0, C]^{k−1},
against an enumeration of every active pattern (small k), bisection on the monotone φ (large
k) and L-BFGS-B; its edge cases and its invariances."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import scipy.optimize

from streamsvm.kernels._ww import walrus


def _walrus(v, C):
    v = np.asarray(v, dtype=np.float64)
    m = len(v)
    b = np.empty(m)
    gam = walrus(v, float(C), b, (np.empty(m), np.empty(m), np.empty(m + 1)))
    return b, gam


def _objective(b, v):
    return 0.5 * b @ b + 0.5 * b.sum() ** 2 - v @ b


def _kkt_residual(b, v, C):
    gr = b + b.sum() - v
    pg = np.where(b <= 0, np.minimum(gr, 0), np.where(b >= C, np.maximum(gr, 0), gr))
    return np.abs(pg).max()


def _enumerate(v, C):
    """Every lower / free / upper pattern: solve the free block, keep the KKT point."""
    m = len(v)
    Theta = np.eye(m) + np.ones((m, m))
    best = None
    for pattern in itertools.product((0, 1, 2), repeat=m):
        pat = np.array(pattern)
        F = pat == 1
        b = np.where(pat == 2, C, 0.0)
        if F.any():
            rhs = v[F] - Theta[np.ix_(F, ~F)] @ b[~F]
            b[F] = np.linalg.solve(Theta[np.ix_(F, F)], rhs)
        if b.min() < -1e-12 or b.max() > C + 1e-12:
            continue
        b = np.clip(b, 0, C)
        if _kkt_residual(b, v, C) <= 1e-9 * max(1.0, np.abs(v).max()):
            if best is None or _objective(b, v) < _objective(best, v):
                best = b
    return best


def _bisection(v, C):
    """γ is the root of φ(γ) = γ − Σ clip_C(v − γ), increasing, on [0, max v]."""
    if v.max() <= 0:
        return np.zeros_like(v)
    lo, hi = 0.0, float(v.max())
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid - np.clip(v - mid, 0, C).sum() < 0:
            lo = mid
        else:
            hi = mid
    return np.clip(v - 0.5 * (lo + hi), 0, C)


def _instances(rng, m, n):
    for _ in range(n):
        kind = rng.integers(5)
        scale = 10.0 ** rng.uniform(-3, 3)
        C = 10.0 ** rng.uniform(-3, 3)
        v = rng.normal(rng.normal(0, 1), 1, m) * scale
        if kind == 1:                                 # ties
            v = np.round(v / scale * 2) * scale / 2
        elif kind == 2:                               # entries exactly 0 or C
            v = rng.choice([0.0, C, -C, 2 * C], m)
        elif kind == 3:                               # all non-positive
            v = -np.abs(v)
        elif kind == 4:                               # constant
            v = np.full(m, v[0])
        yield v, C


def test_walrus_matches_the_enumeration_of_every_pattern():
    rng = np.random.default_rng(0)
    n = 0
    for m in range(1, 7):
        for v, C in _instances(rng, m, 300 if m < 5 else 80):
            b, gam = _walrus(v, C)
            ref = _enumerate(v, C)
            assert ref is not None
            np.testing.assert_allclose(b, ref, rtol=1e-9, atol=1e-9 * max(1.0, C))
            assert gam == pytest.approx(b.sum(), rel=1e-12, abs=1e-300)
            n += 1
    assert n == 4 * 300 + 2 * 80


@pytest.mark.parametrize("m", [7, 31, 99, 999])
def test_walrus_matches_bisection_and_lbfgsb_for_large_k(m):
    rng = np.random.default_rng(m)
    for v, C in _instances(rng, m, 200 if m < 999 else 40):
        b, _ = _walrus(v, C)
        assert np.all(b >= 0) and np.all(b <= C) and np.all(np.isfinite(b))
        np.testing.assert_allclose(b, _bisection(v, C), rtol=1e-9,
                                   atol=1e-9 * max(1.0, C, np.abs(v).max()))
        assert _kkt_residual(b, v, C) <= 1e-9 * max(1.0, np.abs(v).max(), C)
    v, C = rng.normal(0.5, 1, m), 0.3
    b, _ = _walrus(v, C)
    res = scipy.optimize.minimize(lambda x: (_objective(x, v), x + x.sum() - v),
                                  np.zeros(m), jac=True, method="L-BFGS-B",
                                  bounds=[(0, C)] * m, options={"ftol": 1e-15, "gtol": 1e-12})
    assert _objective(b, v) <= res.fun + 1e-10 * abs(res.fun)


def test_walrus_edge_cases():
    b, g = _walrus([-1.0, 0.0, -3.0], 1.0)          # all v ≤ 0: b = 0
    assert np.all(b == 0) and g == 0
    b, g = _walrus([3.0], 1.0)                        # k = 2: clip_C(v/2)
    assert b[0] == 1.0
    b, g = _walrus([1.0], 1.0)
    assert b[0] == pytest.approx(0.5)
    b, g = _walrus(np.full(5, 100.0), 1.0)            # everything saturates: b = C·1
    assert np.all(b == 1.0) and g == 5.0
    b, g = _walrus(np.array([1.0, 1.0, 1.0]), 1.0)    # max v ≤ C: b = (v − γ)_+, γ = Σ b
    assert np.allclose(b, 0.25) and g == pytest.approx(0.75)
    b, _ = _walrus(np.array([1e300, 1e-300, -1e300]), 1e-300)   # extreme scales stay finite
    assert np.all(np.isfinite(b))


def test_walrus_invariances():
    rng = np.random.default_rng(1)
    for _ in range(200):
        m = int(rng.integers(1, 40))
        v, C = rng.normal(0.3, 1, m), float(rng.uniform(0.01, 3))
        b, _ = _walrus(v, C)
        perm = rng.permutation(m)
        np.testing.assert_allclose(_walrus(v[perm], C)[0], b[perm], rtol=1e-12, atol=1e-14)
        lam = float(rng.uniform(0.1, 10))
        np.testing.assert_allclose(_walrus(lam * v, lam * C)[0], lam * b, rtol=1e-10,
                                   atol=1e-12)


@pytest.mark.parametrize("m", [2, 25, 999])
def test_a_lower_bound_of_the_root_leaves_the_minimizer_unchanged(m):
    """``lo`` below the root γ (what ``ww``'s row step proves from the row's previous γ)
    keeps the entries ≤ ``lo`` out of the heap and changes nothing, bit for bit."""
    rng = np.random.default_rng(100 + m)
    checked = 0
    for v, C in _instances(rng, m, 200 if m < 999 else 60):
        b, gam = _walrus(v, C)
        if gam <= 0.0:
            continue
        for u in (0.0, 0.5, 0.9, 1.0 - 1e-9):
            b2, gam2 = np.empty(m), 0.0
            heap, vs, P = np.empty(m), np.empty(m), np.empty(m + 1)
            gam2 = walrus(v, C, b2, (heap, vs, P), u * gam)
            np.testing.assert_array_equal(b2, b)
            assert gam2 == gam
        checked += 1
    assert checked > 20
