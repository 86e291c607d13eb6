"""``nesvm`` (spec_001): the C-SVM optimum certified by its duality gap against dcd's, the
LS-SVM against its closed form, the LP-SVM against an LP solver, the Lipschitz constant and
its cache in the store, the safeguard, the homotopy modes, the pass counter, a path of C
values, one-vs-rest and errors."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import scipy.optimize
import scipy.sparse as sp

import streamsvm as ss
from streamsvm._evaluate import evaluate
from streamsvm._train import train
from streamsvm.exceptions import ConvergenceWarning, InvalidParameterError
from streamsvm.io import InMemoryStore, open_store, verify_store, write_store

from ..conftest import data_file

DERIVED = "nesvm.lipschitz.gram_over_inf.B=1.0"


def _load(name, n, n_features):
    sk = pytest.importorskip("sklearn.datasets")
    X, y = sk.load_svmlight_file(str(data_file(name)), n_features=n_features)
    return sp.csr_matrix(X[:n]), y[:n]


@pytest.fixture(scope="module")
def a9a():
    return _load("a9a/a9a", 600, 123)


def _bounds(store, C):
    """``(D, P)`` around P* from dcd at a relative gap of 1e-9 (or where it stopped)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, res = train(store, solver="dcd", loss="hinge", C=C, tol=1e-9, max_passes=5000)
    return res.dual, res.primal


def _optimum(store, C):
    return _bounds(store, C)[1]


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_csvm_certified_against_dcd(a9a, C):
    X, y = a9a
    n = 600 if C < 100 else 200
    store = InMemoryStore(X[:n], y[:n], chunk_rows=97)
    model, res = train(store, solver="nesvm", loss="hinge", C=C, max_passes=30000)
    assert res.converged and res.stop_value <= 1e-3
    lo, hi = _bounds(store, C)
    # within tol of dcd's optimum, and the certificate bounds the true suboptimality (spec
    # §4.4): nesvm's dual bound is below every primal value
    assert lo - 1e-9 <= res.primal <= hi * (1 + 1e-3)
    assert res.dual <= hi + 1e-9
    assert evaluate(model, store)["objective"] == pytest.approx(res.primal, rel=1e-12)


@pytest.mark.parametrize("C", [0.01, 1.0, 100.0])
def test_squared_hinge_certified_against_dcd(a9a, C):
    """The default loss: the L2-SVM, its dual point 2C max(0, r) feasible, so the gap bounds
    the distance to dcd's optimum of the same problem."""
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=97)
    model, res = train(store, solver="nesvm", C=C, max_passes=30000)
    assert model.params["loss"] == "squared_hinge"
    assert res.converged and res.stop_value <= 1e-3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, ref = train(store, solver="dcd", C=C, tol=1e-9, max_passes=5000)
    assert ref.dual - 1e-9 <= res.primal <= ref.primal * (1 + 1e-3)
    assert res.dual <= ref.primal + 1e-9
    assert evaluate(model, store)["objective"] == pytest.approx(res.primal, rel=1e-12)
    X, y = _load("dna/dna.scale", 300, 180)
    store = InMemoryStore(X, y, chunk_rows=100)
    model, res = train(store, solver="nesvm", C=C)
    _, ref = train(store, solver="dcd", C=C, tol=1e-9, max_passes=5000)
    assert res.converged and res.primal <= ref.primal * (1 + 1e-3)


def test_csvm_mushrooms_and_one_vs_rest():
    X, y = _load("mushrooms/mushrooms", 800, 112)
    store = InMemoryStore(X, y, chunk_rows=200)
    _, res = train(store, solver="nesvm", loss="hinge", C=0.01)
    assert res.converged and res.primal <= _optimum(store, 0.01) * (1 + 1e-3)
    X, y = _load("dna/dna.scale", 300, 180)
    store = InMemoryStore(X, y, chunk_rows=100)
    model, res = train(store, solver="nesvm", loss="hinge", C=0.1)
    assert res.converged and model.coef.shape == (3, 180)
    assert res.primal <= _optimum(store, 0.1) * (1 + 1e-3)


def test_lssvm_matches_the_closed_form(a9a):
    X, y = a9a[0][:300], a9a[1][:300]
    C = 0.1
    Xb = np.hstack([X.toarray(), np.ones((300, 1))])
    w = np.linalg.solve(np.eye(124) + 2 * C * Xb.T @ Xb, 2 * C * Xb.T @ y)
    P = 0.5 * w @ w + C * ((1 - y * (Xb @ w)) ** 2).sum()
    store = InMemoryStore(X, y, chunk_rows=70)
    model, res = train(store, solver="nesvm", loss="squared", C=C, tol=1e-8)
    assert res.converged and res.primal == pytest.approx(P, rel=1e-7)
    np.testing.assert_allclose(np.r_[model.coef[0], model.intercept], w, atol=1e-3)
    assert evaluate(model, store)["objective"] == pytest.approx(res.primal, rel=1e-12)


def test_lpsvm_matches_an_lp_solver(a9a):
    X, y = a9a[0][:200], a9a[1][:200]
    C = 0.1
    Xb = np.hstack([X.toarray(), np.ones((200, 1))])
    n, d = Xb.shape
    Ay = y[:, None] * Xb        # min Σ(p + q) + C Σ ξ  s.t.  y x̄·(p − q) ≥ 1 − ξ
    lp = scipy.optimize.linprog(np.r_[np.ones(2 * d), C * np.ones(n)],
                                A_ub=np.hstack([-Ay, Ay, -np.eye(n)]), b_ub=-np.ones(n),
                                bounds=(0, None), method="highs")
    store = InMemoryStore(X, y, chunk_rows=50)
    model, res = train(store, solver="nesvm", loss="hinge", penalty="l1", C=C, max_passes=20000)
    assert res.converged
    assert lp.fun - 1e-7 <= res.primal <= lp.fun * (1 + 1e-3)
    assert res.dual <= lp.fun + 1e-7
    assert evaluate(model, store)["objective"] == pytest.approx(res.primal, rel=1e-12)


def test_lipschitz_power_cached_in_the_store(a9a, tmp_path):
    X, y = a9a
    store = write_store(tmp_path / "s.zarr", X, y, chunk_rows=128, dtype="float64")
    _, first = train(store, solver="nesvm", loss="hinge", C=1.0)
    kinds = [h["kind"] for h in first.history]
    assert kinds.count("lipschitz") >= 1
    doc = json.loads((tmp_path / "s.zarr" / "zarr.json").read_text())
    entry = doc["attributes"]["streamsvm_derived"][DERIVED]["value"]
    # a valid upper bound, tight: λ_max(Σ x̄x̄ᵀ/s̄) on the dense rows
    Xb = np.hstack([X.toarray(), np.ones((X.shape[0], 1))])
    s = np.abs(Xb).max(axis=1)
    lam = np.linalg.eigvalsh((Xb.T / s) @ Xb).max()
    assert lam <= entry["lambda"] <= 1.02 * lam
    assert lam <= entry["stats"][2] <= X.shape[0] * entry["stats"][3]     # spec §5
    # the second run on the store spends no pass on it, and makes the same model
    store = open_store(tmp_path / "s.zarr")
    _, second = train(store, solver="nesvm", loss="hinge", C=1.0)
    assert [h["kind"] for h in second.history].count("lipschitz") == 0
    assert second.passes == first.passes - kinds.count("lipschitz")
    assert second.primal == first.primal
    # the store is still sound: its sealed attributes are untouched
    assert verify_store(str(tmp_path / "s.zarr"))["ok"]


def test_a_damaged_cache_entry_is_ignored(a9a, tmp_path):
    X, y = a9a
    store = write_store(tmp_path / "s.zarr", X, y, chunk_rows=128, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        train(store, solver="nesvm", loss="hinge", C=1.0, max_passes=40)
    path = tmp_path / "s.zarr" / "zarr.json"
    doc = json.loads(path.read_text())
    doc["attributes"]["streamsvm_derived"][DERIVED]["value"]["lambda"] *= 0.5
    path.write_text(json.dumps(doc))
    with pytest.warns(RuntimeWarning, match="damaged"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            _, res = train(open_store(path.parent), solver="nesvm", loss="hinge", C=1.0,
                           max_passes=2)
    assert res.history[0]["kind"] == "lipschitz"


def test_safeguard_recovers_from_a_too_small_constant(a9a, tmp_path, monkeypatch):
    """A Lipschitz constant 50× too small (a wrong cache entry with a valid CRC): the lagged
    descent test doubles L until the run converges (spec §5 item 5a)."""
    from streamsvm.io import _derived
    X, y = a9a
    store = write_store(tmp_path / "s.zarr", X, y, chunk_rows=128, dtype="float64")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        train(store, solver="nesvm", loss="hinge", C=1.0, max_passes=40)
    value, vecs = _derived.read_derived(store, DERIVED, with_array=True)
    value["lambda"] /= 50
    value["theta"] = [t / 50 for t in value["theta"]]
    _derived.write_derived(store, DERIVED, value, array=vecs)
    model, res = train(open_store(tmp_path / "s.zarr"), solver="nesvm", loss="hinge", C=1.0,
                       shrink_l=False)
    assert res.converged and res.primal <= _optimum(store, 1.0) * (1 + 1e-3)
    doubled = [a["lipschitz"] == 2 * b["lipschitz"] for b, a in zip(res.history, res.history[1:])
               if a["mu"] == b["mu"]]
    assert any(doubled)


def test_cli_c_path_writes_one_model_per_c(a9a, tmp_path, capsys):
    from streamsvm.cli import main
    from streamsvm.model import load_model
    X, y = a9a
    write_store(tmp_path / "s.zarr", X, y, chunk_rows=128)
    out = str(tmp_path / "m-C{C}.json")
    assert main(["train", str(tmp_path / "s.zarr"), "-o", out, "--solver", "nesvm",
                 "--C-path", "0.1,1", "-q"]) == 0
    for C in (0.1, 1.0):
        assert load_model(out.replace("{C}", f"{C:g}")).problem["C"] == C
    assert main(["train", str(tmp_path / "s.zarr"), "-o", str(tmp_path / "m.json"),
                 "--solver", "nesvm", "--C-path", "0.1,1", "-q"]) == 2
    assert "must contain {C}" in capsys.readouterr().err
    assert not (tmp_path / "m.json").exists()


def test_shrinking_l_to_the_local_curvature_saves_rounds(a9a):
    """L follows the secant curvature (well below the global bound near the optimum):
    fewer rounds to the same certified gap, and L below its global value at the end."""
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=101)
    _, local = train(store, solver="nesvm", loss="hinge", C=1.0)
    _, glob = train(store, solver="nesvm", loss="hinge", C=1.0, shrink_l=False)
    assert local.converged and glob.converged
    assert local.passes < glob.passes
    assert local.primal <= _optimum(store, 1.0) * (1 + 1e-3)
    last = local.history[-1]
    same_mu = [h["lipschitz"] for h in glob.history if h["mu"] == last["mu"]]
    assert not same_mu or last["lipschitz"] < max(same_mu)


def test_one_pass_per_round(a9a):
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=101)
    _, res = train(store, solver="nesvm", loss="hinge", C=1.0, homotopy="geometric", mu=0.5,
                   rho=0.5)
    assert [h["passes"] for h in res.history] == [float(i + 1) for i in range(len(res.history))]
    mus = [h["mu"] for h in res.history]
    assert mus == sorted(mus, reverse=True) and mus[-1] < 0.5


@pytest.mark.parametrize("mode", ["none", "harmonic", "geometric"])
def test_homotopy_modes_stop_after_their_last_stage(a9a, mode):
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=150)
    kw = {"mu": 5.0} if mode == "none" else {"mu": 1.0, "mu_min": 0.05}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        _, res = train(store, solver="nesvm", loss="hinge", C=1.0, homotopy=mode, **kw)
    said = any("smoothed problem of the last stage" in str(w.message) for w in caught)
    assert said == (res.stop_value > 1e-3)
    assert res.converged
    last = res.history[-1]
    assert last["mu"] == pytest.approx(5.0 if mode == "none" else 0.05)
    assert last["smoothed_gap"] <= 1e-3
    if mode == "none":    # the paper's μ = 5 does not solve the hinge SVM to 1e-3 (spec §2.3)
        assert res.stop_value > 1e-2


def test_c_path_shares_the_passes(a9a, tmp_path):
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=150)
    Cs = [0.01, 0.1, 1.0]
    models, res = train(store, solver="nesvm", loss="hinge", C_path=Cs)
    assert res.converged and len(models) == 3
    for C, m in zip(Cs, models):
        assert m.problem["C"] == C
        assert evaluate(m, store)["objective"] <= _optimum(store, C) * (1 + 1e-3)
    # (the same chunking: a pass's sums combine by reduction group, _reduce.py)
    est = ss.LinearSVC(solver="nesvm", loss="hinge", C_path=Cs, chunk_rows=150).fit(X, y)
    assert sorted(est.path_) == Cs
    np.testing.assert_array_equal(est.path_[0.1].coef_, models[1].coef)


@pytest.mark.parametrize("C", [0.1, 10.0])
def test_free_bias_certified_against_alm(a9a, C):
    """The paper's unregularized bias (Eq. 37): the same optimum as alm's free-bias hinge SVM
    (to tol), every reported dual a lower bound of it (the dual point rebalanced to Σ α y =
    0), and the declared problem's objective is the primal the solver reports."""
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=150)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        _, ref = train(store, solver="alm", loss="hinge", C=C, tol=1e-8, max_passes=20000)
    model, res = train(store, solver="nesvm", loss="hinge", C=C, free_bias=True, tol=1e-4,
                       max_passes=20000)
    assert res.converged and res.stop_value <= 1e-4
    assert ref.primal * (1 - 1e-7) <= res.primal <= ref.primal * (1 + 1e-4)
    assert all(h["dual"] <= ref.primal * (1 + 1e-9) for h in res.history
               if np.isfinite(h["dual"]))
    assert model.problem["bias_mode"] == "free"
    assert evaluate(model, store)["objective"] == pytest.approx(res.primal, rel=1e-9)
    # the regularized-bias problem is another one: its optimum is higher here
    _, reg = train(store, solver="nesvm", loss="hinge", C=C, tol=1e-4, max_passes=20000)
    assert reg.primal > res.primal


def test_errors():
    with pytest.raises(InvalidParameterError, match="free_bias"):
        train(InMemoryStore(np.eye(4), np.array([0, 1, 0, 1])), solver="nesvm",
              free_bias=True, penalty="l1")
    with pytest.raises(InvalidParameterError, match="free_bias"):
        train(InMemoryStore(np.eye(4), np.array([0, 1, 0, 1])), solver="nesvm",
              free_bias=True, bias=0.0)
    with pytest.raises(InvalidParameterError, match="C_path"):
        ss.LinearSVC(solver="nesvm", C_path=[1.0, -1.0]).fit(np.eye(2), [0, 1])
    X, y = np.eye(4), np.array([0, 1, 0, 1])
    with pytest.raises(InvalidParameterError, match="loss='hinge'"):
        train(InMemoryStore(X, y), solver="nesvm", loss="squared", penalty="l1")
    with pytest.raises(InvalidParameterError, match="'loss'"):       # nesvm's loss only
        train(InMemoryStore(X, y), solver="dcd", loss="squared")
    with pytest.raises(InvalidParameterError, match="Eq. 56"):
        train(InMemoryStore(X, y), solver="nesvm", loss="squared", lipschitz="paper")


def test_the_preconditioner_bounds_the_hessian(a9a):
    """L·M ≽ I + (C/μ) Σ x̄x̄ᵀ/s̄ up to the power iteration's accuracy (the safeguard covers
    the rest), with L set by the 8th eigenvalue instead of the 1st; M⁻¹ exact."""
    from streamsvm.schedule import PassScheduler
    from streamsvm.solvers import SOLVERS
    X, y = a9a
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=128), memory="256MB")
    s = SOLVERS["nesvm"](C=1.0)
    s.start(sched)
    while not np.isfinite(s.lam[0]):
        s.step(sched)
    Xb = np.hstack([X.toarray(), np.ones((X.shape[0], 1))])
    K = (Xb.T / np.abs(Xb).max(axis=1)) @ Xb
    H = np.eye(124) + 1.0 * K                   # C/μ = 1 at the first stage
    V, b = s.V[:, :-1], s._beta(0)
    M = np.eye(124) + (V * b) @ V.T
    w, U = np.linalg.eigh(M)
    Mh = (U / np.sqrt(w)) @ U.T
    true_L = np.linalg.eigvalsh(Mh @ H @ Mh).max()
    assert true_L <= 1.25 * s._L()[0] and s._L()[0] < np.linalg.eigvalsh(K).max() / 10
    g = np.random.default_rng(0).normal(size=124)
    np.testing.assert_allclose(s._minv(0, g), np.linalg.solve(M, g), atol=1e-10)
    sched.close()


def test_preconditioning_saves_rounds(a9a):
    X, y = a9a
    store = InMemoryStore(X, y, chunk_rows=101)
    _, pre = train(store, solver="nesvm", loss="hinge", C=1.0)
    _, plain = train(store, solver="nesvm", loss="hinge", C=1.0, precondition=False)
    assert pre.converged and plain.converged and pre.passes < plain.passes


def test_screening_skips_blocks_and_keeps_the_iterates():
    """Safe screening (spec §4.5) on nearly separable data: fewer rows read, the same model
    bit for bit (a skipped block adds exact zeros)."""
    X, y = _load("mushrooms/mushrooms", 2000, 112)
    order = np.argsort(y, kind="stable")          # blocks of one class: whole blocks far away
    store = InMemoryStore(X[order], y[order], chunk_rows=50)
    m0, plain = train(store, solver="nesvm", loss="hinge", C=0.01)
    m1, screened = train(store, solver="nesvm", loss="hinge", C=0.01, screening=True)
    assert screened.converged and screened.passes < plain.passes
    np.testing.assert_array_equal(m0.coef, m1.coef)
    assert screened.n_iter == plain.n_iter
    with pytest.raises(InvalidParameterError, match="screening"):
        train(store, solver="nesvm", loss="squared", screening=True)


@pytest.mark.parametrize("d", [1, 2, 6, 7])
def test_fewer_features_than_power_vectors_certify(d):
    """With n_features + 1 < 8 the block power iteration holds the whole space (it raised
    'could not broadcast (7,) into (8,)' on 6 features)."""
    rng = np.random.default_rng(d)
    X = rng.standard_normal((200, d))
    y = np.where(X @ rng.standard_normal(d) > 0, 1.0, -1.0)
    model, res = train(InMemoryStore(sp.csr_matrix(X), y, chunk_rows=50), solver="nesvm",
                       loss="hinge",
                       max_passes=3000)
    assert res.converged and res.stop_value <= 1e-3
