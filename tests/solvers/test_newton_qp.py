"""The polish's interior point (``solvers/_newton_qp.py``): the restricted hinge dual as a
box QP, against L-BFGS-B run to its limit and against the problem's optimality conditions;
and its use by newton where coordinate descent crawls."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from streamsvm.solvers._blas import single_blas
from streamsvm.solvers._newton_qp import ipm_cost, ipm_fits, solve_box_qp


def _f(Z, u, a):
    v = u + Z.T @ a
    return 0.5 * float(v @ v) - float(a.sum())


def _reference(Z, u, C):
    """L-BFGS-B to its limit: the optimum to about 1e-10."""
    def fg(a):
        v = u + Z.T @ a
        return 0.5 * float(v @ v) - float(a.sum()), Z @ v - 1.0
    opt = scipy.optimize.minimize(fg, np.zeros(len(C)), jac=True, method="L-BFGS-B",
                                  bounds=scipy.optimize.Bounds(0.0, C),
                                  options={"maxiter": 50000, "maxfun": 50000, "ftol": 1e-15,
                                           "gtol": 1e-12})
    return np.clip(opt.x, 0.0, C)


def _problem(m, D, seed, scale=1.0, rounded=False):
    rng = np.random.default_rng(seed)
    Z = rng.normal(size=(m, D)) * scale
    if rounded:                       # ties and repeated rows: a degenerate dual
        Z = np.round(Z)
        Z[m // 2:] = Z[:m - m // 2]
    Z *= rng.choice([-1.0, 1.0], size=(m, 1))
    u = rng.normal(size=D) * 0.5
    C = rng.choice([0.5, 1.0, 2.0], size=m)
    return Z, u, C


@pytest.mark.parametrize("m, D, scale, rounded", [
    (120, 200, 1.0, False),           # fewer rows than columns: Cholesky of Z Zᵀ
    (800, 17, 1.0, False),            # more rows: Sherman–Morrison–Woodbury
    (600, 9, 30.0, True),             # ill-conditioned, repeated rows (C·R² ~ 10^4)
    (40, 40, 0.1, False),             # most duals at their upper bound
])
def test_the_interior_point_reaches_the_box_qp_optimum(m, D, scale, rounded):
    Z, u, C = _problem(m, D, seed=m + D, scale=scale, rounded=rounded)
    with single_blas():
        a, iters = solve_box_qp(Z, u, C)
    assert 0 < iters <= 40
    assert np.all(a >= 0.0) and np.all(a <= C)            # dual feasible, as returned
    ref = _reference(Z, u, C)
    f, fref = _f(Z, u, a), _f(Z, u, ref)
    assert f <= fref + 1e-7 * (1.0 + abs(fref)), (f, fref)
    # the optimality conditions: the gradient vanishes on the free duals, points into the
    # box at the bounds
    g = Z @ (u + Z.T @ a) - 1.0
    tol = 1e-4 * (1.0 + np.abs(g).max())
    free = (a > 1e-6 * C) & (a < C * (1 - 1e-6))
    assert np.all(np.abs(g[free]) <= tol)
    assert np.all(g[a <= 1e-6 * C] >= -tol) and np.all(g[a >= C * (1 - 1e-6)] <= tol)


def test_a_better_starting_point_is_kept():
    Z, u, C = _problem(200, 30, seed=3)
    best = _reference(Z, u, C)
    a, _ = solve_box_qp(Z, u, C, a0=best)
    assert _f(Z, u, a) <= _f(Z, u, best)
    # a failed factorization ends the iterations at once: the point in the box stays
    bad = Z.copy()
    bad[0, 0] = np.nan
    a, iters = solve_box_qp(bad, u, C, a0=best)
    np.testing.assert_array_equal(a, best)


def test_its_cost_counts_the_smaller_side_cubed_and_fits_a_budget_by_it():
    assert ipm_cost(100, 1000) < ipm_cost(1000, 1000)
    assert ipm_cost(10_000, 20) < ipm_cost(10_000, 200)
    assert ipm_fits(200, 257, visits=10 ** 6) and not ipm_fits(200, 257, visits=10)


def test_newton_polishes_dense_ill_conditioned_rows_by_the_interior_point(monkeypatch):
    # pendigits (16 unscaled features, C·R² ~ 10^5): coordinate descent crawls, and
    # L-BFGS-B spent its whole budget on every polish (41 passes in memory); the interior
    # point solves the restricted dual exactly: a certified optimum in fewer passes
    from streamsvm.io import InMemoryStore
    from streamsvm._train import train
    from streamsvm.solvers import _newton_polish
    from .test_newton import _load
    X, y = _load("pendigits/pendigits", 3000)
    calls = []
    real = _newton_polish.solve_box_qp

    def spy(Zd, u, C, a0=None):
        calls.append(Zd.shape)
        return real(Zd, u, C, a0)

    fits = []
    for ipm in (True, False):
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_newton_polish, "solve_box_qp", spy)
            if not ipm:
                mp.setattr(_newton_polish, "_crawls", lambda Z, C: False)
                mp.setattr(_newton_polish, "ipm_fits", lambda *a: False)
            calls.clear()
            fits.append(train(InMemoryStore(X, y, chunk_rows=1000), solver="newton",
                              loss="hinge", C=1.0, tol=1e-3, max_passes=100))
            fits[-1] = (*fits[-1], len(calls))
    (_, ipm, n_ipm), (_, old, n_old) = fits
    assert n_ipm > 0 and n_old == 0
    assert ipm.converged and ipm.stop_value <= 1e-3
    assert ipm.passes < old.passes, (ipm.passes, old.passes)
