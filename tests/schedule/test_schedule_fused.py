"""Fused passes as the solvers will write them: several kernels per block, one pass.

The example kernels here are small ``@njit`` functions on the CSR primitives, checked
against scipy on random data and on a slice of a9a.
"""

from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from streamsvm.io import InMemoryStore
from streamsvm.kernels import csr_matmat, csr_matvec, csr_rmatmat_add, csr_rmatvec_add, row_dot
from streamsvm.schedule import Accumulator, PassScheduler

from .helpers import a9a_problem, random_problem

C = 0.7


@njit(cache=True, nogil=True)
def sq_hinge_coef(y, margins, C, out_coef):
    """Squared-hinge loss of one block; ``out_coef`` gets d loss / d margin (0 if inactive).

    Parameters
    ----------
    y, margins : ndarray of shape (n_rows,)
    C : float
    out_coef : ndarray of shape (n_rows,)

    Returns
    -------
    float
        ``C Σ max(0, 1 - y_i m_i)²``.
    """
    loss = 0.0
    for i in range(y.shape[0]):
        z = 1.0 - y[i] * margins[i]
        if z > 0.0:
            loss += C * z * z
            out_coef[i] = -2.0 * C * y[i] * z
        else:
            out_coef[i] = 0.0
    return loss


@njit(cache=True, nogil=True)
def sq_hinge_trials(X, y, d, margins, steps, C, out_xd, out_losses):
    """Squared-hinge loss at ``w + s d`` for every trial step ``s``, from cached ``margins = Xw``.

    Parameters
    ----------
    X : CSR tuple of the block
    y, margins : ndarray of shape (n_rows,)
    d : ndarray of shape (n_features,)
    steps : ndarray of shape (n_steps,)
    C : float
    out_xd : ndarray of shape (n_rows,)
        Overwritten with ``X d`` (kept so the accepted step can update the margins).
    out_losses : ndarray of shape (n_steps,)
        The losses are added to it.
    """
    for i in range(y.shape[0]):
        xd = row_dot(X, False, i, d, 0)
        out_xd[i] = xd
        for s in range(steps.shape[0]):
            z = 1.0 - y[i] * (margins[i] + steps[s] * xd)
            if z > 0.0:
                out_losses[s] += C * z * z


def sq_hinge_reference(X, y, w, v):
    m = X @ w
    z = np.maximum(0.0, 1.0 - y * m)
    active = z > 0
    f = 0.5 * w @ w + C * np.sum(z ** 2)
    g = w - 2 * C * X.T @ (y * z)
    XI = X[active]
    hv = v + 2 * C * XI.T @ (XI @ v)
    return f, g, hv, int(active.sum())


def _fused(block, views, args, acc):
    """Loss, gradient and active-set Hessian-vector product of one block (a map_reduce
    kernel: the scheduler owns the d-vector accumulators, one per worker)."""
    (m,), (w, v) = views, args
    X = (block.indptr, block.indices, block.data)
    csr_matvec(X, w, m)
    coef = np.empty(block.n_rows)
    acc["loss"] += sq_hinge_coef(block.y, m, C, coef)
    csr_rmatvec_add(X, coef, acc["g"])
    xv = np.empty(block.n_rows)
    csr_matvec(X, v, xv)
    csr_rmatvec_add(X, np.where(coef != 0.0, 2 * C * xv, 0.0), acc["hv"])
    acc["n_active"] += np.count_nonzero(coef)


def newton_fused_pass(sched, margins, w, v):
    """f, full gradient and active-set Hessian-vector product: one map_reduce pass."""
    d = sched.n_features
    r = sched.map_reduce(_fused, args=(w, v), states=(margins,),
                         acc={"loss": Accumulator((), per_block=True),
                              "g": Accumulator(d), "hv": Accumulator(d),
                              "n_active": Accumulator((), per_block=True)})
    return 0.5 * w @ w + float(r["loss"]), w + r["g"], v + r["hv"], int(r["n_active"])


def _trials(block, views, args, acc):
    margins, xd = views
    d, steps = args
    sq_hinge_trials((block.indptr, block.indices, block.data), block.y, d[:, None], margins,
                    steps, C, xd, acc["losses"])


def _both(block, views, args, acc):
    XW, V = views
    (W,) = args
    X = (block.indptr, block.indices, block.data)
    csr_matmat(X, W, XW)
    csr_rmatmat_add(X, V, acc["XtV"])


@pytest.fixture(params=["random", "a9a"])
def problem(request):
    if request.param == "random":
        X, y = random_problem(n=257, d=31, seed=1)
    else:
        X, y = a9a_problem(2000)
    return X, np.where(y > 0, 1.0, -1.0)


@pytest.mark.parametrize("chunk_rows,block_rows", [(64, None), (1000, 37), (1, None)])
def test_newton_pass_loss_gradient_hessian_in_one_pass(problem, chunk_rows, block_rows):
    X, y = problem
    rng = np.random.default_rng(0)
    w, v = 0.5 * rng.standard_normal(X.shape[1]), rng.standard_normal(X.shape[1])
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=chunk_rows), block_rows=block_rows,
                          memory="64MB")
    margins = sched.state("margins", np.float64)
    f, g, hv, n_active = newton_fused_pass(sched, margins, w, v)
    f_ref, g_ref, hv_ref, n_active_ref = sq_hinge_reference(X, y, w, v)
    assert sched.passes == 1.0
    assert n_active == n_active_ref and 0 < n_active < X.shape[0]
    assert f == pytest.approx(f_ref, rel=1e-12)
    np.testing.assert_allclose(g, g_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(hv, hv_ref, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(margins.to_array(), X @ w, rtol=1e-12, atol=1e-12)


def test_armijo_trial_steps_in_one_pass_from_cached_margins(problem):
    X, y = problem
    rng = np.random.default_rng(1)
    w, d = 0.5 * rng.standard_normal(X.shape[1]), rng.standard_normal(X.shape[1])
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=50), memory="64MB")
    margins = sched.state("margins", np.float64)
    xd_state = sched.state("xd", np.float64)
    newton_fused_pass(sched, margins, w, d)                       # pass 1 caches Xw
    steps = 0.5 ** np.arange(8)
    losses = sched.map_reduce(_trials, args=(d, steps), states=(margins, xd_state),
                              acc={"losses": Accumulator(len(steps), per_block=True)},
                              order="random")["losses"]            # pass 2: every trial
    assert sched.passes == 2.0
    for s, loss in zip(steps, losses):
        expected = C * np.sum(np.maximum(0.0, 1.0 - y * (X @ (w + s * d))) ** 2)
        assert loss == pytest.approx(expected, rel=1e-11)
    s = steps[int(np.argmin(0.5 * np.sum((w + steps[:, None] * d) ** 2, axis=1) + losses))]

    margins.values[:] += s * xd_state.values                       # accept: no data pass
    assert sched.passes == 2.0
    np.testing.assert_allclose(margins.to_array(), X @ (w + s * d), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("memory", ["64MB", 0])
def test_multi_model_pass(memory):
    X, y = random_problem(n=150, d=20, seed=2)
    k = 5
    rng = np.random.default_rng(2)
    W, V = rng.standard_normal((20, k)), rng.standard_normal((150, k))
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=16), memory=memory)
    XW = sched.state("XW", np.float64, width=k)
    V_state = sched.state("V", np.float64, width=k)
    V_state.load_array(V)

    XtV = sched.map_reduce(_both, args=(W,), states=(XW, V_state),
                           acc={"XtV": Accumulator((sched.n_features, k))},
                           order="cyclic")["XtV"]
    assert XW.spilled == (memory == 0)
    np.testing.assert_allclose(XW.to_array(), X @ W, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(XtV, X.T @ V, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("memory", ["64MB", 0])
def test_per_row_state_of_width_k_minus_1(memory):
    X, y = random_problem(n=95, d=9, seed=3)
    k = 4
    sched = PassScheduler(InMemoryStore(X, y, chunk_rows=8), memory=memory, block_rows=3)
    beta = sched.state("beta", np.float64, width=k - 1)
    assert beta.shape == (95, k - 1)
    for sweep in range(3):
        for block in sched.blocks("random"):
            view = beta.view(block)
            assert view.shape == (block.n_rows, k - 1)
            rows = block.row_start + np.arange(block.n_rows)
            view += rows[:, None] * 10.0 + np.arange(k - 1) + sweep
    expected = 3 * (np.arange(95)[:, None] * 10.0 + np.arange(k - 1)) + (0 + 1 + 2)
    np.testing.assert_array_equal(beta.to_array(), expected)
