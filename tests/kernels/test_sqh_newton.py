"""dcd's primal Newton for one squared-hinge model against LIBLINEAR -s 2 and dense numpy:
the optimum, the dual certificate it reports, and its inputs (bias, no bias, unit values)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.kernels._sqh_newton import sqh_newton

from ..conftest import data_file

sk = pytest.importorskip("sklearn.datasets")


def _run(X, y, label, Cp, Cn, B, tol, w0=None, max_steps=100):
    n, d = X.shape
    Xt = (X.indptr.astype(np.int64), X.indices.astype(np.int32), X.data.astype(np.float32))
    unit = X.data.size > 0 and bool(np.all(X.data == 1.0))
    if unit:
        Xt = (Xt[0], Xt[1], np.empty(0, np.float32))
    w = np.zeros((d + 1, 1)) if w0 is None else w0.reshape(d + 1, 1).copy()
    alpha, margin, info = np.empty(n), np.empty(n, np.float32), np.zeros(5)
    work = (np.empty(n, np.int64), np.empty((5, n)), np.zeros((6, d + 1, 1)))
    sqh_newton(Xt, unit, y, (label, Cp, Cn, B), w, (tol, max_steps), work, (alpha, margin, info))
    return w[:, 0], alpha, margin, info


def _dense(X, y, label, Cp, Cn, B, w):
    """``(P(w̄), z, C_i, x̄)`` in dense numpy (float32 values, as the kernel reads them)."""
    Xd = np.hstack([X.toarray().astype(np.float32).astype(np.float64),
                    np.full((X.shape[0], 1), B)])
    yc = np.where(y == label, 1.0, -1.0)
    C = np.where(yc > 0, Cp, Cn)
    z = yc * (Xd @ w)
    P = 0.5 * w @ w + np.sum(C * np.maximum(0.0, 1 - z) ** 2)
    return P, z, C, Xd, yc


@pytest.fixture(scope="module")
def pendigits():
    X, y = sk.load_svmlight_file(str(data_file("pendigits/pendigits")))
    return sp.csr_matrix(X[:1500]), y[:1500]       # features up to 100: dual CD is slow


@pytest.mark.parametrize("B", [1.0, 0.0])
def test_reaches_liblinear_primal_newton_and_reports_a_true_certificate(pendigits, B):
    lib = pytest.importorskip("liblinear.liblinearutil")
    X, y = pendigits
    label, Cp, Cn = 3.0, 2.0, 0.5
    w, alpha, margin, info = _run(X, y, label, Cp, Cn, B, 1e-6)
    P, z, C, Xd, yc = _dense(X, y, label, Cp, Cn, B, w)
    # its reported values are the primal at w̄ and the dual at α = 2 C_i (1 - z_i)+
    np.testing.assert_allclose(alpha, 2 * C * np.maximum(0.0, 1 - z), rtol=1e-9, atol=1e-9)
    v = Xd.T @ (yc * alpha)
    D = alpha.sum() - 0.5 * v @ v - np.sum(alpha ** 2 / (4 * C))
    np.testing.assert_allclose([info[3], info[4]], [P, D], rtol=1e-9)
    assert 0 <= info[3] - info[4] <= 1e-6 * info[3]
    np.testing.assert_allclose(margin, z, rtol=1e-5, atol=1e-4)    # signed, float32
    # the same optimum as LIBLINEAR -s 2 at a tight -e (its weights, our objective)
    # the bias goes in the parameter: train() resets the problem's bias to the parameter's
    # (-B -1 by default), and m.w then has no bias entry: reading one reads past its end
    prob = lib.problem(np.where(y == label, 1, -1), X)
    m = lib.train(prob, lib.parameter(f"-s 2 -c 1 -w1 {Cp} -w-1 {Cn} -e 1e-8 -B {B or -1} -q"))
    d = X.shape[1]
    assert m.nr_feature == d and m.bias == (B or -1)
    ref = np.array([m.w[i] for i in range(d + (1 if B else 0))]) * (1 if m.label[0] == 1 else -1)
    if not B:
        ref = np.append(ref, 0.0)
    P_ref = _dense(X, y, label, Cp, Cn, B, ref)[0]
    assert P <= P_ref * (1 + 1e-6)
    if not B:
        assert w[-1] == 0.0


def test_warm_start_and_step_limit(pendigits):
    """From a point near the optimum it takes fewer steps; at max_steps it stops with the
    true (larger) gap of its last iterate."""
    X, y = pendigits
    w_opt, _, _, info = _run(X, y, 1.0, 1.0, 1.0, 1.0, 1e-8)
    _, _, _, warm = _run(X, y, 1.0, 1.0, 1.0, 1.0, 1e-8, w0=w_opt * (1 + 1e-3))
    assert warm[0] < info[0]
    w1, _, _, one = _run(X, y, 1.0, 1.0, 1.0, 1.0, 1e-8, max_steps=1)
    assert one[0] == 1 and one[3] - one[4] > 1e-8 * one[3]
    assert one[3] == pytest.approx(_dense(X, y, 1.0, 1.0, 1.0, 1.0, w1)[0], rel=1e-9)


def test_unit_values_and_empty_rows():
    rng = np.random.default_rng(0)
    X = sp.random(300, 40, density=0.1, format="csr", random_state=1)
    X.data[:] = 1.0
    X = sp.vstack([X, sp.csr_matrix((2, 40))]).tocsr()      # two empty rows
    y = rng.integers(0, 3, size=302).astype(float)
    w, alpha, _, info = _run(X, y, 2.0, 1.0, 1.0, 1.0, 1e-8)
    P = _dense(X, y, 2.0, 1.0, 1.0, 1.0, w)[0]
    assert np.isfinite(w).all() and info[3] == pytest.approx(P, rel=1e-9)
    assert 0 <= info[3] - info[4] <= 1e-8 * info[3]
