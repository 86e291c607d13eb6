"""CSR primitives against scipy.sparse: dtypes, unit values, empty rows and matrices."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from streamsvm.kernels import (csr_check, csr_matmat, csr_matvec, csr_rmatmat_add,
                               csr_rmatvec_add, csr_take_rows, indptr_check, kept_rows,
                               row_axpy, row_axpys, row_axpys_cols, row_dot, row_dots,
                               row_gather, row_sq_axpy, row_sq_norm, w_at, row_sq_norms,
                               take_rows, values_within)
from streamsvm.kernels._csr import row_outer_add

DTYPES = [(np.int32, np.float64), (np.int32, np.float32), (np.int64, np.float64),
          (np.int64, np.float32)]


def make_csr(n=37, d=23, density=0.3, index_dtype=np.int32, data_dtype=np.float64, seed=0,
             ones=False):
    """``X = (indptr, indices, data)`` (int64 indptr, as in a Block) with empty rows, and the
    float64 scipy twin; ``ones``: every value 1 and ``data`` empty (a store without data)."""
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=density, format="csr", random_state=rng,
                  data_rvs=lambda k: np.ones(k) if ones else rng.standard_normal(k))
    X = X.astype(data_dtype)
    if n > 5:
        X = sp.csr_matrix(sp.diags((np.arange(n) % 5 != 2).astype(data_dtype)) @ X)  # empty rows
    X.sort_indices()
    data = np.zeros(0, data_dtype) if ones else X.data.astype(data_dtype)
    return (X.indptr.astype(np.int64), X.indices.astype(index_dtype), data), \
        sp.csr_matrix(X, dtype=np.float64)


@pytest.fixture(params=DTYPES + [(np.int32, "ones")],
                ids=lambda p: f"{np.dtype(p[0]).name}-{p[1] if p[1] == 'ones' else np.dtype(p[1]).name}")
def csr(request):
    index_dtype, data_dtype = request.param
    if data_dtype == "ones":
        return make_csr(index_dtype=index_dtype, data_dtype=np.float32, ones=True)
    return make_csr(index_dtype=index_dtype, data_dtype=data_dtype)


def _unit(X):
    return len(X[2]) == 0 and len(X[1]) > 0


def test_matrix_has_empty_rows(csr):
    X, _ = csr
    assert np.any(np.diff(X[0]) == 0)


def test_row_primitives(csr):
    X, S = csr
    rng = np.random.default_rng(1)
    W = rng.standard_normal((S.shape[1], 3))          # (n_features, k): one model a column
    unit = _unit(X)
    for i in range(S.shape[0]):
        for c in range(3):
            assert row_dot(X, unit, i, W, c) == pytest.approx(S[i] @ W[:, c], rel=1e-12,
                                                              abs=1e-12)
        out = np.full(3, np.nan)
        row_dots(X, unit, i, W, out)
        np.testing.assert_allclose(out, (S[i] @ W).ravel(), rtol=1e-12, atol=1e-12)
        assert row_sq_norm(X, unit, i, 2.5) == pytest.approx(2.5 + S[i].multiply(S[i]).sum())
    out_W = np.ones_like(W)
    row_axpy(X, unit, 4, -0.5, out_W, 1)
    want = np.ones_like(W)
    want[:, 1] -= 0.5 * S[4].toarray().ravel()
    np.testing.assert_allclose(out_W, want, rtol=1e-12)
    a = np.array([1.0, -2.0, 0.5])
    acc = np.zeros_like(W)
    row_axpys(X, unit, 6, a, acc)
    np.testing.assert_allclose(acc, np.outer(S[6].toarray().ravel(), a), rtol=1e-12)


def test_one_model_as_a_d_vector_gives_the_column_bit_for_bit(csr):
    X, S = csr
    unit = _unit(X)
    W = np.random.default_rng(2).standard_normal((S.shape[1], 1))
    w = W[:, 0].copy()
    for i in range(S.shape[0]):
        assert row_dot(X, unit, i, w, 7) == row_dot(X, unit, i, W, 0)   # c ignored
    out_W, out_w = W.copy(), w.copy()
    for i in range(S.shape[0]):
        row_axpy(X, unit, i, 0.25 * i - 1.0, out_W, 0)
        row_axpy(X, unit, i, 0.25 * i - 1.0, out_w, 0)
    np.testing.assert_array_equal(out_w, out_W[:, 0])
    assert w_at(w, 3, 0) == w[3] and w_at(W, 3, 0) == W[3, 0]     # also from Python


def test_row_squares_and_outer_products(csr):
    X, S = csr
    unit = _unit(X)
    d = S.shape[1]
    colsq, col = np.ones(d), np.ones((d, 3))
    H = np.ones((d + 1, d + 1))                       # a bias row and column left alone
    for i in range(S.shape[0]):
        row_sq_axpy(X, unit, i, 1.0, colsq, 0)
        row_sq_axpy(X, unit, i, 0.5 * i, col, 2)
        row_outer_add(X, unit, i, H)
    sq = S.multiply(S)
    np.testing.assert_allclose(colsq, 1.0 + np.asarray(sq.sum(axis=0)).ravel(), rtol=1e-12)
    want = np.ones((d, 3))
    want[:, 2] += sq.T @ (0.5 * np.arange(S.shape[0]))
    np.testing.assert_allclose(col, want, rtol=1e-12)
    np.testing.assert_allclose(H[:d, :d], 1.0 + (S.T @ S).toarray(), rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(H[d], 1.0)
    np.testing.assert_array_equal(H[:, d], 1.0)


def test_row_axpys_cols_adds_to_the_listed_columns_only(csr):
    X, S = csr
    unit = _unit(X)
    a = np.array([1.5, -2.0, 0.25, 3.0])
    cols = np.array([3, 0, 2, 1], dtype=np.int64)            # only the first two are listed
    out_W = np.ones((S.shape[1], 4))
    for i in range(S.shape[0]):
        row_axpys_cols(X, unit, i, a, cols, 2, out_W)
    want = np.ones((S.shape[1], 4))
    want[:, [0, 3]] += np.outer(np.asarray(S.sum(axis=0)).ravel(), [1.5, 3.0])
    np.testing.assert_allclose(out_W, want, rtol=1e-12)
    np.testing.assert_array_equal(out_W[:, [1, 2]], 1.0)
    # the same bits as every column with the unlisted ones' coefficients 0
    full = np.ones((S.shape[1], 4))
    for i in range(S.shape[0]):
        row_axpys(X, unit, i, np.array([1.5, 0.0, 0.0, 3.0]), full)
    np.testing.assert_array_equal(out_W, full)


def test_row_sq_axpy_adds_the_squared_entries(csr):
    X, S = csr
    unit = _unit(X)
    out_W = np.ones((S.shape[1], 2))
    out_w = np.ones(S.shape[1])
    for i in range(S.shape[0]):
        row_sq_axpy(X, unit, i, 0.5 + i, out_W, 1)
        row_sq_axpy(X, unit, i, 0.5 + i, out_w, 0)
    want = 1.0 + S.multiply(S).T @ (0.5 + np.arange(S.shape[0]))
    np.testing.assert_allclose(out_W[:, 1], want, rtol=1e-12)
    np.testing.assert_array_equal(out_W[:, 0], 1.0)
    np.testing.assert_array_equal(out_w, out_W[:, 1])           # a d-vector: the same bits


def test_row_gather_keeps_the_mapped_features_in_row_order(csr):
    X, S = csr
    unit = _unit(X)
    d = S.shape[1]
    amap = np.full((d, 2), -1, dtype=np.int64)
    amap[::2, 1] = np.arange(0, d, 2) // 2 + 100                # even features: places 100...
    pos = np.full(d, -7, dtype=np.int64)
    val = np.full(d, np.nan)
    for i in range(S.shape[0]):
        row = S[i]
        keep = row.indices % 2 == 0
        m = row_gather(X, unit, i, amap, 1, pos, val)
        assert m == keep.sum()
        np.testing.assert_array_equal(pos[:m], row.indices[keep] // 2 + 100)
        np.testing.assert_array_equal(val[:m], row.data[keep])
        assert row_gather(X, unit, i, amap, 0, pos, val) == 0  # model 0 maps nothing
        assert row_gather(X, unit, i, amap[:, 1].copy(), 5, pos, val) == m   # a d-vector


def test_block_kernels(csr):
    X, S = csr
    rng = np.random.default_rng(2)
    w, v = rng.standard_normal(S.shape[1]), rng.standard_normal(S.shape[0])
    out = np.full(S.shape[0], np.nan)
    csr_matvec(X, w, out)
    np.testing.assert_allclose(out, S @ w, rtol=1e-12, atol=1e-12)
    g = np.ones(S.shape[1])
    csr_rmatvec_add(X, v, g)
    np.testing.assert_allclose(g, 1.0 + S.T @ v, rtol=1e-12, atol=1e-12)
    W, V = rng.standard_normal((S.shape[1], 2)), rng.standard_normal((S.shape[0], 2))
    M = np.full((S.shape[0], 2), np.nan)
    csr_matmat(X, W, M)
    np.testing.assert_allclose(M, S @ W, rtol=1e-12, atol=1e-12)
    G = np.ones((S.shape[1], 2))
    csr_rmatmat_add(X, V, G)
    np.testing.assert_allclose(G, 1.0 + S.T @ V, rtol=1e-12, atol=1e-12)
    norms = np.full(S.shape[0], np.nan)
    row_sq_norms(X, 1.0, norms)
    np.testing.assert_allclose(norms, 1.0 + np.asarray(S.multiply(S).sum(axis=1)).ravel())


@pytest.mark.parametrize("index_dtype,data_dtype", DTYPES[:2])
def test_empty_matrix(index_dtype, data_dtype):
    X = (np.zeros(1, dtype=np.int64), np.zeros(0, dtype=index_dtype),
         np.zeros(0, dtype=data_dtype))
    csr_matvec(X, np.ones(5), np.zeros(0))
    row_sq_norms(X, 0.0, np.zeros(0))
    g = np.ones(5)
    csr_rmatvec_add(X, np.zeros(0), g)
    csr_matmat(X, np.ones((5, 2)), np.zeros((0, 2)))
    G = np.ones((5, 2))
    csr_rmatmat_add(X, np.zeros((0, 2)), G)
    np.testing.assert_array_equal(g, np.ones(5))
    np.testing.assert_array_equal(G, np.ones((5, 2)))


def test_rows_without_entries_give_zero():
    X = (np.zeros(4, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, np.float32))
    out = np.full(3, np.nan)
    csr_matvec(X, np.ones(2), out)
    np.testing.assert_array_equal(out, np.zeros(3))
    out2 = np.full((3, 2), np.nan)
    csr_matmat(X, np.ones((2, 2)), out2)
    np.testing.assert_array_equal(out2, np.zeros((3, 2)))


def test_float32_data_accumulates_in_float64():
    X = (np.array([0, 3], dtype=np.int64), np.array([0, 1, 2], dtype=np.int32),
         np.array([1e8, 1.0, -1e8], dtype=np.float32))    # float32 sum would give 0
    assert row_dot(X, False, 0, np.ones((3, 1)), 0) == 1.0
    out = np.zeros(1)
    row_sq_norms(X, 0.0, out)
    assert out[0] == 2e16 + 1.0


def test_scipy_int32_indptr_is_accepted():
    _, S = make_csr(seed=3)
    w = np.arange(S.shape[1], dtype=np.float64)
    out = np.empty(S.shape[0])
    csr_matvec((S.indptr, S.indices, S.data), w, out)       # scipy's own int32 indptr
    np.testing.assert_allclose(out, S @ w, rtol=1e-12)


def test_wrong_output_shape_raises():
    X, S = make_csr()
    with pytest.raises(ValueError, match="out must have shape"):
        csr_matvec(X, np.ones(S.shape[1]), np.empty(S.shape[0] - 1))
    with pytest.raises(ValueError, match="v must have shape"):
        csr_rmatvec_add(X, np.ones(2), np.zeros(S.shape[1]))
    with pytest.raises(ValueError, match="out must have shape"):
        csr_matmat(X, np.ones((S.shape[1], 2)), np.empty((S.shape[0], 3)))
    with pytest.raises(ValueError, match="out must have shape"):
        row_sq_norms(X, 0.0, np.empty(2))


def test_take_rows(csr):
    X, S = csr
    rows = np.array([5, 0, 2, 2, 36, 7], dtype=np.int64)           # repeats, empty rows
    y = np.arange(S.shape[0]) * 10
    got_y, (indptr, indices, data) = take_rows(rows, y, X)
    np.testing.assert_array_equal(got_y, y[rows])
    values = np.ones(len(indices)) if _unit(X) else data.astype(np.float64)
    got = sp.csr_matrix((values, indices, indptr), shape=(len(rows), S.shape[1]))
    assert (got != S[rows]).nnz == 0
    assert len(data) == (0 if _unit(X) else len(indices))           # no values stay none
    out = (np.empty(len(rows) + 1, np.int64), np.empty(len(indices), X[1].dtype),
           np.empty(len(data), X[2].dtype))
    csr_take_rows(X, rows, out)
    np.testing.assert_array_equal(out[0], indptr)


def test_kept_rows_counts_rows_and_entries():
    X, S = make_csr()
    key = (np.random.default_rng(4).random((S.shape[0], 2)) < 0.4).astype(np.uint8)
    keep = np.empty(S.shape[0], dtype=bool)
    rows, nnz = kept_rows(X[0], key, 1, keep)
    np.testing.assert_array_equal(keep, key.any(axis=1))
    assert rows == keep.sum() and nnz == np.diff(X[0])[keep].sum()


def test_csr_check_finds_each_kind_of_fault():
    rng = np.random.default_rng(0)
    X = sp.random(200, 30, density=0.2, format="csr", random_state=1)
    X.sort_indices()
    ip, ix = X.indptr.astype(np.int64), X.indices.astype(np.int32)
    assert csr_check(ip, ix, 30, True) == (0, -1)
    for _ in range(50):
        p = int(rng.integers(0, len(ix)))
        row = int(np.searchsorted(ip, p, "right") - 1)
        for bad in (30, -1, 10**6):
            j = ix.copy()
            j[p] = bad
            assert csr_check(ip, j, 30, False) == (2, row)
    j = ix.copy()                       # a duplicate inside a row: only the strict check sees it
    r = int(np.flatnonzero(np.diff(ip) >= 2)[0])
    j[ip[r] + 1] = j[ip[r]]
    assert csr_check(ip, j, 30, False) == (0, -1) and csr_check(ip, j, 30, True) == (3, r)
    q = ip.copy()
    q[5] = q[6] + 1                     # decreasing pointer
    assert csr_check(q, ix, 30, False)[0] == 1 and indptr_check(q, len(ix)) in (4, 5)
    q = ip.copy()
    q[-1] -= 1                          # does not end at nnz
    assert csr_check(q, ix, 30, False)[0] == 1 and indptr_check(q, len(ix)) == len(ip) - 1
    assert csr_check(ip + 1, ix, 30, False) == (1, 0) and indptr_check(ip + 1, len(ix)) == 0
    assert indptr_check(ip, len(ix)) == -1


def test_values_within():
    v = np.array([0, 3, 7], dtype=np.int32)
    assert values_within(v, 0, 7, False) and not values_within(v, 0, 6, False)
    assert not values_within(v, 1, 7, False)
    y = np.array([1.0, -1.0, 1.0], dtype=np.float32)
    assert values_within(y, -1, 1, True)
    assert not values_within(np.r_[y, 0.0].astype(np.float32), -1, 1, True)
    assert values_within(np.zeros(0, np.int32), 0, 5, False)


def test_one_model_in_registers_gives_the_many_model_sums_bit_for_bit(csr):
    """``row_dots``, ``row_dots2`` and ``row_axpys`` keep one model (k = 1) in registers: the
    same bits as the same model beside others (the general loop through ``out``)."""
    from streamsvm.kernels._csr import row_dots2
    X, S = csr
    unit = _unit(X)
    rng = np.random.default_rng(3)
    W, V = rng.standard_normal((S.shape[1], 2)), rng.standard_normal((S.shape[1], 2))
    W1, V1 = np.ascontiguousarray(W[:, :1]), np.ascontiguousarray(V[:, :1])
    one, two = np.full(1, np.nan), np.full(2, np.nan)
    one_v, two_v = np.full(1, np.nan), np.full(2, np.nan)
    for i in range(S.shape[0]):
        row_dots(X, unit, i, W1, one)
        row_dots(X, unit, i, W, two)
        assert one[0] == two[0]
        row_dots2(X, unit, i, W1, V1, one, one_v)
        row_dots2(X, unit, i, W, V, two, two_v)
        assert (one[0], one_v[0]) == (two[0], two_v[0])
    acc1, acc2 = np.zeros((S.shape[1], 1)), np.zeros((S.shape[1], 2))
    for i in range(S.shape[0]):
        a = np.array([0.3 * i - 2.0, 1.5])
        row_axpys(X, unit, i, a[:1].copy(), acc1)
        row_axpys(X, unit, i, a, acc2)
    np.testing.assert_array_equal(acc1[:, 0], acc2[:, 0])
    M1, M2 = np.empty((S.shape[0], 1)), np.empty((S.shape[0], 2))
    csr_matmat(X, W1, M1)
    csr_matmat(X, W, M2)
    np.testing.assert_array_equal(M1[:, 0], M2[:, 0])
