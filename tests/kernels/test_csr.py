"""CSR primitives against scipy.sparse: dtypes, empty rows, empty matrices, accumulation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.kernels import (csr_matmat, csr_matvec, csr_matvec_subset, csr_rmatmat_add,
                               csr_rmatvec_add, csr_rmatvec_subset_add, row_axpy, row_axpy_multi,
                               row_dot, row_dot_multi, row_sq_norms)

DTYPES = [(np.int32, np.float64), (np.int32, np.float32), (np.int64, np.float64),
          (np.int64, np.float32)]


def make_csr(n=37, d=23, density=0.3, index_dtype=np.int32, data_dtype=np.float64, seed=0):
    """CSR arrays (int64 indptr, as in a Chunk) with empty rows, and the float64 scipy twin."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: rng.standard_normal(k))
    X = X.astype(data_dtype)
    if n > 5:
        X = sp.csr_matrix(sp.diags((np.arange(n) % 5 != 2).astype(data_dtype)) @ X)  # empty rows
    X.sort_indices()
    arrays = (X.indptr.astype(np.int64), X.indices.astype(index_dtype), X.data.astype(data_dtype))
    return arrays, sp.csr_matrix(X, dtype=np.float64)


@pytest.fixture(params=DTYPES, ids=lambda p: f"{np.dtype(p[0]).name}-{np.dtype(p[1]).name}")
def csr(request):
    return make_csr(index_dtype=request.param[0], data_dtype=request.param[1])


def test_matrix_has_empty_rows(csr):
    (indptr, _, _), _ = csr
    assert np.any(np.diff(indptr) == 0)


def test_row_dot_and_row_axpy(csr):
    (indptr, indices, data), X = csr
    w = np.random.default_rng(1).standard_normal(X.shape[1])
    for i in range(X.shape[0]):
        assert row_dot(indptr, indices, data, i, w) == pytest.approx(X[i] @ w, rel=1e-12, abs=1e-12)
    out = np.ones(X.shape[1])
    row_axpy(indptr, indices, data, 4, -0.5, out)
    np.testing.assert_allclose(out, 1.0 - 0.5 * X[4].toarray().ravel(), rtol=1e-12)


def test_row_sq_norms(csr):
    (indptr, indices, data), X = csr
    out = np.full(X.shape[0], np.nan)
    row_sq_norms(indptr, indices, data, out)
    np.testing.assert_allclose(out, np.asarray(X.multiply(X).sum(axis=1)).ravel(), rtol=1e-12)


def test_csr_matvec(csr):
    (indptr, indices, data), X = csr
    w = np.random.default_rng(2).standard_normal(X.shape[1])
    out = np.full(X.shape[0], np.nan)
    csr_matvec(indptr, indices, data, w, out)
    np.testing.assert_allclose(out, X @ w, rtol=1e-12, atol=1e-12)


def test_csr_matvec_subset_leaves_other_rows(csr):
    (indptr, indices, data), X = csr
    w = np.random.default_rng(3).standard_normal(X.shape[1])
    rows = np.array([0, 3, 4, 11], dtype=np.int64)
    out = np.full(X.shape[0], -7.0)
    csr_matvec_subset(indptr, indices, data, rows, w, out)
    expected = np.full(X.shape[0], -7.0)
    expected[rows] = (X @ w)[rows]
    np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-12)


def test_csr_rmatvec_add_accumulates(csr):
    (indptr, indices, data), X = csr
    v = np.random.default_rng(4).standard_normal(X.shape[0])
    v[::3] = 0.0
    out = np.arange(X.shape[1], dtype=np.float64)
    csr_rmatvec_add(indptr, indices, data, v, out)
    np.testing.assert_allclose(out, np.arange(X.shape[1]) + X.T @ v, rtol=1e-12, atol=1e-12)


def test_csr_rmatvec_subset_add(csr):
    (indptr, indices, data), X = csr
    v = np.random.default_rng(5).standard_normal(X.shape[0])
    rows = np.array([1, 2, 8, 30], dtype=np.int32)
    out = np.ones(X.shape[1])
    csr_rmatvec_subset_add(indptr, indices, data, rows, v, out)
    np.testing.assert_allclose(out, 1.0 + X[rows].T @ v[rows], rtol=1e-12, atol=1e-12)


def test_multi_model_pair(csr):
    (indptr, indices, data), X = csr
    rng = np.random.default_rng(6)
    W = rng.standard_normal((X.shape[1], 4))
    out = np.full((X.shape[0], 4), np.nan)
    csr_matmat(indptr, indices, data, W, out)
    np.testing.assert_allclose(out, X @ W, rtol=1e-12, atol=1e-12)
    V = rng.standard_normal((X.shape[0], 4))
    acc = np.ones((X.shape[1], 4))
    csr_rmatmat_add(indptr, indices, data, V, acc)
    np.testing.assert_allclose(acc, 1.0 + X.T @ V, rtol=1e-12, atol=1e-12)


def test_row_multi_kernels(csr):
    (indptr, indices, data), X = csr
    rng = np.random.default_rng(7)
    W = rng.standard_normal((X.shape[1], 3))
    out = np.empty(3)
    row_dot_multi(indptr, indices, data, 6, W, out)
    np.testing.assert_allclose(out, np.ravel(X[6] @ W), rtol=1e-12, atol=1e-12)
    a = rng.standard_normal(3)
    acc = np.zeros((X.shape[1], 3))
    row_axpy_multi(indptr, indices, data, 6, a, acc)
    np.testing.assert_allclose(acc, np.outer(X[6].toarray().ravel(), a), rtol=1e-12)


@pytest.mark.parametrize("index_dtype,data_dtype", DTYPES[:2])
def test_empty_matrix(index_dtype, data_dtype):
    indptr = np.zeros(1, dtype=np.int64)
    indices, data = np.zeros(0, dtype=index_dtype), np.zeros(0, dtype=data_dtype)
    w, out0 = np.ones(5), np.zeros(0)
    csr_matvec(indptr, indices, data, w, out0)
    row_sq_norms(indptr, indices, data, out0)
    g = np.ones(5)
    csr_rmatvec_add(indptr, indices, data, np.zeros(0), g)
    csr_rmatvec_subset_add(indptr, indices, data, np.zeros(0, dtype=np.int64), np.zeros(0), g)
    csr_matmat(indptr, indices, data, np.ones((5, 2)), np.zeros((0, 2)))
    G = np.ones((5, 2))
    csr_rmatmat_add(indptr, indices, data, np.zeros((0, 2)), G)
    np.testing.assert_array_equal(g, np.ones(5))
    np.testing.assert_array_equal(G, np.ones((5, 2)))


def test_rows_without_entries_give_zero():
    indptr = np.zeros(4, dtype=np.int64)          # 3 rows, no stored values
    indices, data = np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
    out = np.full(3, np.nan)
    csr_matvec(indptr, indices, data, np.ones(2), out)
    np.testing.assert_array_equal(out, np.zeros(3))
    out2 = np.full((3, 2), np.nan)
    csr_matmat(indptr, indices, data, np.ones((2, 2)), out2)
    np.testing.assert_array_equal(out2, np.zeros((3, 2)))


def test_float32_data_accumulates_in_float64():
    indptr = np.array([0, 3], dtype=np.int64)
    indices = np.array([0, 1, 2], dtype=np.int32)
    data = np.array([1e8, 1.0, -1e8], dtype=np.float32)   # float32 sum would give 0
    w = np.ones(3, dtype=np.float32)
    assert row_dot(indptr, indices, data, 0, w) == 1.0
    out = np.zeros(1)
    row_sq_norms(indptr, indices, data, out)
    assert out[0] == 2e16 + 1.0


def test_scipy_int32_indptr_is_accepted():
    (_, _, _), X = make_csr(seed=3)
    w = np.arange(X.shape[1], dtype=np.float64)
    out = np.empty(X.shape[0])
    csr_matvec(X.indptr, X.indices, X.data, w, out)       # scipy's own int32 indptr
    np.testing.assert_allclose(out, X @ w, rtol=1e-12)


def test_wrong_output_shape_raises():
    (indptr, indices, data), X = make_csr()
    with pytest.raises(ValueError, match="out must have shape"):
        csr_matvec(indptr, indices, data, np.ones(X.shape[1]), np.empty(X.shape[0] - 1))
    with pytest.raises(ValueError, match="v must have shape"):
        csr_rmatvec_add(indptr, indices, data, np.ones(2), np.zeros(X.shape[1]))
    with pytest.raises(ValueError, match="out must have shape"):
        csr_matmat(indptr, indices, data, np.ones((X.shape[1], 2)), np.empty((X.shape[0], 3)))


def test_csr_take_rows(csr):
    from streamsvm.kernels._csr import csr_take_rows
    (indptr, indices, data), X = csr
    rows = np.array([5, 0, 2, 2, 36, 7], dtype=np.int64)           # repeats, empty rows
    nnz = int((indptr[rows + 1] - indptr[rows]).sum())
    out = (np.full(len(rows) + 1, -1, np.int64), np.empty(nnz, indices.dtype),
           np.empty(nnz, data.dtype))
    csr_take_rows(indptr, indices, data, rows, *out)
    got = sp.csr_matrix((out[2].astype(np.float64), out[1], out[0]), shape=(len(rows), X.shape[1]))
    assert (got != X[rows]).nnz == 0
    # no values kept (all-ones store): only indptr and indices are written
    empty = np.empty(0, data.dtype)
    out2 = (np.empty(len(rows) + 1, np.int64), np.empty(nnz, indices.dtype), empty)
    csr_take_rows(indptr, indices, empty, rows, *out2)
    np.testing.assert_array_equal(out2[0], out[0])
    np.testing.assert_array_equal(out2[1], out[1])


def test_csr_check_finds_each_kind_of_fault():
    from streamsvm.kernels import csr_check
    rng = np.random.default_rng(0)
    X = sp.random(200, 30, density=0.2, format="csr", random_state=1)
    X.sort_indices()
    ip, ix = X.indptr.astype(np.int64), X.indices.astype(np.int32)
    assert csr_check(ip, ix, 30, True) == (0, -1)
    for _ in range(50):
        p = int(rng.integers(0, len(ix)))
        row = int(np.searchsorted(ip, p, "right") - 1)
        for bad, code in ((30, 2), (-1, 2), (10**6, 2)):
            j = ix.copy()
            j[p] = bad
            assert csr_check(ip, j, 30, False) == (code, row)
    j = ix.copy()                       # a duplicate inside a row: only the strict check sees it
    r = int(np.flatnonzero(np.diff(ip) >= 2)[0])
    j[ip[r] + 1] = j[ip[r]]
    assert csr_check(ip, j, 30, False) == (0, -1) and csr_check(ip, j, 30, True) == (3, r)
    q = ip.copy()
    q[5] = q[6] + 1                     # decreasing pointer
    assert csr_check(q, ix, 30, False)[0] == 1
    q = ip.copy()
    q[-1] -= 1                          # does not end at nnz
    assert csr_check(q, ix, 30, False)[0] == 1
    assert csr_check(ip + 1, ix, 30, False) == (1, 0)          # does not start at 0
