"""newton on dense rows: a block's margins and sums by BLAS (``dense_rows``), the polish's
dense copy of its rows, BLAS on one thread for a step of small Hessians (``small_blas``)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm._train import train
from streamsvm.io import InMemoryStore

from ..conftest import data_file

sk = pytest.importorskip("sklearn.datasets")


def _usps(n):
    X, y = sk.load_svmlight_file(str(data_file("usps/usps.t")))
    return sp.csr_matrix(X)[:n], y[:n]


def _spy_dense(monkeypatch):
    """Count the blocks whose margins and sums took the dense path (and the others)."""
    from streamsvm.solvers import _newton_pass
    seen = {"dense": 0, "csr": 0}
    real = _newton_pass.dense_rows

    def spy(block, unit, B, d, share=_newton_pass._DENSE_SHARE, most=None):
        out = real(block, unit, B, d, share, most)
        if share == _newton_pass._BLAS_SHARE:
            seen["dense" if out is not None else "csr"] += 1
        return out

    monkeypatch.setattr(_newton_pass, "dense_rows", spy)
    return seen


@pytest.mark.parametrize("from_rows", [True, False])
def test_dense_blocks_give_the_formulas_gradient_and_hessian(from_rows, monkeypatch):
    # usps's rows are dense: the pass's margins and gradient sums are BLAS products of
    # the block's dense copy (the bias its last column), the Hessians those of the rows
    from streamsvm.schedule import PassScheduler
    from streamsvm.solvers.newton import NewtonSolver
    if not from_rows:
        monkeypatch.setattr(PassScheduler, "store_fits_ram", lambda self, *a, **kw: False)
    seen = _spy_dense(monkeypatch)
    X, y = _usps(300)
    y = np.where(y == 1, 1.0, -1.0)
    Xb = sp.hstack([X, np.ones((X.shape[0], 1))]).tocsr()
    g_ref = Xb.T @ (2.0 * y)                        # at w = 0, C = 1: z = 1 on every row
    H_ref = (Xb.T @ Xb).toarray() * 2.0
    for chunk_rows in (37, 300):
        solver = NewtonSolver(loss="squared_hinge")
        sched = PassScheduler(InMemoryStore(X, y, chunk_rows=chunk_rows), memory="64MB")
        solver.check_store(sched.store)
        solver.start(sched)
        solver.step(sched)
        H = solver._dense_hessian(0, np.ones(Xb.shape[1], dtype=bool))
        np.testing.assert_allclose(solver.gl[0, :, 0], g_ref, rtol=1e-12, atol=1e-9)
        np.testing.assert_allclose(H, H_ref, rtol=1e-12, atol=1e-9)
        sched.close()
    assert seen["dense"] > 0 and seen["csr"] == 0


def test_dense_and_csr_margins_train_the_same_model(monkeypatch):
    # the BLAS path and the CSR kernels sum in different orders: the same passes, and the
    # same model to rounding (hinge, the polish on, one-vs-rest)
    from streamsvm.solvers import _newton_pass
    X, y = _usps(600)
    fits = []
    for share in (_newton_pass._BLAS_SHARE, 2.0):          # (2: no block is that dense)
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(_newton_pass, "_BLAS_SHARE", share)
            seen = _spy_dense(mp)
            fits.append(train(InMemoryStore(X, y, chunk_rows=200), solver="newton",
                              loss="hinge", tol=1e-3))
            assert (seen["dense"] > 0) == (share <= 1.0)
    (a, ra), (b, rb) = fits
    assert ra.converged and rb.converged and ra.passes == rb.passes
    np.testing.assert_allclose(a.coef, b.coef, rtol=1e-6, atol=1e-8)


def test_a_dense_copy_only_past_its_share_and_below_its_size():
    from streamsvm.schedule._blocks import Block
    from streamsvm.solvers._newton_pass import dense_rows
    X, y = _usps(40)
    X = X.astype(np.float32)
    block = Block(id=0, row_start=0, indptr=X.indptr, indices=X.indices, data=X.data, y=y,
                  rank=0)
    d = X.shape[1]
    Xd = dense_rows(block, False, 2.0, d, 0.5, 40 * (d + 1))
    np.testing.assert_array_equal(Xd, np.hstack([X.toarray(), np.full((40, 1), 2.0)]))
    assert dense_rows(block, False, 2.0, d, 0.5, 40 * (d + 1) - 1) is None   # too many
    assert dense_rows(block, False, 2.0, d, 1.0) is None                      # not dense
    unit = sp.csr_matrix((np.ones(X.nnz, np.float32), X.indices, X.indptr), shape=X.shape)
    ones = Block(id=0, row_start=0, indptr=X.indptr, indices=X.indices,
                 data=np.zeros(0, np.float32), y=y, rank=0)              # (binary values)
    np.testing.assert_array_equal(dense_rows(ones, True, 1.0, d)[:, :d], unit.toarray())


@pytest.mark.filterwarnings("ignore::streamsvm.exceptions.ConvergenceWarning")
def test_a_step_of_small_hessians_runs_blas_on_one_thread(monkeypatch):
    # below SMALL Hessian columns every BLAS call of a step runs on one thread (the
    # Newton systems here); from SMALL on, on the threads the process has outside it
    from threadpoolctl import threadpool_info
    from streamsvm.solvers import _blas, _newton_step

    def blas_threads():
        return {m["num_threads"] for m in threadpool_info() if m["user_api"] == "blas"}

    outside = blas_threads()
    seen = []
    real = _newton_step._solve

    def spy(H, r):
        seen.append(blas_threads())
        return real(H, r)

    monkeypatch.setattr(_newton_step, "_solve", spy)
    X, y = _usps(300)
    for small, want in ((_blas.SMALL, {1}), (1, outside)):   # usps: 257 columns
        monkeypatch.setattr(_blas, "SMALL", small)
        seen.clear()
        train(InMemoryStore(X, y, chunk_rows=100), solver="newton", loss="squared_hinge",
              max_passes=3)
        assert seen and all(s == want for s in seen)
    assert blas_threads() == outside


@pytest.mark.parametrize("name", ["usps/usps.t", "a9a/a9a"])
def test_the_polish_s_copy_of_its_rows_is_the_scaled_rows_bit_for_bit(name):
    # dense rows (usps) are copied straight into a dense array, sparse ones (a9a) kept as
    # CSR: either way the rows y_i (x_i, B), the same bits as scaling the sparse copy
    from streamsvm.solvers._newton_rows import SlabRows
    X, y = sk.load_svmlight_file(str(data_file(name)))
    X = sp.csr_matrix(X[:400]).astype(np.float32)
    r = np.arange(3, 400, 3)
    yc = np.where(y[r] > y.min(), 1.0, -1.0)
    B = 1.0
    S = SlabRows((X.indptr, X.indices, X.data), r, yc, B, X.shape[1])
    ref = sp.diags(yc) @ sp.hstack([X[r].astype(np.float64), np.full((len(r), 1), B)],
                                   format="csr")
    dense = name.startswith("usps")
    assert (S.Zd is not None) == dense and (S.Z is None) == dense
    w = np.linspace(-1.0, 1.0, X.shape[1] + 1)
    np.testing.assert_array_equal(S.dot(w), ref.toarray() @ w if dense else ref @ w)
    np.testing.assert_array_equal(S.dense(), ref.toarray())      # (a copy made on demand)


@pytest.mark.parametrize("pair_rows", [7, 1024])
def test_narrow_hessians_in_one_product_are_every_slot_s_sum(pair_rows, monkeypatch):
    # below _SYRK_COLS columns every slot's Hessian comes from one product of the rows'
    # pairwise products and the slots' curvatures: each slot's Σ h_i x_i x_iᵀ over the rows
    # at or above its cutoff (lower triangle), an infinite cutoff adding nothing
    from streamsvm.solvers import _newton_pass
    monkeypatch.setattr(_newton_pass, "_PAIR_ROWS", pair_rows)
    rng = np.random.default_rng(3)
    n, a, k, L = 50, 17, 3, 4
    Xd = rng.standard_normal((n, a))
    h = rng.random((L, n, k)) * (rng.random((L, n, k)) > 0.3)
    cutoff = np.full((k, L), 0.25)
    cutoff[1, 2] = np.inf
    out = rng.standard_normal((k, a, a, L))
    before = out.copy()
    _newton_pass._add_narrow(Xd, h, cutoff, out)
    low = np.tril_indices(a)
    for c in range(k):
        for lv in range(L):
            sel = (h[lv, :, c] > 0) & (h[lv, :, c] >= cutoff[c, lv])
            want = before[c, :, :, lv] + (Xd[sel].T * h[lv, sel, c]) @ Xd[sel]
            np.testing.assert_allclose(out[c, :, :, lv][low], want[low], rtol=1e-12,
                                       atol=1e-12)
            np.testing.assert_array_equal(np.triu(out[c, :, :, lv], 1),
                                          np.triu(before[c, :, :, lv], 1))
    np.testing.assert_array_equal(out[1, :, :, 2], before[1, :, :, 2])
