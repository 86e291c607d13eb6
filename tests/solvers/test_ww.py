"""``ww`` (spec_002): the Weston–Watkins SVM by dual block CD with Walrus — the optimum
against an independent solve of the dual, W consistent with β, the k = 2 reduction to the
binary hinge SVM, the declared joint objective, resume."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.optimize

from streamsvm._evaluate import evaluate
from streamsvm._train import train
from streamsvm.exceptions import ConvergenceWarning
from streamsvm.io import InMemoryStore
from streamsvm.kernels import Costs
from streamsvm.schedule import PassScheduler
from streamsvm.solvers.ww import WestonWatkinsSolver

from .test_conformance import check_kill_and_resume
from .test_newton import _load


def _fit(X, y, chunk_rows=100, **kw):
    kw.setdefault("max_passes", 400)
    kw.setdefault("bias", 0.0)                  # the paper's setting, these tests' problem
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return train(InMemoryStore(X, y, chunk_rows=chunk_rows), solver="ww", **kw)


def _slot_classes(y, k):
    """Class of each slot per row (spec §1.4, 0-based)."""
    s = np.arange(k - 1)[None, :]
    return np.where(s == y[:, None] - 1, 0, s + 1)


def _weights(X, y, beta, k):
    """W = Σ_i x_i β_iᵀ π σ_{y_i}: +Σβ_i in column y_i, −β_is in the column of slot s."""
    n = X.shape[0]
    A = np.zeros((n, k))
    A[np.arange(n), y] = beta.sum(axis=1)
    np.subtract.at(A, (np.repeat(np.arange(n), k - 1), _slot_classes(y, k).ravel()),
                   beta.ravel())
    return np.asarray(X.T @ A)


def test_optimum_matches_an_independent_solve_of_the_dual():
    # the dual D2 (a box-constrained QP) by L-BFGS-B, knowing nothing of Walrus or blocks
    X, y = _load("dna/dna.scale", 300)
    classes, yi = np.unique(y, return_inverse=True)
    k, n, C = len(classes), X.shape[0], 0.1

    def g(b):
        beta = b.reshape(n, k - 1)
        W = _weights(X, yi, beta, k)
        Z = np.asarray(X @ W)                                   # scores z_i = Wᵀx_i
        G = Z[np.arange(n), yi][:, None] - Z[np.arange(n)[:, None], _slot_classes(yi, k)] - 1
        return 0.5 * float((W * W).sum()) - b.sum(), G.ravel()
    res = scipy.optimize.minimize(g, np.zeros(n * (k - 1)), jac=True, method="L-BFGS-B",
                                  bounds=[(0, C)] * (n * (k - 1)),
                                  options={"ftol": 1e-15, "gtol": 1e-10, "maxiter": 20000})
    best = -res.fun                                                 # max D = min P
    model, r = _fit(X, y, C=C, tol=1e-8, gap_decay=0.0, max_passes=2000)
    assert r.converged and r.stop_value <= 1e-8
    assert r.primal == pytest.approx(best, rel=1e-6)
    # the declared joint problem's objective on the data is the primal the solver reports
    assert evaluate(model, InMemoryStore(X, y))["objective"] == pytest.approx(r.primal, rel=1e-9)
    assert model.coef.shape == (k, X.shape[1])


def _beta_gamma(solver):
    """β and γ of every row, from the RAM slab for the rows it holds."""
    beta, gamma = solver.beta.to_array(), solver.gamma.to_array()
    ram = solver.rows.ram
    if ram is not None:
        beta[ram.ids], gamma[ram.ids] = ram.local["ww.beta"], ram.local["ww.gamma"]
    return beta, gamma


@pytest.mark.parametrize("slab", [True, False], ids=["whole-store-in-ram", "streamed"])
def test_weights_stay_the_image_of_beta_and_beta_stays_in_its_box(slab):
    X, y = _load("dna/dna.scale", 400)
    classes, yi = np.unique(y, return_inverse=True)
    k = len(classes)
    solver = WestonWatkinsSolver(C=0.5, class_weight={1: 2.0}, slab=slab)
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=37), memory="64MB")
    try:
        solver.check_store(sched.store)
        solver.start(sched)
        assert solver.whole == slab
        for _ in range(5):
            entry = solver.step(sched)
        assert (solver.rows.ram is not None) == slab
        beta, gamma = _beta_gamma(solver)
        Cy = np.where(classes[yi] == 1, 1.0, 0.5)
        assert np.all(beta >= 0) and np.all(beta <= Cy[:, None])
        np.testing.assert_allclose(gamma, beta.sum(axis=1), rtol=1e-12)
        np.testing.assert_allclose(solver.gsum[0], gamma.sum(), rtol=1e-12)
        np.testing.assert_allclose(solver.W[:-1], _weights(X, yi, beta, k), atol=1e-10)
        assert entry["primal"] >= entry["dual"]
    finally:
        sched.close()


def test_two_classes_are_the_binary_hinge_svm_with_the_same_c():
    # spec §7.12: WW with C on two classes = the binary hinge SVM with 2C, u = w_+ − w_−; ww
    # solves it with C/2, so that C means the binary problem every solver solves
    X, y = _load("a9a/a9a", 600, 123)
    ww, r = _fit(X, y, C=0.1, bias=1.0, tol=1e-6, gap_decay=0.0, max_passes=2000)
    assert ww.problem["C"] == 0.1 and ww.params["C"] == 0.1
    assert r.converged and ww.coef.shape == (1, 123)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        dcd, rd = train(InMemoryStore(X, y, chunk_rows=100), solver="dcd", loss="hinge", C=0.1,
                        bias=1.0, tol=1e-7, max_passes=2000)
    store = InMemoryStore(X, y)
    f_ww, f_dcd = evaluate(ww, store)["objective"], evaluate(dcd, store)["objective"]
    assert f_ww == pytest.approx(f_dcd, rel=2e-6)
    assert f_ww == pytest.approx(r.primal, rel=1e-9)
    np.testing.assert_allclose(ww.coef, dcd.coef, atol=2e-3 * np.abs(dcd.coef).max())


def test_stops_by_the_papers_gap_decay_rule_and_reports_both():
    X, y = _load("vowel/vowel.scale")
    model, r = _fit(X, y, C=1.0, tol=1e-12)           # only gap_decay can stop it
    assert r.converged
    last = r.history[-1]
    assert last["gap_decay"] <= 0.0009 and last["gap"] > 1e-12
    assert all(np.isnan(h["gap_decay"]) for h in r.history[:1])


def test_kill_and_resume_is_bit_identical_on_multiclass(tmp_path):
    X, y = _load("dna/dna.scale", 500)
    store = InMemoryStore(X, y, chunk_rows=120)
    check_kill_and_resume(lambda **kw: train(store, solver="ww", C=0.1, tol=1e-4,
                                             memory="64MB", **kw), tmp_path)


def test_ram_slab_sweeps_save_passes_over_the_store_and_reach_the_same_optimum():
    X, y = _load("vowel/vowel.scale")
    slab, rs = _fit(X, y, C=1.0, tol=1e-4, gap_decay=0.0, max_passes=2000)
    plain, rp = _fit(X, y, C=1.0, tol=1e-4, gap_decay=0.0, max_passes=2000, slab=False)
    assert rs.converged and rp.converged
    # one history entry per pass over the store; the slab's sweeps are in `passes`
    assert len(rs.history) * 5 < len(rp.history)
    assert any(h["slab_sweeps"] > 1 for h in rs.history)
    assert rs.primal == pytest.approx(rp.primal, rel=2e-4)
    # the slab holds every row here: the last certificate came from it, exact, no store pass
    assert rs.history[-1]["kind"] == "slab" and rs.history[-1]["gap"] <= 1e-4
    assert evaluate(slab, InMemoryStore(X, y))["objective"] == pytest.approx(rs.primal,
                                                                            rel=1e-9)


def test_estimator_fits_predicts_and_clones():
    sklearn_base = pytest.importorskip("sklearn.base")
    import streamsvm as ss
    X, y = _load("dna/dna.scale", 600)
    clf = ss.WestonWatkinsSVC(C=0.1, memory="64MB").fit(X, y)
    assert "solver" not in clf.get_params() and clf.model_.params["solver"] == "ww"
    assert clf.converged_
    assert clf.coef_.shape == (3, X.shape[1]) and clf.score(X, y) > 0.9
    assert set(clf.predict(X)) <= set(np.unique(y))
    twin = sklearn_base.clone(clf)
    assert twin.get_params() == clf.get_params()


@pytest.mark.parametrize("name, paper", [("dna/dna.scale", 95.11), ("letter/letter.scale", 71.70)])
def test_papers_test_accuracy_at_its_c_and_stopping_rule(name, paper):
    # spec §6.6, Table 6: C = 2^-4, no bias, stopped at DG_t ≤ 0.0009·DG_1 (tol out of the way)
    X, y = _load(name)
    Xt, yt = _load(name + ".t", n_features=X.shape[1])
    model, r = _fit(X, y, chunk_rows=1000, C=2.0 ** -4, tol=1e-12, max_passes=2000)
    assert r.converged and r.history[-1]["gap_decay"] <= 0.0009
    acc = 100 * float(np.mean(model.predict(Xt) == yt))
    assert abs(acc - paper) <= 0.3, (acc, paper)


def test_chunk_size_invariance_on_multiclass_data():
    X, y = _load("dna/dna.scale", 300)
    objectives = []
    for chunk_rows in (1, 37, 300):
        model, r = _fit(X, y, chunk_rows=chunk_rows, C=0.1, tol=1e-6, gap_decay=0.0,
                        max_passes=2000)
        assert r.converged
        objectives.append(evaluate(model, InMemoryStore(X, y))["objective"])
    assert max(objectives) - min(objectives) <= 2e-6 * min(objectives)


def test_max_passes_returns_the_newest_weights_certified_by_a_check():
    # the last pass certifies the weights it started from; at max_passes the newest ones
    # (after the slab's sweeps, which stop at the budget) get a read-only pass of their own
    X, y = _load("dna/dna.scale", 500)
    model, r = _fit(X, y, C=0.1, max_passes=3)
    assert not r.converged and r.history[-1]["kind"] == "check"
    assert r.passes <= 3 + 1 + 1          # a sweep begun under the budget, then the check
    assert np.abs(model.coef).sum() > 0
    assert evaluate(model, InMemoryStore(X, y))["objective"] == pytest.approx(r.primal, rel=1e-9)


# -- the distributed loop a dask cluster runs (solvers/_ww_cocoa.py) ------------------------

def _round(X, yi, k, C, W, state, rows, sigma, eta, full=True):
    """One worker's round over ``rows`` (kernels/_ww_cocoa.py): the settle of the last
    steps ``eta``, then the epoch; returns (ΔW, ΔW_b, sums, room)."""
    from streamsvm.kernels import row_sq_norms
    from streamsvm.kernels._ww_cocoa import ww_cocoa_rows, ww_cocoa_settle
    beta, gamma, dbeta, active, due = state
    Xc = X[rows].tocsr()
    Xb = (Xc.indptr, Xc.indices, Xc.data)
    q = np.empty(len(rows))
    row_sq_norms(Xb, 0.0, q)
    sub = [a[rows] for a in state]
    out, room = np.zeros(8), np.full(1, np.inf)
    ww_cocoa_settle(yi[rows], np.full(k, C), sub[0], sub[1], sub[2], np.asarray(eta), out)
    dW, dWb = np.zeros_like(W), np.zeros_like(W)
    scratch = (np.empty(k), np.empty(k), np.empty(k - 1), np.empty(k - 1), np.empty(k),
               np.empty(k - 1), np.empty(k - 1), np.empty(k), np.empty(k - 1), np.empty(k))
    ww_cocoa_rows(Xb, False, yi[rows], q, np.arange(len(rows), dtype=np.int64), tuple(sub),
                  _joint_costs(k, C), (W, float(sigma), full), scratch, dW, dWb, out, room)
    for a, v in zip(state, sub):
        a[rows] = v
    return dW, dWb, out, room


def _joint_costs(k, C):
    """The kernels' costs of ``k`` classes of cost ``C``, no bias (kernels/_ww.py)."""
    return Costs(np.arange(k, dtype=np.int32), np.full(k, C), np.full(k, C), False, 0.0)


def _states(n, k):
    return (np.zeros((n, k - 1)), np.zeros(n), np.zeros((n, k - 1)), np.ones(n, np.uint8),
            np.ones(n, np.uint8))


def test_one_partition_with_unit_steps_is_the_plain_sweep():
    """σ' = 1, one partition, steps of 1: W + ΔW after each epoch is ww_epoch's W (up to the
    rounding of scores taken as W·x + ΔW·x), with the same β."""
    from streamsvm.kernels._ww import ww_epoch
    X, y = _load("dna/dna.scale", 200)
    _, yi = np.unique(y, return_inverse=True)
    k, n, d = 3, X.shape[0], X.shape[1]
    rows = np.random.default_rng(0).permutation(n)
    W0 = np.zeros((d + 1, k))
    state = _states(n, k)
    for _ in range(2):           # a second epoch starts from a non-zero W, as rounds do
        dW, _, _, _ = _round(X, yi, k, 0.5, W0, state, rows, 1.0, (1.0, 1.0))
        W0 += dW
    Xc = X.tocsr()
    W, b2, g2 = np.zeros((d + 1, k)), np.zeros((n, k - 1)), np.zeros(n)
    q = np.asarray(Xc.multiply(Xc).sum(axis=1)).ravel()
    for _ in range(2):
        ww_epoch((Xc.indptr, Xc.indices, Xc.data), False, yi, q, rows.astype(np.int64),
                 (b2, g2, np.ones(n, np.uint8)), _joint_costs(k, 0.5), (W, W, False, False),
                 (np.empty(k), np.empty(k), np.empty(k - 1), np.empty(k - 1), np.empty(k),
                  np.empty(k - 1), np.empty(k - 1), np.empty(k), np.empty(k, np.int64)),
                 np.zeros(4))
    np.testing.assert_allclose(W0, W, atol=1e-10)
    np.testing.assert_allclose(state[0], b2, atol=1e-10)


def test_partitions_with_the_best_steps_keep_w_of_beta_and_ascend_the_dual():
    """K = 3 partitions, σ' = 2, the client's best steps (bound and inside parts): after
    each settle W = W(β), β in its box, γ = Σ β, and the exact dual never decreases."""
    from streamsvm.solvers._cocoa import best_steps
    X, y = _load("dna/dna.scale", 300)
    _, yi = np.unique(y, return_inverse=True)
    k, n, C = 3, X.shape[0], 0.5
    parts = np.array_split(np.random.default_rng(1).permutation(n), 3)
    W = np.zeros((X.shape[1] + 1, k))
    state = _states(n, k)
    eta, duals, steps = (1.0, 1.0), [], []
    for epoch in range(8):
        res = [_round(X, yi, k, C, W, state, rows, 2.0, eta) for rows in parts]
        beta, gamma = state[0], state[1]
        np.testing.assert_allclose(W[:-1], _weights(X, yi, beta - state[2], k), atol=1e-10)
        assert np.all(beta >= 0) and np.all(beta <= C)
        duals.append((gamma.sum() - (state[2].sum())) - 0.5 * (W * W).sum())
        dW, dWb = sum(r[0] for r in res), sum(r[1] for r in res)
        s = sum(r[2] for r in res)
        room = np.minimum.reduce([r[3] for r in res])
        eta = best_steps(W.reshape(-1, 1), (dWb.reshape(-1, 1), (dW - dWb).reshape(-1, 1)),
                         np.array([[s[4], 0, 0, s[5], 0, 0]]), room)[0]
        W = W + eta[0] * dWb + eta[1] * (dW - dWb)
        steps.append(eta)
    assert np.all(np.diff(duals) >= -1e-12) and duals[-1] > duals[0]
    assert any(e[1] != 1.0 for e in steps)          # the step is chosen, not fixed


def test_epochs_over_the_active_rows_visit_the_due_rows_only():
    """A row a step skips or leaves unchanged sits out; an epoch that is not full visits
    only the rows ``due`` flags (ww_cocoa_due: active and in the round's part)."""
    from streamsvm.kernels._ww_cocoa import ww_cocoa_due
    X, y = _load("dna/dna.scale", 300)
    _, yi = np.unique(y, return_inverse=True)
    k, n = 3, X.shape[0]
    W = np.zeros((X.shape[1] + 1, k))
    state = _states(n, k)
    rows = np.arange(n)
    for _ in range(3):
        dW, _, out, _ = _round(X, yi, k, 0.5, W, state, rows, 1.0, (1.0, 1.0))
        W += dW
    active, due = state[3], state[4]
    assert 0 < active.sum() < n                     # some rows sit out
    slot = np.random.default_rng(2).integers(0, 2, n)
    out = np.zeros(8)
    ww_cocoa_due(active, slot, 1, due, out)
    np.testing.assert_array_equal(due, (active != 0) & (slot == 1))
    assert out[7] == active.sum()
    beta0 = state[0].copy()
    _, _, out, _ = _round(X, yi, k, 0.5, W, state, rows, 1.0, (1.0, 1.0), full=False)
    assert out[2] == due.sum() and out[0] == 0.0    # visited: the due rows; no loss summed
    untouched = due == 0
    np.testing.assert_array_equal(state[0][untouched], beta0[untouched])


def test_local_and_cluster_checkpoints_do_not_resume_each_other():
    """The local loop (RAM slab, shrinking flags) and the cluster's loop keep other
    states: each refuses the other's checkpoint by its version, saying why."""
    from streamsvm.exceptions import CheckpointError
    from streamsvm.solvers._ww_cocoa import WestonWatkinsCocoa
    local, cocoa = WestonWatkinsSolver(), WestonWatkinsCocoa()
    assert local.state_version != cocoa.state_version
    with pytest.raises(CheckpointError, match="dask cluster"):
        cocoa.load_state_dict({}, {"version": local.state_version})
    with pytest.raises(CheckpointError, match="where it was started"):
        local.load_state_dict({}, {"version": cocoa.state_version})
