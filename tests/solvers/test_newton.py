"""``newton`` (spec_000): the smoothed-hinge kernel, the ℓ1 line search, the pass's gradient
and Hessian, the optimum against LIBLINEAR, the ℓ1 path, fused against unfused passes."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm._train import train
from streamsvm.exceptions import ConvergenceWarning, InvalidParameterError
from streamsvm.io import InMemoryStore
from streamsvm.kernels._newton import smooth_hinge
from streamsvm.solvers.newton import linesearch_l1

from ..conftest import data_file
from .test_conformance import check_kill_and_resume
from .test_dcd import liblinear_objective, primal

sk = pytest.importorskip("sklearn.datasets")


def _load(name, n=None, n_features=None):
    X, y = sk.load_svmlight_file(str(data_file(name)), n_features=n_features)
    X = sp.csr_matrix(X)
    return (X[:n], y[:n]) if n else (X, y)


def _bundled_a9a(n=None):
    """a9a as the package bundles it (the tests that use it need no data folder)."""
    from streamsvm.data import sample_path
    X, y = sk.load_svmlight_file(str(sample_path("a9a")), n_features=123)
    X = sp.csr_matrix(X)
    return (X[:n], y[:n]) if n else (X, y)


def _fit(X, y, chunk_rows=500, **kw):
    kw.setdefault("max_passes", 200)
    kw.setdefault("loss", "hinge")              # the loss these tests are about
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return train(InMemoryStore(X, y, chunk_rows=chunk_rows), solver="newton", **kw)


# -- spec §8.1: the smoothed hinge ------------------------------------------------------------

def test_smooth_hinge_is_cancellation_free_and_its_derivatives_agree():
    for alpha in (1e-10, 1e-4, 1.0, 10.0):
        z = np.concatenate([-np.logspace(-12, 8, 60), [0.0], np.logspace(-12, 8, 60)])
        out = np.empty((len(z), 3))
        smooth_hinge(z, alpha, out)
        j, j1, j2 = out.T
        # exact in long double where no cancellation occurs: ½(z + √(α² + z²)), and for
        # z < 0 the conjugate form ½α²/(√(α²+z²) − z), both with relative error ~1e-15
        zl, al = z.astype(np.longdouble), np.longdouble(alpha)
        r = np.sqrt(al * al + zl * zl)
        with np.errstate(divide="ignore"):
            exact = np.where(zl >= 0, 0.5 * (zl + r), 0.5 * al * al / (r - zl))
        np.testing.assert_allclose(j, exact.astype(float), rtol=1e-13)
        assert np.all(j > 0) and np.all(j - np.maximum(z, 0) <= alpha / 2 * (1 + 1e-12))
        assert np.all((j1 >= 0) & (j1 <= 1)) and np.all(j2 > 0)
    # j'' against finite differences of j', j' against those of j (moderate values)
    z = np.linspace(-3, 3, 41)
    h = 1e-6
    for alpha in (0.1, 1.0):
        out, lo, hi = (np.empty((len(z), 3)) for _ in range(3))
        smooth_hinge(z, alpha, out)
        smooth_hinge(z - h, alpha, lo)
        smooth_hinge(z + h, alpha, hi)
        np.testing.assert_allclose(out[:, 1], (hi[:, 0] - lo[:, 0]) / (2 * h), atol=1e-7)
        np.testing.assert_allclose(out[:, 2], (hi[:, 1] - lo[:, 1]) / (2 * h), atol=1e-5)


def test_smooth_hinge_at_margins_whose_square_overflows():
    """``r = √(α² + z²)`` (a square root, not ``hypot``) switches to ``r = |z|`` before ``z²``
    overflows: finite values with the conjugate forms' accuracy out to ±1e300."""
    z = np.concatenate([-np.logspace(140, 300, 33), np.logspace(140, 300, 33)])
    for alpha in (1e-10, 1.0, 10.0):
        out = np.empty((len(z), 3))
        smooth_hinge(z, alpha, out)
        j, j1, _ = out.T
        zl, al = z.astype(np.longdouble), np.longdouble(alpha)
        r = np.sqrt(al * al + zl * zl)
        with np.errstate(divide="ignore"):            # (the branch np.where does not take)
            exact = np.where(zl >= 0, 0.5 * (zl + r), 0.5 * al * al / (r - zl))
        np.testing.assert_allclose(j, exact.astype(float), rtol=1e-13)
        np.testing.assert_array_equal(j1, np.where(z > 0, 1.0, j1))
        assert np.all(np.isfinite(out)) and np.all((j1 >= 0) & (j1 <= 1))


# -- spec §8.3: the ℓ1 line search ------------------------------------------------------------

def _phi(s, w, d, b, a, pen):
    return a * s * s + b * s + pen @ np.abs(w + s * d)


def test_linesearch_l1_against_brute_force():
    rng = np.random.default_rng(0)
    for trial in range(300):
        m = int(rng.integers(1, 12))
        w = rng.normal(size=m) * (rng.random(m) < 0.7)
        d = rng.normal(size=m) * (rng.random(m) < 0.9)
        if trial % 5 == 0 and m > 1:        # ties: equal breakpoints
            d[1] = d[0] * (w[1] / w[0]) if w[0] != 0 and w[1] != 0 else d[1]
        a = float(rng.random() + 0.05)
        b = float(rng.normal() * 3)
        pen = np.full(m, float(rng.random() * 2))
        s, Z = linesearch_l1(w, d, b, a, pen)
        grid = np.linspace(0, 10, 20001)
        vals = np.array([_phi(t, w, d, b, a, pen) for t in grid])
        best = vals.min()
        assert s >= 0
        assert _phi(s, w, d, b, a, pen) <= best + 1e-9 * max(1.0, abs(best)), trial
        for j in Z:                          # landed exactly on the breakpoint of j
            assert abs(w[j] + s * d[j]) <= 1e-12 * max(1.0, abs(w[j]))


def test_linesearch_l1_without_l1_is_the_newton_step_and_zero_when_not_descent():
    w = np.array([1.0, -2.0, 0.0])
    d = np.array([0.5, 1.0, -1.0])
    s, Z = linesearch_l1(w, d, -4.0, 2.0, np.zeros(3))
    assert s == 1.0 and len(Z) == 0
    s, Z = linesearch_l1(w, d, 1.0, 2.0, np.zeros(3))
    assert s == 0.0


# -- spec §8.2: gradient and Hessian of one pass; chunk-size invariance -------------------------

@pytest.mark.parametrize("from_rows", [True, False])
def test_first_pass_gradient_and_hessian_match_the_formulas_for_any_chunking(from_rows,
                                                                             monkeypatch):
    """Summed in the pass (a store larger than the RAM slab's room) or from the rows kept
    in RAM at the accepted point (a store that fits: _newton_hessian.py), the same."""
    from streamsvm.solvers import _newton_hessian
    from streamsvm.solvers.newton import NewtonSolver
    from streamsvm.schedule import PassScheduler
    monkeypatch.setattr(_newton_hessian, "_LONG_ROWS", 0)     # (a9a's rows are short)
    if not from_rows:
        monkeypatch.setattr(PassScheduler, "store_fits_ram", lambda self, *a, **kw: False)
    X, y = _load("a9a/a9a", 300, 123)
    Xb = sp.hstack([X, np.ones((X.shape[0], 1))]).tocsr()
    z = 1.0 - y * 0.0                          # at w = 0
    coef = 2 * np.maximum(z, 0) * y            # C = 1
    g_ref = Xb.T @ coef
    H_ref = (Xb.T @ sp.diags(2.0 * (z > 0)) @ Xb).toarray()
    results = []
    every = np.ones(Xb.shape[1], dtype=bool)
    for chunk_rows in (1, 37, 300):
        solver = NewtonSolver(loss="squared_hinge")
        sched = PassScheduler(InMemoryStore(X, y, chunk_rows=chunk_rows), memory="64MB")
        solver.check_store(sched.store)
        solver.start(sched)
        assert solver.lazy_h == from_rows
        solver.step(sched)
        H = solver._dense_hessian(0, every)
        np.testing.assert_allclose(solver.gl[0, :, 0], g_ref, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(H, H_ref, rtol=1e-12, atol=1e-9)
        assert solver.primal[0] == pytest.approx(X.shape[0])   # loss 1 per row at w = 0
        results.append((solver.gl[0, :, 0].copy(), H.copy()))
        sched.close()
    for g, H in results[1:]:
        np.testing.assert_allclose(g, results[0][0], rtol=1e-13, atol=1e-12)
        np.testing.assert_allclose(H, results[0][1], rtol=1e-13, atol=1e-12)


# -- spec §8.4: the optimum ------------------------------------------------------------------

@pytest.mark.parametrize("name", ["a9a/a9a", "mushrooms/mushrooms"])
def test_l2_optimum_matches_liblinear(name):
    X, y = _load(name, n_features=123 if name.startswith("a9a") else None)
    y = np.where(y == y.max(), 1.0, -1.0)
    model, res = _fit(X, y, chunk_rows=4096, tol=1e-6, loss="squared_hinge")
    assert res.converged and res.stop_value <= 1e-6
    ref, _, _ = liblinear_objective(X, y, 1.0, "squared_hinge")
    ours = primal(X, y, model.coef[0], model.intercept[0], 1.0, "squared_hinge")
    assert ours <= ref * (1 + 1e-6), (ours, ref)
    assert res.passes <= 1.5 * res.n_iter + 1          # about one pass per Newton step


def _prox_reference(X, y, rho, iters=20000):
    """Accelerated proximal gradient (FISTA) on ½‖w‖² + ρ‖w‖₁ + Σ max(0, 1 − y xᵀw)²
    (no bias): a slow but independent reference."""
    Xd = X.toarray()
    L = 1.0 + 2.0 * np.linalg.norm(Xd, 2) ** 2
    w = v = np.zeros(Xd.shape[1])
    t = 1.0
    for _ in range(iters):
        z = np.maximum(0.0, 1.0 - y * (Xd @ v))
        grad = v - 2.0 * Xd.T @ (y * z)
        u = v - grad / L
        w_new = np.sign(u) * np.maximum(np.abs(u) - rho / L, 0.0)
        t_new = 0.5 * (1 + np.sqrt(1 + 4 * t * t))
        v = w_new + (t - 1) / t_new * (w_new - w)
        w, t = w_new, t_new
    z = np.maximum(0.0, 1.0 - y * (Xd @ w))
    return w, 0.5 * w @ w + rho * np.abs(w).sum() + z @ z


def test_l1_zero_model_at_rho_max_and_sparse_optimum_below():
    X, y = _load("a9a/a9a", 400, 123)
    rho_max = float(np.abs(X.T @ (2.0 * y)).max())     # the gradient at w = 0 (no bias)
    model, res = _fit(X, y, l1=rho_max * 1.001, bias=0.0, loss="squared_hinge")
    assert res.converged and np.all(model.coef == 0)
    model, res = _fit(X, y, l1=rho_max * 0.9, bias=0.0, tol=1e-8, loss="squared_hinge")
    assert res.converged and np.count_nonzero(model.coef) >= 1
    rho = 0.02 * rho_max
    model, res = _fit(X, y, l1=rho, bias=0.0, tol=1e-8, loss="squared_hinge")
    assert res.converged
    w_ref, f_ref = _prox_reference(X, y, rho)
    w = model.coef[0]
    z = np.maximum(0.0, 1.0 - y * (X @ w))
    f = 0.5 * w @ w + rho * np.abs(w).sum() + z @ z
    assert f <= f_ref * (1 + 1e-7)
    assert 0 < np.count_nonzero(w) < X.shape[1] // 2    # sparse
    assert set(np.flatnonzero(w)) == set(np.flatnonzero(np.abs(w_ref) > 1e-6))
    # KKT of the ℓ1 problem at the model: |g_j| ≤ ρ at zeros, g_j = −ρ sign(w_j) elsewhere
    g = w - 2.0 * X.T @ (y * z)
    zero = w == 0
    assert np.all(np.abs(g[zero]) <= rho * (1 + 1e-6))
    np.testing.assert_allclose(g[~zero], -rho * np.sign(w[~zero]), atol=1e-4 * rho)


# -- spec §8.6: fused and unfused passes --------------------------------------------------

def test_fused_and_unfused_passes_make_the_same_iterates():
    X, y = _load("a9a/a9a", 2000, 123)
    fused, rf = _fit(X, y, tol=1e-6, loss="squared_hinge")
    plain, rp = _fit(X, y, tol=1e-6, fused=False, loss="squared_hinge")
    np.testing.assert_array_equal(fused.coef, plain.coef)
    np.testing.assert_array_equal(fused.intercept, plain.intercept)
    assert rf.n_iter == rp.n_iter
    # unfused: the first evaluation, then a trial pass and an evaluation pass per step;
    # fused: the evaluation rides on the trial pass when its first trial is accepted
    assert rp.passes == 1 + 2 * rp.n_iter
    assert rf.passes == 1 + rf.n_iter


def test_one_vs_rest_and_free_bias_certify():
    X, y = _load("dna/dna.scale")
    model, res = _fit(X, y, tol=1e-3)
    assert res.converged and res.stop_value <= 1e-3 and model.coef.shape[0] == 3
    X, y = _load("a9a/a9a", 1500, 123)
    free, res = _fit(X, y, free_bias=True, tol=1e-4, loss="squared_hinge")
    assert res.converged
    reg, _ = _fit(X, y, tol=1e-4, loss="squared_hinge")
    assert free.intercept[0] != reg.intercept[0]
    # the free bias is not in the objective: a shifted intercept only changes the loss
    w, b = free.coef[0], free.intercept[0]
    loss = lambda b_: float(np.sum(np.maximum(0, 1 - y * (X @ w + b_)) ** 2))  # noqa: E731
    assert loss(b) <= min(loss(b + 1e-3), loss(b - 1e-3))


def test_refuses_what_it_cannot_train():
    X, y = _load("a9a/a9a", 100, 123)
    with pytest.raises(InvalidParameterError, match="'loss'"):
        _fit(X, y, loss="logistic")
    with pytest.raises(InvalidParameterError, match="free_bias"):
        _fit(X, y, free_bias=True, bias=0.0)
    with pytest.raises(InvalidParameterError, match="max_dense"):
        _fit(X, y, max_dense=50, hessian="dense")


# -- the hinge: smoothing continuation, certified by the polish ------------------------------

@pytest.mark.parametrize("name", ["a9a/a9a", "mushrooms/mushrooms"])
def test_hinge_optimum_matches_liblinear(name):
    X, y = _load(name, n_features=123 if name.startswith("a9a") else None)
    y = np.where(y == y.max(), 1.0, -1.0)
    model, res = _fit(X, y, chunk_rows=4096, tol=1e-4)
    assert res.converged and res.stop_value <= 1e-4
    ref, _, _ = liblinear_objective(X, y, 1.0, "hinge")
    ours = primal(X, y, model.coef[0], model.intercept[0], 1.0, "hinge")
    # the certified gap bounds the distance to the optimum, whatever the smoothing level
    assert ours <= ref * (1 + 1e-4), (ours, ref)
    assert abs(res.history[-1]["primal"] - ours) <= 1e-9 * ours
    last = res.history[-1]
    assert 0 < last["alpha"] < 1 and last["smoothing_bound"] > 0
    # a new smoothing level rides on the pass that solved the last one (speculated): the
    # level changes cost no evaluation pass of their own
    assert res.passes <= 1.5 * res.n_iter, (res.passes, res.n_iter)
    levels = [e["alpha"] for e in res.history]
    changed = [i for i in range(1, len(levels)) if levels[i] < levels[i - 1]]
    assert any(res.history[i]["kind"] == "try" for i in changed)



@pytest.mark.parametrize("from_rows", [True, False])
def test_a_later_trial_accepted_brings_its_evaluation_from_the_same_pass(from_rows, monkeypatch):
    # the pass evaluates g and H at the first _POINTS trials (or keeps the rows in RAM, the
    # Hessian summed there at the accepted point): when the full step overshoots and s/2
    # or s/4 is accepted, the cache taken from that point is the evaluation at the new
    # iterate (the formulas, recomputed here), and no evaluation pass follows
    from streamsvm.kernels._newton import smooth_hinge as jfun
    from streamsvm.solvers import _newton_hessian
    from streamsvm.solvers import newton as nw
    monkeypatch.setattr(_newton_hessian, "_LONG_ROWS", 0)     # (mushrooms' rows are short)
    if not from_rows:
        from streamsvm.schedule import PassScheduler
        monkeypatch.setattr(PassScheduler, "store_fits_ram", lambda self, *a, **kw: False)
    X, y = _load("mushrooms/mushrooms")
    y = np.where(y == y.max(), 1.0, -1.0)
    Xb = sp.hstack([X, np.ones((X.shape[0], 1))]).tocsr()
    seen, pending = [], []
    absorb, step = nw.NewtonSolver._absorb, nw.NewtonSolver.step

    def spy(self, c, res, w, p=0):
        absorb(self, c, res, w, p)
        if p > 0:
            assert self.lazy_h == from_rows
            pending.append((c, p, float(self.alpha[c]), self.W[:, c].copy(),
                            self.gl[0, :, c].copy()))

    def stepped(self, sched):              # (from the rows: summed at the step's end)
        out = step(self, sched)
        seen.extend((p, a, w, g, self.H[c, 0].copy()) for c, p, a, w, g in pending)
        pending.clear()
        return out
    monkeypatch.setattr(nw.NewtonSolver, "_absorb", spy)
    monkeypatch.setattr(nw.NewtonSolver, "step", stepped)
    model, res = _fit(X, y, chunk_rows=2000, tol=1e-3)
    assert res.converged and seen
    for p, alpha, w, g, H in seen[:3]:
        j = np.empty((X.shape[0], 3))
        jfun(1.0 - y * (Xb @ w), alpha, j)
        np.testing.assert_allclose(g, Xb.T @ (j[:, 1] * y), rtol=1e-9, atol=1e-9)
        keep = j[:, 2] >= 1e-6 / (2 * alpha)            # the kernel's curvature cutoff
        Hd = (Xb[keep].T @ sp.diags(j[keep, 2]) @ Xb[keep]).toarray()
        np.testing.assert_allclose(H, Hd, rtol=1e-9, atol=1e-9)
    # against one evaluation point per pass: the same certified answer in more passes
    monkeypatch.setattr(nw.NewtonSolver, "_absorb", absorb)
    monkeypatch.setattr(nw.NewtonSolver, "step", step)
    monkeypatch.setattr(nw, "_POINTS", 1)
    one, res1 = _fit(X, y, chunk_rows=2000, tol=1e-3)
    assert res1.converged and res1.passes > res.passes, (res1.passes, res.passes)


def test_hinge_certifies_where_dual_cd_crawls():
    # usps (2,007 rows, 256 dense features, 10 classes): dcd does not certify 1e-3 in 200
    # passes; the polish's dual bound does within a few dozen
    X, y = _load("usps/usps.t")
    model, res = _fit(X, y, chunk_rows=1000, tol=1e-3, max_passes=80)
    assert res.converged and res.stop_value <= 1e-3
    ref = sum(liblinear_objective(X, np.where(y == c, 1.0, -1.0), 1.0, "hinge")[0]
              for c in np.unique(y))
    ours = sum(primal(X, np.where(y == c, 1.0, -1.0), model.coef[j], model.intercept[j], 1.0,
                      "hinge") for j, c in enumerate(np.unique(y)))
    assert ours <= ref * (1 + 1e-3) + 1e-9


def test_hinge_without_polish_or_with_l1_still_certifies_an_honest_gap():
    X, y = _load("a9a/a9a", 1000, 123)
    model, res = _fit(X, y, polish=False, tol=1e-2)
    # the optimum bracketed by dcd at a 1e-9 gap (LIBLINEAR -e 1e-6 stops at its epoch cap
    # on this slice, at an objective that depends on the C library's rand() state, i.e. on
    # which tests called LIBLINEAR before in the same process)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, opt = train(InMemoryStore(X, y, chunk_rows=1000), solver="dcd", loss="hinge",
                       tol=1e-9, max_passes=20000)
    ours = primal(X, y, model.coef[0], model.intercept[0], 1.0, "hinge")
    # the smoothed duals alone: a valid bound, whatever tol it reached
    assert ours >= opt.dual * (1 - 1e-9)
    assert res.history[-1]["dual"] <= opt.primal * (1 + 1e-9)
    rho_max = float(np.abs(X.T @ y).max())            # hinge gradient at w = 0 (no bias)
    model, res = _fit(X, y, l1=rho_max * 1.001, bias=0.0, tol=1e-6)
    assert res.converged and np.all(model.coef == 0)
    model, res = _fit(X, y, l1=0.05 * rho_max, bias=0.0, tol=1e-3)
    assert res.converged and 0 < np.count_nonzero(model.coef) < X.shape[1]


# -- Hessian-free: conjugate gradient over the resident rows with curvature -----------------

@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_cg_reaches_the_dense_optimum_and_is_chosen_for_wide_data(loss):
    X, y = _load("a9a/a9a", 3000, 123)
    dense, rd = _fit(X, y, tol=1e-4, loss=loss, hessian="dense")
    # 124 Hessian columns > max_dense: auto picks cg (it used to refuse)
    cg, rc = _fit(X, y, tol=1e-4, loss=loss, max_dense=50)
    assert rd.converged and rc.converged and rc.stop_value <= 1e-4
    pd = primal(X, y, dense.coef[0], dense.intercept[0], 1.0, loss)
    pc = primal(X, y, cg.coef[0], cg.intercept[0], 1.0, loss)
    assert abs(pc - pd) <= 2e-4 * pd, (pc, pd)
    assert rc.passes <= 2 * rc.n_iter + 2               # still about a pass per step


def test_cg_without_room_for_its_rows_takes_jacobi_steps_and_stays_honest(monkeypatch):
    from streamsvm.schedule import _resident
    X, y = _load("a9a/a9a", 2000, 123)
    monkeypatch.setattr(_resident.ResidentRows, "_ram_room", lambda self: 0)
    model, res = _fit(X, y, tol=1e-2, hessian="cg", loss="squared_hinge", max_passes=60)
    ref, _, _ = liblinear_objective(X, y, 1.0, "squared_hinge")
    ours = primal(X, y, model.coef[0], model.intercept[0], 1.0, "squared_hinge")
    assert ours >= ref * (1 - 1e-9) and res.history[-1]["dual"] <= ref * (1 + 1e-9)
    assert res.history[-1]["primal"] <= res.history[1]["primal"]


def test_cg_kill_and_resume_is_bit_identical(tmp_path):
    # cg keeps its rows in RAM from one step to the next: a checkpoint records them
    X, y = _load("a9a/a9a", 1500, 123)
    store = InMemoryStore(X, y, chunk_rows=300)
    check_kill_and_resume(
        lambda **kw: train(store, solver="newton", loss="hinge", hessian="cg", tol=1e-4, **kw),
        tmp_path,
        stops=(2, 5))


@pytest.mark.parametrize("loss", ["hinge", "squared_hinge"])
def test_hessians_from_the_rows_kill_and_resume_is_bit_identical(tmp_path, loss, monkeypatch):
    # a store that fits in RAM: its rows stay there from one pass to the next and each
    # Hessian is summed from them after the pass; a checkpoint records the rows
    from streamsvm.solvers import _newton_hessian
    monkeypatch.setattr(_newton_hessian, "_LONG_ROWS", 0)     # (a9a's rows are short)
    X, y = _load("a9a/a9a", 1500, 123)
    store = InMemoryStore(X, y, chunk_rows=300)
    check_kill_and_resume(
        lambda **kw: train(store, solver="newton", loss=loss, tol=1e-4, **kw), tmp_path,
        stops=(2, 4))


@pytest.mark.parametrize("name, n", [("usps/usps.t", 600), ("a9a/a9a", 3000)])
def test_hessians_from_the_rows_are_the_pass_s_bit_for_bit(name, n, monkeypatch):
    # in RAM the Hessians are summed after the pass at the accepted points only, with the
    # pass's own arguments and reduction (dense rows by BLAS: usps; sparse: a9a): the same
    # iterates, passes and model as when every pass sums all of them (as on a cluster)
    from streamsvm.schedule import PassScheduler
    from streamsvm.solvers import _newton_hessian
    monkeypatch.setattr(_newton_hessian, "_LONG_ROWS", 0)     # (a9a's rows are short)
    X, y = _load(name, n, 123 if name.startswith("a9a") else None)
    fits = []
    for from_rows in (True, False):
        store = InMemoryStore(X, y, chunk_rows=n // 3)
        with pytest.MonkeyPatch.context() as mp:
            if not from_rows:
                mp.setattr(PassScheduler, "store_fits_ram", lambda self, *a, **kw: False)
            fits.append(train(store, solver="newton", loss="hinge", tol=1e-3))
    (a, ra), (b, rb) = fits
    assert ra.converged and ra.passes == rb.passes
    np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(a.intercept, b.intercept)


@pytest.mark.parametrize("name, n", [("usps/usps.t", 600), ("dna/dna.scale", 1200)])
def test_the_next_level_s_hessian_summed_late_or_with_its_level_gives_the_same_bits(
        name, n, monkeypatch):
    # the next smoothing level's Hessian is summed from the rows only when a model moves to
    # it (or with its level's, when its decrement says it soon will): whenever it is summed,
    # the same sums in the same order, so the same model; a guess that is always wrong
    # (never with its level) and one always early (always with it) agree bit for bit
    from streamsvm.solvers import _newton_hessian, _newton_polish
    monkeypatch.setattr(_newton_polish, "_crawls", lambda Z, C: False)   # (CD, L-BFGS-B)
    monkeypatch.setattr(_newton_polish, "ipm_fits", lambda *a: False)
    X, y = _load(name, n)
    sums = []
    real = _newton_hessian._sum_slots

    def count(solver, sched, slots, first=0):
        sums.append(first)
        return real(solver, sched, slots, first)

    monkeypatch.setattr(_newton_hessian, "_sum_slots", count)
    fits = []
    for soon in (-np.inf, np.inf):
        monkeypatch.setattr(_newton_hessian, "_SOON", soon)
        sums.clear()
        fits.append((*train(InMemoryStore(X, y, chunk_rows=n // 3), solver="newton",
                            loss="hinge", tol=1e-3), list(sums)))
    (a, ra, late), (b, rb, early) = fits
    assert ra.converged and ra.passes == rb.passes
    np.testing.assert_array_equal(a.coef, b.coef)
    np.testing.assert_array_equal(a.intercept, b.intercept)
    assert 1 in late and 1 not in early          # late: summed again at the level change


def test_the_polish_epochs_are_fewer_on_long_rows():
    # coordinate descent's epochs cost more on long rows, L-BFGS-B's products less there
    from streamsvm.solvers._newton_polish import _MIN_EPOCHS, _POLISH_EPOCHS, _epochs
    short = sp.random(50, 300, density=0.03, random_state=0, format="csr")
    long = sp.random(50, 300, density=0.9, random_state=0, format="csr")
    for M, want in ((short, _POLISH_EPOCHS), (long, _MIN_EPOCHS)):
        X = (M.indptr.astype(np.int64), M.indices, M.data)
        assert _epochs(X, np.arange(50)) == want


# -- the dense Hessians against the memory budget --------------------------------------------

def _wide(n=3000, d=300, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.05, random_state=seed, format="csr")
    y = np.where(X @ rng.standard_normal(d) + 0.1 * rng.standard_normal(n) > 0, 1.0, -1.0)
    return X, y


def test_symmetrize_lower_gives_the_bits_of_tril_plus_its_transpose():
    from streamsvm.kernels._newton import symmetrize_lower
    rng = np.random.default_rng(0)
    for a in (1, 2, 7, 64):
        H = rng.standard_normal((a, a))
        H[rng.random((a, a)) < 0.2] = -0.0
        low = np.tril(H)
        want = low + np.tril(low, -1).T
        symmetrize_lower(H)
        assert H.tobytes() == want.tobytes()


def test_dense_hessians_that_do_not_fit_the_budget_take_the_cg_path(caplog):
    """Every run accumulator of a pass's Hessians is charged (one array per level of the
    reduction tree, the reordered copy, the Newton system): a budget they do not fit
    either runs Hessian-free (auto) or is refused (dense), never exceeded."""
    import logging
    X, y = _wide()
    big, rb = _fit(X, y, loss="squared_hinge", tol=1e-5, memory="1GB")
    with caplog.at_level(logging.INFO, logger="streamsvm.solvers.newton"):
        small, rs = _fit(X, y, loss="squared_hinge", tol=1e-5, memory="6MB")
    assert "Hessian-free (cg) path" in caplog.text
    assert rb.converged and rs.converged
    pb = primal(X, y, big.coef[0], big.intercept[0], 1.0, "squared_hinge")
    ps = primal(X, y, small.coef[0], small.intercept[0], 1.0, "squared_hinge")
    assert abs(ps - pb) <= 2e-5 * pb
    with pytest.raises(InvalidParameterError, match="memory"):
        _fit(X, y, loss="squared_hinge", memory="6MB", hessian="dense")


# -- under a memory budget: the polish's band and cg's rows sized to the RAM slab -----------

def _cost(rows, nnz):                     # 8 bytes an entry, 4 a row
    return np.asarray(nnz, dtype=float) * 8 + np.asarray(rows, dtype=float) * 4


def test_band_that_fits_narrows_to_the_room_from_the_histogram():
    from streamsvm.solvers._newton_pass import HIST_BINS, band_that_fits
    hist = np.zeros((2, HIST_BINS, 2))
    hist[0, 0] = (100, 1000)                  # 100 rows with |z| in (0.5/√2, 0.5], 1000 entries
    hist[1, 4] = (10, 100)                    # 10 rows of the second model in (0.5/8, 0.5/4·√2]
    cost = [8 * 1100 + 4 * 110, 8 * 100 + 4 * 10, 0]   # rows with |z| ≤ edges 0, 1…4, 5…
    assert band_that_fits(hist, 0.5, _cost, cost[0], (1.0, 0.7)) == 0.5
    assert band_that_fits(hist, 0.5, _cost, cost[0] - 1, (1.0, 0.7)) == 0.5 * 2 ** -0.5
    assert band_that_fits(hist, 0.5, _cost, cost[1] / 0.7 - 1, (1.0, 0.7)) == 0.5 * 2 ** -2.5
    assert band_that_fits(np.zeros((1, HIST_BINS, 2)), 0.5, _cost, 0, (1.0, 0.7)) == 0.5
    full = np.zeros((1, HIST_BINS, 2))
    full[0, -1] = (5, 50)                     # rows at the margin itself: none fits 0 bytes
    assert band_that_fits(full, 0.5, _cost, 0, (0.3, 0.3)) == -1.0


def test_polish_certifies_under_a_budget_too_small_for_its_full_band(monkeypatch):
    # a9a at 6 MB: the rows with |z| ≤ 0.5 do not fit the RAM slab. With the full band only
    # (before) no polish ran and the smoothed duals certified 1e-3 after 44 passes; the band
    # sized from the last pass's histogram of |z| keeps the rows nearest the margin: 6
    from streamsvm.solvers import newton as nw
    X, y = _bundled_a9a()
    model, res = _fit(X, y, chunk_rows=2000, loss="hinge", tol=1e-3, max_passes=60,
                      memory="6MB")
    bands = [h["polish_band"] for h in res.history]
    assert res.converged and res.passes <= 10, res.passes
    assert 0 < min(b for b in bands if b > 0) < 0.5 and res.history[-1]["polish_passes"] > 0
    ref, _, _ = liblinear_objective(X, y, 1.0, "hinge")
    ours = primal(X, y, model.coef[0], model.intercept[0], 1.0, "hinge")
    # above the certified dual bound, and within tol of LIBLINEAR's value (which stops short
    # of the optimum by an amount that depends on its rand() state: not a lower bound)
    assert res.history[-1]["dual"] * (1 - 1e-9) <= ours <= ref * (1 + 1e-3)
    monkeypatch.setattr(nw, "band_that_fits", lambda hist, band, *args: band)
    _, old = _fit(X, y, chunk_rows=2000, loss="hinge", tol=1e-3, max_passes=60, memory="6MB")
    assert old.passes >= 3 * res.passes and old.history[-1]["polish_passes"] == 0


def test_curvature_sample_is_unbiased_and_keeps_the_rows_that_weigh():
    from streamsvm.solvers._newton_pass import curvature_sample
    h = np.random.default_rng(0).exponential(size=(200_000, 2))
    curv = h > 0.01
    keep, weight = curvature_sample(h, curv, np.array([0.0, 2.0]), 12345)
    assert keep[:, 0].sum() == curv[:, 0].sum() and np.array_equal(weight[:, 0],
                                                                    np.where(curv[:, 0], h[:, 0], 0))
    assert keep[h[:, 1] >= 2.0, 1].all()                  # above τ: every row, weight h
    assert np.array_equal(weight[h[:, 1] >= 2.0, 1], h[h[:, 1] >= 2.0, 1])
    assert 0.2 < keep[:, 1].mean() < 0.6
    est, true = weight[:, 1].sum(), h[curv[:, 1], 1].sum()
    assert abs(est - true) <= 0.01 * true, (est, true)
    again, _ = curvature_sample(h[1000:2000], curv[1000:2000], np.array([0.0, 2.0]), 12345 + 1000)
    assert np.array_equal(again, keep[1000:2000])          # a function of the row id alone


def test_threshold_that_fits_expects_the_room_at_most_and_is_the_smallest_edge():
    from streamsvm.solvers._newton_pass import (H_BINS, H_TOP, _curvature_histogram,
                                                threshold_that_fits)
    rng = np.random.default_rng(1)
    h = rng.exponential(size=(50_000, 1)) ** 3
    lens = rng.integers(1, 60, size=50_000)
    hist = np.zeros((1, H_BINS, 4))
    _curvature_histogram(h, h > 0, lens, hist)
    assert hist[0, :, 0].sum() == 50_000 and hist[0, :, 1].sum() == lens.sum()

    def expected(t):
        p = np.minimum(1.0, h[:, 0] / t) if t > 0 else np.ones(50_000)
        return float((p * (lens * 12 + 40)).sum())

    assert threshold_that_fits(hist, lambda r, n: n * 12.0 + r * 40.0, expected(0) + 1)[0] == 0.0
    for room in (0.5 * expected(0), 0.1 * expected(0)):
        t = threshold_that_fits(hist, lambda r, n: n * 12.0 + r * 40.0, room)[0]
        assert t > 0 and expected(t) <= room * (1 + 1e-9)
        assert expected(t / 2) > room                     # the next edge down would not fit
        assert np.log2(t) == H_TOP - round(H_TOP - np.log2(t))


def test_a_polish_works_within_its_budget_and_goes_on_from_its_duals(monkeypatch):
    from streamsvm.solvers import _newton_certificate as nc
    X, y = _bundled_a9a(4000)
    seen = []

    def polish(sl, rows, *args):
        found, visits = real(sl, rows, *args)
        if rows:
            seen.append((args[-1], visits, max(len(r) for r in rows.values())))
        return found, visits

    real = nc.polish
    monkeypatch.setattr(nc, "polish", polish)
    model, res = _fit(X, y, chunk_rows=1000, loss="hinge", tol=1e-3, polish_work=0.05)
    assert res.converged and len(seen) >= 2
    # one polish's row visits: its budget, at most an epoch of its rows past it
    assert all(visits <= budget + rows for budget, visits, rows in seen), seen
    assert any(visits >= budget for budget, visits, rows in seen)     # the budget binds
    bound = max(budget for budget, _, _ in seen)
    seen.clear()
    _, free = _fit(X, y, chunk_rows=1000, loss="hinge", tol=1e-3, polish_work=0)
    assert free.converged and max(visits for _, visits, _ in seen) > 2 * bound


def test_a_budget_with_no_room_in_ram_is_said_once_naming_the_memory_to_give(monkeypatch):
    """When the blocks in flight and the per-row state take the whole budget, newton keeps no
    rows for its polish (nor, with cg, for its Newton steps): the run goes on, but the user
    is told once, with the budget above which rows fit."""
    from streamsvm.schedule._resident import ResidentRows
    from streamsvm.solvers._newton_hessian import warn_no_room
    X, y = _bundled_a9a(4000)
    monkeypatch.setattr(ResidentRows, "ram_room", lambda self: -3_000_000)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        _, res = train(InMemoryStore(X, y, chunk_rows=500), solver="newton", loss="hinge",
                       memory="6MB", max_passes=4)
    said = [str(w.message) for w in got if "no room in RAM" in str(w.message)]
    assert len(said) == 1 and res.passes >= 2, said
    assert said[0].startswith("newton: the memory budget leaves no room in RAM for the rows "
                              "its hinge polish keep")
    assert said[0].endswith(f"rows fit only above memory={6 + 3 + 1}MB")
    assert all(h["polish_band"] == -1 for h in res.history)

    class Solver:
        cg, polishing = True, False
    sched = type("Sched", (), {"memory": 200_000_000})()
    for room, warned in ((1, False), (0, True), (-1, False)):   # once per run, from room ≤ 0
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            warn_no_room(Solver, sched, room)
        assert len(got) == int(warned)
        if warned:
            assert "no room in RAM for the rows its Newton steps keep" in str(got[0].message)
            assert str(got[0].message).endswith("above memory=201MB")
