"""alm's kernels against brute force and dense numpy (spec_004 §2.4, §3.2–3.4): the e-update
for every p (the closed forms, the safeguarded Newton, the boundaries), the fused pass A for
several models (deferred λ update, loss, dual sums, e, the subproblem's data, the Gram matrix
and column norms) and the conjugate-gradient pass."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.kernels import Costs
from streamsvm.kernels._alm import N_SUMS, alm_cg, alm_rows, prox_u


def _brute(s, gamma, p):
    """``argmin_u γ (u)_+^p + ½ (u − s)²`` on a fine grid around the candidates."""
    grid = np.linspace(min(s, 0.0) - 1.0, max(s, 0.0) + 1.0, 2_000_001)
    f = gamma * np.maximum(grid, 0.0) ** p + 0.5 * (grid - s) ** 2
    return grid[np.argmin(f)], (grid[1] - grid[0])


@pytest.mark.parametrize("p", [1.0, 1.01, 1.3, 1.5, 2.0, 2.5])
@pytest.mark.parametrize("s", [-1.3, 0.0, 0.05, 0.7, 2.0, 9.0])
@pytest.mark.parametrize("gamma", [0.1, 1.0, 7.0])
def test_prox_matches_brute_force(p, s, gamma):
    u = prox_u(s, gamma, p)
    ref, step = _brute(s, gamma, p)
    assert abs(u - ref) <= 2 * step
    if s > 0:
        assert 0.0 <= u <= s
        if u > 0:          # the stationarity of Eq. 11 with its y_i restored
            assert p * gamma * u ** (p - 1) + u == pytest.approx(s, rel=1e-9, abs=1e-12)


def test_prox_boundaries_and_closed_forms():
    assert prox_u(0.0, 0.5, 1.0) == 0.0             # y t = 0: e = t
    assert prox_u(0.5, 0.5, 1.0) == 0.0             # y t = γ: the threshold's edge
    assert prox_u(0.75, 0.5, 1.0) == 0.25           # Eq. 12
    assert prox_u(-0.3, 0.5, 1.0) == -0.3
    assert prox_u(3.0, 1.0, 2.0) == 1.0             # Eq. 13: s/(1 + 2γ)
    assert prox_u(-2.0, 1.0, 2.0) == -2.0
    # p near 1: (s/(pγ))^(1/(p−1)) overflows; the bracket falls back to s
    u = prox_u(5.0, 0.01, 1.0001)
    assert np.isfinite(u) and 0.0 <= u <= 5.0


def _block(n=30, d=9, seed=0, unit=False):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.4, format="csr", random_state=seed,
                  data_rvs=lambda k: rng.normal(size=k))
    if unit:
        X.data[:] = 1.0
    X = sp.vstack([X, sp.csr_matrix((1, d))]).tocsr()    # a row of zeros
    X.sort_indices()
    return X


def _dense_pass(X, y, pos, Cp, Cn, B, p, band, W, lam, e, mus, first, gram):
    Xd = np.hstack([X.toarray(), np.full((X.shape[0], 1), B)])
    k = W.shape[1]
    mu_old, mu_new = mus
    lam, e = lam.copy(), e.copy()
    s = np.zeros((k, N_SUMS))
    G = np.zeros_like(W)
    V = np.zeros((W.shape[0], 4 * k))
    gobj = np.zeros_like(W)
    q = p / (p - 1) if p > 1 else 0.0
    for c in range(k):
        yc = np.where(y == pos[c], 1.0, -1.0)
        C = np.where(yc > 0, Cp[c], Cn[c])
        o = Xd @ W[:, c]
        if not first:
            R = o - yc + e[:, c]
            lam[:, c] += mu_old * R
            s[c, 1] = R @ R
        xi = np.maximum(1 - yc * o, 0.0)
        s[c, 0] = (C * xi ** p).sum()
        s[c, 6] = (xi > 0).sum()
        a = np.maximum(-yc * lam[:, c], 0.0)
        if p == 1:
            a = np.minimum(a, C)
            conj = np.zeros_like(a)
            r = 1 - yc * o                              # the band is on 1 − y o, signed
            a2 = np.where(r > band, C, np.where(r < -band, 0.0, a))
            conj2 = np.zeros_like(a)
        else:
            conj = (p - 1) * C * (a / (p * C)) ** q
            a2 = np.where(xi > 0, C * p * xi ** (p - 1), 0.0)
            conj2 = (p - 1) * C * (a2 / (p * C)) ** q
        for side, mask in ((0, yc > 0), (1, yc < 0)):
            s[c, 2 + side] = a[mask].sum()
            s[c, 4 + side] = conj[mask].sum()
            s[c, 7 + side] = a2[mask].sum()
            s[c, 9 + side] = conj2[mask].sum()
            V[:, c + side * k] = Xd[mask].T @ a[mask]
            V[:, c + (2 + side) * k] = Xd[mask].T @ a2[mask]
        t = yc - o - lam[:, c] / mu_new
        e[:, c] = yc * np.array([prox_u(yc[i] * t[i], C[i] / mu_new, p) for i in range(len(y))])
        z = yc - e[:, c] - lam[:, c] / mu_new
        G[:, c] = Xd.T @ (z if gram else o - z)
        gobj[:, c] = Xd.T @ np.where(xi > 0, C * p * yc * np.where(xi > 0, xi, 1) ** (p - 1), 0)
    return lam, e, s, G, V, gobj, (Xd * Xd).sum(axis=0), Xd.T @ Xd


@pytest.mark.parametrize("p", [1.0, 1.5, 2.0])
@pytest.mark.parametrize("first", [True, False])
@pytest.mark.parametrize("gram", [True, False])
@pytest.mark.parametrize("unit", [False, True])
def test_pass_a_matches_dense(p, first, gram, unit):
    X = _block(unit=unit)
    n, d = X.shape
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, n).astype(np.float64)
    pos = np.arange(3, dtype=np.int32)
    Cp, Cn = np.array([1.0, 2.0, 0.5]), np.array([1.5, 1.0, 0.5])
    B, band = 0.7, 0.1
    W = rng.normal(size=(d + 1, 3)) * 0.3
    lam = rng.normal(size=(n, 3))
    e = rng.normal(size=(n, 3))
    mus = (0.3, 0.2)
    ref = _dense_pass(X, y, pos, Cp, Cn, B, p, band, W, lam, e, mus, first, gram)
    s = np.zeros((3, N_SUMS))
    G, V, gobj = np.zeros((d + 1, 3)), np.zeros((d + 1, 12)), np.zeros((d + 1, 3))
    colsq, H = np.zeros(d + 1), np.zeros((d + 1, d + 1))
    data = np.zeros(0) if unit else X.data
    alm_rows((X.indptr, X.indices, data), unit, y, Costs(pos, Cp, Cn, False, B), p, band, W,
             lam, e, mus, (first, gram, True, True, True), np.empty((2, 3)), G, V, s, gobj,
             colsq, H)
    for got, want in zip((lam, e, s, G, V, gobj, colsq, H), ref):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("more", [False, True])
def test_cg_pass_matches_dense(more):
    X = _block()
    n, d = X.shape
    B = 1.0
    P = np.random.default_rng(2).normal(size=(d + 1, 2))
    Hp, Q = np.zeros((d + 1, 2)), np.zeros(2)
    alm_cg((X.indptr, X.indices, X.data), False, P, B, more, np.empty(2), Hp, Q)
    Xd = np.hstack([X.toarray(), np.full((n, 1), B)])
    q = Xd @ P
    np.testing.assert_allclose(Q, (q * q).sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(Hp, Xd.T @ q if more else 0.0, rtol=1e-12, atol=1e-12)
