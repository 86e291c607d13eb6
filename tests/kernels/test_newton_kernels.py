"""newton's fused row kernels (``kernels/_newton.py``): ``newton_margins`` and
``newton_scatter`` give ``csr_matmat``'s and ``csr_rmatmat_add``'s sums bit for bit, one
model (summed in registers) as the general many-model loop."""

from __future__ import annotations

import numpy as np
import pytest

from streamsvm.kernels import csr_matmat, csr_rmatmat_add
from streamsvm.kernels._newton import newton_margins, newton_scatter

from .test_csr import DTYPES, make_csr


@pytest.fixture(params=DTYPES + [(np.int32, "ones")], ids=str)
def csr(request):
    index_dtype, data_dtype = request.param
    if data_dtype == "ones":
        return make_csr(n=61, index_dtype=index_dtype, data_dtype=np.float32, ones=True)
    return make_csr(n=61, index_dtype=index_dtype, data_dtype=data_dtype)


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("cand", [False, True])
def test_margins_are_csr_matmat_of_each_column(csr, k, cand):
    X, S = csr
    n, d = S.shape
    rng = np.random.default_rng(k)
    parts = [rng.standard_normal((d, k)) for _ in range(4 if cand else 3)]
    out = tuple(np.full((n, k), np.nan) for _ in range(3)) + (
        np.full((n if cand else 0, k), np.nan),)
    newton_margins(X, np.hstack(parts), out)
    for part, got in zip(parts, out):
        want = np.empty((n, k))
        csr_matmat(X, part, want)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_allclose(got, S @ part, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("slots", [1, 3, 5])
def test_scatter_of_one_model_is_the_general_loops_bit_for_bit(csr, slots):
    X, S = csr
    n, d = S.shape
    rng = np.random.default_rng(slots)
    coef = rng.standard_normal((slots, n, 1))
    h = np.where(rng.random((n, 1)) < 0.6, rng.random((n, 1)), 0.0)      # zero rows skipped
    cu = np.where(rng.random((n, 1)) < 0.3, rng.standard_normal((n, 1)), 0.0)
    one = np.zeros((d, slots + 2))
    newton_scatter(X, coef, h, cu, one)
    # the same model twice: the general loop (k = 2), its first column of every sum
    two = np.zeros((d, 2 * (slots + 2)))
    newton_scatter(X, np.repeat(coef, 2, axis=2), np.repeat(h, 2, axis=1),
                   np.repeat(cu, 2, axis=1), two)
    np.testing.assert_array_equal(one, two[:, ::2])
    # and each sum is csr_rmatmat_add's (the diagonal: of the squared entries)
    for lv in range(slots):
        want = np.zeros((d, 1))
        csr_rmatmat_add(X, np.ascontiguousarray(coef[lv]), want)
        np.testing.assert_array_equal(one[:, lv], want[:, 0])
    want = np.zeros((d, 1))
    csr_rmatmat_add(X, cu, want)
    np.testing.assert_array_equal(one[:, slots + 1], want[:, 0])
    np.testing.assert_allclose(one[:, slots], (S.multiply(S)).T @ h[:, 0], rtol=1e-10,
                               atol=1e-12)


def test_scatter_without_the_diagonal_or_the_polish(csr):
    X, S = csr
    n, d = S.shape
    coef = np.random.default_rng(9).standard_normal((3, n, 1))
    out = np.zeros((d, 3))
    newton_scatter(X, coef, np.empty((0, 1)), np.empty((0, 1)), out)
    np.testing.assert_allclose(out, np.column_stack([S.T @ coef[lv, :, 0] for lv in range(3)]),
                               rtol=1e-10, atol=1e-12)
