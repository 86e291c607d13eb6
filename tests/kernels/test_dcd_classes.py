"""One-vs-rest in RAM, class by class (``dcd_classes_epochs``): each listed class runs its own
epochs and its own exact checks, whatever the classes before it in the list did."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from streamsvm.kernels._dcd import dcd_classes_epochs
from streamsvm.kernels import Costs


def _problem(n=300, d=12, k=3, seed=0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.5, format="csr", random_state=rng, dtype=np.float32)
    centers = rng.normal(size=(k, d)).astype(np.float32)
    y = rng.integers(0, k, size=n).astype(np.int32)
    X = sp.csr_matrix(X.toarray() + centers[y], dtype=np.float32)
    return X, y


def _run(X, y, k, max_visits, tol=1e-3, seed=5):
    n, d = X.shape
    B = 1.0
    Xt = (X.indptr.astype(np.int64), X.indices, X.data)
    qd = (np.asarray(X.multiply(X).sum(axis=1)).ravel() + B * B).astype(np.float32)
    duals = (np.zeros((k, n)), np.ones((k, n), np.uint8), np.zeros((k, n), np.float32))
    model = (np.zeros((k, d + 1)), np.zeros((k, d)), np.zeros((k, 2)))   # bias weight last
    prob = Costs(np.arange(k, dtype=np.int32), np.ones(k), np.ones(k), False, B)
    shrink = (np.full(k, np.inf), np.full(k, -np.inf))
    control = (np.arange(k, dtype=np.int64), True, np.asarray(max_visits, np.int64), tol,
               n // 2, np.full(k, 0.1), np.zeros((k, 3), np.int64), True)
    rng = np.arange(1, k + 1, dtype=np.uint64) * np.uint64(seed)
    work = (np.empty(n, np.int64), np.empty((1, 3)), np.empty((1, 4)), np.empty(5))
    out = (np.zeros((k, 3)), np.zeros((k, 2)), np.zeros((k, 6)))
    dcd_classes_epochs(Xt, False, y, qd, duals, model, prob, shrink, control, rng, work, out)
    return duals, model, out


def _exact(X, y, c, alpha, w, b):
    """(primal, dual) of class c's binary hinge problem at (w, b) and its α (B = 1)."""
    s = np.where(y == c, 1.0, -1.0)
    m = s * (X @ w + b)
    reg = 0.5 * (w @ w + b * b)
    return reg + np.maximum(0.0, 1.0 - m).sum(), alpha.sum() - reg


def test_each_class_is_certified_by_its_own_exact_check():
    X, y = _problem()
    k, n = 3, X.shape[0]
    # class 0 may make a single visit (one epoch, not certified), classes 1 and 2 all they need
    duals, model, (pg, cert, info) = _run(X, y, k, [1, 10**6, 10**6])
    assert info[0, 0] == 1 and info[0, 1] == n and info[0, 5] == 0
    for c in (1, 2):
        assert info[c, 3] >= 1 and info[c, 5] == 1           # checked, certified
        W, wb = model[0][c][:-1], model[0][c][-1]
        s = np.where(y == c, 1.0, -1.0)
        # w = Σ y α x̄ (the bias as a feature of value 1)
        np.testing.assert_allclose(W, X.T @ (s * duals[0][c]), rtol=1e-9, atol=1e-9)
        assert abs(wb - (s * duals[0][c]).sum()) <= 1e-9 * max(1.0, abs(wb))
        primal, dual = _exact(X, y, c, duals[0][c], W, wb)
        np.testing.assert_allclose(cert[c], [primal, dual], rtol=1e-9)
        assert primal - dual <= 1e-3 * primal
        assert info[c, 1] >= info[c, 3] * n                  # a check reads every row


def test_a_class_is_run_the_same_whatever_ran_before_it():
    X, y = _problem(seed=1)
    k = 3
    full = _run(X, y, k, [10**6] * 3)
    starved = _run(X, y, k, [1, 10**6, 10**6])
    for c in (1, 2):                # its own random stream, thresholds and checks
        np.testing.assert_array_equal(full[1][0][c], starved[1][0][c])
        np.testing.assert_array_equal(full[2][2][c], starved[2][2][c])
