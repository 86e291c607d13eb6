"""nesvm's kernels against dense numpy (spec_001 §2.1, §4.2, §5, §8): the smoothed hinge with
the corrected threshold, the fused pass at two points for several models, the power
iteration's product and the rows' statistics."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.kernels import Costs
from streamsvm.kernels._nesvm import N_SUMS, nesvm_power, nesvm_rows


def _block(n=40, d=12, density=0.3, seed=0, unit=False, empty_row=True):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=seed,
                  data_rvs=lambda k: rng.normal(size=k) * 2)
    if unit:
        X.data[:] = 1.0
    if empty_row:                                     # a row of zeros (s_i = 0 without bias)
        X = sp.vstack([X, sp.csr_matrix((1, d))]).tocsr()
    X.sort_indices()
    return X


def _dense_sums(X, y, pos, Cp, Cn, mu, B, W, V, squared):
    Xd = np.hstack([X.toarray(), np.full((X.shape[0], 1), B)])
    s = np.max(np.abs(Xd), axis=1)
    out = np.zeros((W.shape[1], N_SUMS))
    G = np.zeros_like(W)
    for c in range(W.shape[1]):
        yc = np.where(y == pos[c], 1.0, -1.0)
        C = np.where(yc > 0, Cp[c], Cn[c])
        for P, cols in ((W, (0, 1)), (V, (6, 7))):
            r = 1 - yc * (Xd @ P[:, c])
            if squared:
                u, h, loss = r, r * r, r * r
            else:
                with np.errstate(divide="ignore", invalid="ignore"):
                    u = np.where(mu[c] * s > 0, np.clip(r / (mu[c] * s), 0, 1), (r > 0) * 1.0)
                # the corrected piecewise form (spec §2.1: threshold 1 − μ s_i)
                m = 1 - r
                h = np.where(m >= 1, 0.0, np.where(m <= 1 - mu[c] * s, r - mu[c] * s / 2,
                                                   r * r / np.maximum(2 * mu[c] * s, 1e-300)))
                loss = np.maximum(r, 0)
            out[c, cols[0]] = (C * h).sum()
            out[c, cols[1]] = (C * loss).sum()
            if P is W:
                out[c, 2] = (C * u).sum()
                out[c, 3] = (C * s * u * u).sum()
                out[c, 4] = ((u > 0) & (u < 1)).sum() if not squared else 0
                out[c, 5] = (u != 0).sum()
                G[:, c] = Xd.T @ (C * u * yc)
    return out, G


@pytest.mark.parametrize("unit", [False, True])
@pytest.mark.parametrize("squared", [False, True])
@pytest.mark.parametrize("B", [0.0, 1.0, 3.0])
def test_fused_pass_matches_dense(unit, squared, B):
    X = _block(unit=unit)
    n, d = X.shape
    rng = np.random.default_rng(1)
    y = rng.integers(0, 3, n).astype(np.int32)            # class ids: three one-vs-rest models
    pos = np.arange(3, dtype=np.int32)
    Cp, Cn = np.array([1.0, 2.0, 0.5]), np.array([1.0, 0.3, 4.0])
    mu = np.array([0.7, 0.05, 3.0])
    W = rng.normal(size=(d + 1, 3)) * 0.3
    V = rng.normal(size=(d + 1, 3)) * 0.3
    out_s, out_G, slack = np.zeros((3, N_SUMS)), np.zeros((d + 1, 3)), np.full(3, np.inf)
    data = np.zeros(0) if unit else X.data
    out_P = np.zeros((d + 2, 3))
    nesvm_rows((X.indptr, X.indices, data), unit, y, Costs(pos, Cp, Cn, False, B), mu, squared,
               W, V, True, np.empty((3, 3)), out_G, out_s, slack, out_P)
    want, G = _dense_sums(X, y, pos, Cp, Cn, mu, B, W, V, squared)
    if not squared:     # the positive side (a free bias, hinge): the rows of y_ic = +1 alone
        for c in range(3):
            rows = y == pos[c]
            side, Gc = _dense_sums(X[rows], y[rows], pos, Cp, Cn, mu, B, W, V, squared)
            np.testing.assert_allclose(out_P[:-1, c], Gc[:, c], rtol=1e-12, atol=1e-12)
            assert out_P[-1, c] == pytest.approx(side[c, 2], rel=1e-12, abs=1e-12)
    Xd = np.hstack([X.toarray(), np.full((n, 1), B)])
    norms = np.sqrt((Xd ** 2).sum(axis=1))
    for c in range(3):
        m = np.where(y == pos[c], 1.0, -1.0) * (Xd @ W[:, c])
        with np.errstate(divide="ignore", invalid="ignore"):
            want_slack = np.where(norms > 0, (m - 1) / norms, -np.inf).min()
        assert slack[c] == pytest.approx(want_slack, rel=1e-12)
    np.testing.assert_allclose(out_s, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(out_G, G, rtol=1e-12, atol=1e-12)


def test_smoothed_hinge_bounds_and_gradient():
    """Theorem 1 (h_μ ≤ h ≤ h_μ + μ s/2) and the gradient −Aᵀ(C u) against finite
    differences (spec §8)."""
    X = _block(n=60, d=8, empty_row=False, seed=3)
    y = np.where(np.arange(60) % 3 == 0, 1.0, -1.0).astype(np.float32)
    B, mu = 1.0, 0.4
    costs = Costs(np.ones(1, np.int32), np.ones(1), np.ones(1), False, B)
    rng = np.random.default_rng(2)
    w = rng.normal(size=(9, 1))

    def f(w):
        s, G = np.zeros((1, N_SUMS)), np.zeros((9, 1))
        nesvm_rows((X.indptr, X.indices, X.data), False, y, costs, np.full(1, mu), False,
                   np.ascontiguousarray(w), w, False, np.empty((3, 1)), G, s, np.full(1, np.inf),
                   np.empty((0, 1)))
        return s[0], G[:, 0]
    s, G = f(w)
    Xd = np.hstack([X.toarray(), np.ones((60, 1))])
    smax = np.abs(Xd).max(axis=1)
    assert s[0] <= s[1] + 1e-12 and s[1] <= s[0] + mu / 2 * smax.sum() + 1e-12
    eps = 1e-6
    fd = np.array([(f(w + eps * e[:, None])[0][0] - f(w - eps * e[:, None])[0][0]) / (2 * eps)
                   for e in np.eye(9)])
    np.testing.assert_allclose(fd, -G, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("scaled", [True, False])
@pytest.mark.parametrize("B", [0.0, 1.0])
def test_power_product_and_statistics(scaled, B):
    X = _block(n=50, d=10, seed=5)
    n, d = X.shape
    Xd = np.hstack([X.toarray(), np.full((n, 1), B)])
    s = np.abs(Xd).max(axis=1)
    q = (Xd ** 2).sum(axis=1)
    w = np.where(s > 0, 1 / np.where(s > 0, s, 1), 0.0) if scaled else np.ones(n)
    M = Xd.T @ (Xd * w[:, None])
    V = np.random.default_rng(0).normal(size=(d + 1, 4))
    out, st = np.zeros((d + 1, 4)), np.zeros(4)
    nesvm_power((X.indptr, X.indices, X.data), False, B, scaled, V, np.empty(4), out, st)
    np.testing.assert_allclose(out, M @ V, rtol=1e-12, atol=1e-12)
    nz = s > 0
    np.testing.assert_allclose(st, [s.sum(), q.sum(), (q[nz] / s[nz]).sum(),
                                    (q[nz] / s[nz]).max()], rtol=1e-12)
    # spec §5: Λ_S ≤ Σ q/s ≤ n·max q/s
    lam = np.linalg.eigvalsh((Xd[nz].T / s[nz]) @ Xd[nz]).max()
    assert lam <= st[2] * (1 + 1e-12) <= n * st[3] * (1 + 1e-12)
