"""The many-model row primitives of :mod:`._csr` (its conventions): one read of a row for
every model's column of ``W`` (n_features, k), in the ``(X, unit, i, …)`` form of the
single-model primitives, inlined into their callers, allocating nothing.

**One model in registers.** A single model's (``k == 1``) sum or coefficient is kept in a
register: through ``out`` numba reloads and stores it at every entry (``out`` may alias
``W``). The same additions in the same order, so the same bits (tests/kernels/test_csr.py).
``csr_matmat`` of one model over 200,000 rows of the 3·10^6-row store (BENCHMARKS,
``tools/bench.py kernels``): 0.017–0.026 s a call against 0.029–0.046 s.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel_inline

__all__ = ["row_dots", "row_dots2", "row_axpys", "row_axpys_cols"]


@kernel_inline
def row_dots(X, unit, i, W, out):
    """``out[c] = x_i · W[:, c]`` for every column, one read of the row."""
    indptr, indices, data = X
    k = W.shape[1]
    if k == 1:                      # in a register (module doc)
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = 1.0 if unit else np.float64(data[p])
            s += x * W[indices[p], 0]
        out[0] = s
        return
    for c in range(k):
        out[c] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        x = 1.0 if unit else np.float64(data[p])
        j = indices[p]
        for c in range(k):
            out[c] += x * W[j, c]


@kernel_inline
def row_dots2(X, unit, i, W, V, out_w, out_v):
    """``out_w[c] = x_i · W[:, c]`` and ``out_v[c] = x_i · V[:, c]``, one read of the row
    for two weight matrices of the same shape."""
    indptr, indices, data = X
    k = W.shape[1]
    if k == 1:                      # in registers (module doc)
        sw = 0.0
        sv = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = 1.0 if unit else np.float64(data[p])
            j = indices[p]
            sw += x * W[j, 0]
            sv += x * V[j, 0]
        out_w[0] = sw
        out_v[0] = sv
        return
    for c in range(k):
        out_w[c] = 0.0
        out_v[c] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        x = 1.0 if unit else np.float64(data[p])
        j = indices[p]
        for c in range(k):
            out_w[c] += x * W[j, c]
            out_v[c] += x * V[j, c]


@kernel_inline
def row_axpys(X, unit, i, a, out_W):
    """``out_W[:, c] += a[c] · x_i`` for every column, one read of the row."""
    indptr, indices, data = X
    k = out_W.shape[1]
    if k == 1:                      # the coefficient in a register (module doc)
        a0 = a[0]
        for p in range(indptr[i], indptr[i + 1]):
            x = 1.0 if unit else np.float64(data[p])
            out_W[indices[p], 0] += x * a0
        return
    for p in range(indptr[i], indptr[i + 1]):
        x = 1.0 if unit else np.float64(data[p])
        j = indices[p]
        for c in range(k):
            out_W[j, c] += x * a[c]


@kernel_inline
def row_axpys_cols(X, unit, i, a, cols, m, out_W):
    """``out_W[:, c] += a[c] · x_i`` for the columns ``c`` in ``cols[:m]`` only, one read of
    the row (a step that changed a few of many models' coefficients)."""
    indptr, indices, data = X
    for p in range(indptr[i], indptr[i + 1]):
        x = 1.0 if unit else np.float64(data[p])
        j = indices[p]
        for t in range(m):
            out_W[j, cols[t]] += x * a[cols[t]]
