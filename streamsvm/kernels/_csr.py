"""CSR primitives: the one sparse-operator module (like LIBLINEAR's ``sparse_operator``).

Losses, solver epochs and the Walrus kernels build on these functions; nothing else in
streamsvm loops over CSR arrays.

Conventions (DESIGN.md §7)
--------------------------
- A CSR block travels as one tuple ``X = (indptr, indices, data)``: ``indptr`` of shape
  (n_rows + 1,) (positions into ``indices``/``data``: a block's local pointer starting at 0
  works as well as a global one), ``indices`` of shape (nnz,) (int32 or int64 feature ids)
  and ``data`` of shape (nnz,) (float32 or float64).
- **Unit-valued rows, in one place.** A store whose values are all 1 keeps no ``data``; the
  row primitives take a flag ``unit`` (read the indices only), and the block kernels treat
  an empty ``data`` next to non-empty ``indices`` as all ones (:func:`is_unit`).
- **One layout of the weights:** ``W`` of shape (n_features + 1, k), one model per column
  (``W[j, c]``), C-contiguous and float64, the bias weight last (:func:`bias_at`,
  :func:`bias_add`; the row primitives see only the stored features, the caller adds
  ``B · W[d, c]``). The single-model primitives also take one model as a vector (``c``
  ignored), read through :func:`w_at`/:func:`w_add`: numba compiles the (d, k) address
  with a runtime ``k`` for every entry, which cost 6 % of one-vs-rest epochs on letter.
- Results go only into arguments named ``out*``; kernels whose name ends in ``_add``
  accumulate into ``out``, the others overwrite it. Dot products accumulate in float64
  whatever the dtype of ``data``.
- The row primitives are inlined into their callers and allocate nothing (``_jit.py``).
- The many-model row primitives (``row_dots``, ``row_dots2``, ``row_axpys``,
  ``row_axpys_cols``) are :mod:`._csr_models`'s, re-exported here.

Compile cost: numba compiles one specialization per combination of argument types; keep
``W`` and ``out`` float64 and C-contiguous. ``cache=True`` keeps them on disk across
processes.
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numba.extending import overload

from ._csr_models import row_axpys, row_axpys_cols, row_dots, row_dots2
from ._jit import kernel_inline

__all__ = [
    "w_at", "w_add", "bias_at", "bias_add", "is_unit", "row_dot", "row_dot_sq", "row_axpy",
    "row_dots", "row_dots2",
    "row_axpys", "row_axpys_cols", "row_sq_axpy", "row_gather",
    "row_sq_norm", "row_inf_sq", "row_outer_add",
    "csr_matvec", "csr_rmatvec_add", "csr_matmat", "csr_rmatmat_add", "row_sq_norms",
    "csr_take_rows", "take_rows", "kept_rows", "csr_check", "indptr_check", "values_within",
]


# -- one model's weights, as a column of W or as a d-vector --------------------------------

def w_at(W, j, c):
    """``W[j, c]`` of weights of shape (n_features, k), or ``W[j]`` of one model's
    d-vector (``c`` ignored)."""
    return W[j] if W.ndim == 1 else W[j, c]


def w_add(out_W, j, c, v):
    """``out_W[j, c] += v`` (or ``out_W[j] += v`` of a d-vector, as :func:`w_at`)."""
    if out_W.ndim == 1:
        out_W[j] += v
    else:
        out_W[j, c] += v


@overload(w_at, inline="always")
def _w_at(W, j, c):
    if W.ndim == 1:
        return lambda W, j, c: W[j]
    return lambda W, j, c: W[j, c]


@overload(w_add, inline="always")
def _w_add(out_W, j, c, v):
    if out_W.ndim == 1:
        def add1(out_W, j, c, v):
            out_W[j] += v
        return add1

    def add2(out_W, j, c, v):
        out_W[j, c] += v
    return add2


@kernel_inline
def bias_at(W, c):
    """Model ``c``'s bias weight: the last row of ``W`` (n_features + 1, k), or the last
    entry of one model's vector (as :func:`w_at`)."""
    return w_at(W, W.shape[0] - 1, c)


@kernel_inline
def bias_add(out_W, c, v):
    """Model ``c``'s bias weight ``+= v`` (as :func:`bias_at`)."""
    w_add(out_W, out_W.shape[0] - 1, c, v)


# -- row primitives (inlined) ------------------------------------------------------------

@kernel_inline
def is_unit(X):
    """Whether ``X`` holds unit values: ``data`` empty while ``indices`` is not."""
    return X[2].shape[0] == 0 and X[1].shape[0] > 0


@kernel_inline
def row_dot(X, unit, i, W, c):
    """``x_i · W[:, c]``, accumulated in float64.

    Parameters
    ----------
    X : tuple (indptr, indices, data)
    unit : bool
        Every value is 1 (``data`` not read).
    i : int
        Row.
    W : ndarray of shape (n_features, k), or (n_features,) for one model
    c : int
        Column (model); ignored for a d-vector.
    """
    indptr, indices, data = X
    s = 0.0
    if unit:
        for p in range(indptr[i], indptr[i + 1]):
            s += w_at(W, indices[p], c)
    else:
        for p in range(indptr[i], indptr[i + 1]):
            s += np.float64(data[p]) * w_at(W, indices[p], c)
    return s


@kernel_inline
def row_dot_sq(X, unit, i, W, c):
    """``(x_i · W[:, c], ‖x_i‖²)`` in one read of the row (float64; ``W`` as
    :func:`row_dot`)."""
    indptr, indices, data = X
    s = 0.0
    if unit:
        for p in range(indptr[i], indptr[i + 1]):
            s += w_at(W, indices[p], c)
        return s, np.float64(indptr[i + 1] - indptr[i])
    q = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        v = np.float64(data[p])
        s += v * w_at(W, indices[p], c)
        q += v * v
    return s, q


@kernel_inline
def row_axpy(X, unit, i, a, out_W, c):
    """``out_W[:, c] += a · x_i`` (``out_W`` (n_features, k), or a d-vector: :func:`w_at`)."""
    indptr, indices, data = X
    if unit:
        for p in range(indptr[i], indptr[i + 1]):
            w_add(out_W, indices[p], c, a)
    else:
        for p in range(indptr[i], indptr[i + 1]):
            w_add(out_W, indices[p], c, a * np.float64(data[p]))


@kernel_inline
def row_sq_axpy(X, unit, i, a, out_W, c):
    """``out_W[:, c] += a · x_i²`` entrywise (``a · x_ij · x_ij``: a diagonal's share of
    ``a x_i x_iᵀ``; ``out_W`` as :func:`row_axpy`)."""
    indptr, indices, data = X
    if unit:
        for p in range(indptr[i], indptr[i + 1]):
            w_add(out_W, indices[p], c, a)
    else:
        for p in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[p])
            w_add(out_W, indices[p], c, a * v * v)


@kernel_inline
def row_gather(X, unit, i, amap, c, out_pos, out_val):
    """The entries of row ``i`` whose feature ``j`` has a place ``amap[j, c] ≥ 0`` (−1: left
    out), in row order: their places into ``out_pos``, their values (float64) into
    ``out_val``; returns how many. ``amap`` (n_features, k) int, or a d-vector (``c``
    ignored, :func:`w_at`)."""
    indptr, indices, data = X
    m = 0
    for p in range(indptr[i], indptr[i + 1]):
        a = w_at(amap, indices[p], c)
        if a >= 0:
            out_pos[m] = a
            out_val[m] = 1.0 if unit else np.float64(data[p])
            m += 1
    return m


@kernel_inline
def row_sq_norm(X, unit, i, s0):
    """``s0 + ‖x_i‖²`` (summed in row order after ``s0``)."""
    indptr, indices, data = X
    if unit:
        return s0 + (indptr[i + 1] - indptr[i])
    s = s0
    for p in range(indptr[i], indptr[i + 1]):
        v = np.float64(data[p])
        s += v * v
    return s


@kernel_inline
def row_inf_sq(X, unit, i):
    """``(‖x_i‖∞, ‖x_i‖²)`` of row ``i`` (float64)."""
    indptr, indices, data = X
    if unit:
        n = indptr[i + 1] - indptr[i]
        return (1.0 if n > 0 else 0.0), np.float64(n)
    m = 0.0
    q = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        v = np.float64(data[p])
        q += v * v
        if abs(v) > m:
            m = abs(v)
    return m, q


@kernel_inline
def row_outer_add(X, unit, i, out):
    """``out[j, l] += x_ij · x_il`` for every pair of the row's entries (row ``j`` of
    ``out`` in turn, each by :func:`row_axpy`): ``Xᵀ X`` summed row by row. ``out`` of shape
    (n_features, n_features) or larger (a bias row and column are the caller's)."""
    indptr, indices, data = X
    for p in range(indptr[i], indptr[i + 1]):
        row_axpy(X, unit, i, 1.0 if unit else np.float64(data[p]), out[indices[p]], 0)


# -- block kernels -----------------------------------------------------------------------

@njit(cache=True, nogil=True)
def csr_matvec(X, w, out):
    """``out = X w`` for one model: ``w`` of shape (n_features,), ``out`` of shape (n_rows,)."""
    indptr, indices, data = X
    if out.shape[0] != indptr.shape[0] - 1:
        raise ValueError("csr_matvec: out must have shape (n_rows,)")
    unit = is_unit(X)
    for i in range(indptr.shape[0] - 1):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            s += (1.0 if unit else np.float64(data[p])) * w[indices[p]]
        out[i] = s


@njit(cache=True, nogil=True)
def csr_rmatvec_add(X, v, out):
    """``out += Xᵀ v`` for one model: ``v`` of shape (n_rows,), ``out`` of shape
    (n_features,). Rows with ``v_i = 0`` are skipped."""
    indptr, indices, data = X
    if v.shape[0] != indptr.shape[0] - 1:
        raise ValueError("csr_rmatvec_add: v must have shape (n_rows,)")
    unit = is_unit(X)
    for i in range(indptr.shape[0] - 1):
        a = np.float64(v[i])
        if a == 0.0:
            continue
        for p in range(indptr[i], indptr[i + 1]):
            out[indices[p]] += a * (1.0 if unit else np.float64(data[p]))


@njit(cache=True, nogil=True)
def csr_matmat(X, W, out):
    """``out = X W``: ``W`` of shape (n_features, k), ``out`` of shape (n_rows, k)."""
    if out.shape[0] != X[0].shape[0] - 1 or out.shape[1] != W.shape[1]:
        raise ValueError("csr_matmat: out must have shape (n_rows, k)")
    unit = is_unit(X)
    for i in range(X[0].shape[0] - 1):
        row_dots(X, unit, i, W, out[i])


@njit(cache=True, nogil=True)
def csr_rmatmat_add(X, V, out):
    """``out += Xᵀ V``: ``V`` of shape (n_rows, k), ``out`` of shape (n_features, k)."""
    if V.shape[0] != X[0].shape[0] - 1 or out.shape[1] != V.shape[1]:
        raise ValueError("csr_rmatmat_add: V must have shape (n_rows, k), out (n_features, k)")
    unit = is_unit(X)
    for i in range(X[0].shape[0] - 1):
        row_axpys(X, unit, i, V[i], out)


@njit(cache=True, nogil=True)
def row_sq_norms(X, s0, out):
    """``out[i] = s0 + ‖x_i‖²`` for every row (``s0``: e.g. the squared bias feature)."""
    if out.shape[0] != X[0].shape[0] - 1:
        raise ValueError("row_sq_norms: out must have shape (n_rows,)")
    unit = is_unit(X)
    for i in range(X[0].shape[0] - 1):
        out[i] = row_sq_norm(X, unit, i, s0)


@njit(cache=True, nogil=True)
def csr_take_rows(X, rows, out):
    """Copy rows ``rows`` (in that order) into ``out = (indptr, indices, data)``.

    ``out[0]`` (shape (len(rows) + 1,), int64) is overwritten with the new row pointer;
    ``out[1]`` and ``out[2]`` must hold the rows' entries (``out[2]`` may be empty when
    ``X[2]`` is: a store whose values are all 1 keeps none).
    """
    indptr, indices, data = X
    out_indptr, out_indices, out_data = out
    out_indptr[0] = 0
    q = 0
    copy_data = data.shape[0] > 0
    for k in range(rows.shape[0]):
        i = rows[k]
        for p in range(indptr[i], indptr[i + 1]):
            out_indices[q] = indices[p]
            if copy_data:
                out_data[q] = data[p]
            q += 1
        out_indptr[k + 1] = q


@njit(cache=True, nogil=True)
def kept_rows(indptr, key, threshold, out_keep):
    """Rows whose ``key`` reaches ``threshold`` in some column.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
    key : ndarray of shape (n_rows, width)
    threshold : scalar
    out_keep : ndarray of shape (n_rows,), bool
        Overwritten: whether each row is kept.

    Returns
    -------
    (rows, nnz) : the kept rows and their stored entries.
    """
    rows = 0
    nnz = 0
    for i in range(key.shape[0]):
        keep = False
        for c in range(key.shape[1]):
            if key[i, c] >= threshold:
                keep = True
                break
        out_keep[i] = keep
        if keep:
            rows += 1
            nnz += indptr[i + 1] - indptr[i]
    return rows, nnz


def take_rows(rows, y, X):
    """Rows ``rows`` (in that order) of a CSR block with labels ``y``, as new arrays
    ``(y[rows], (indptr, indices, data))`` (an empty ``data`` stays empty)."""
    indptr, indices, data = X
    rows = np.ascontiguousarray(rows, dtype=np.int64)
    nnz = int((indptr[rows + 1] - indptr[rows]).sum())
    out = (np.empty(len(rows) + 1, dtype=np.int64), np.empty(nnz, dtype=indices.dtype),
           np.empty(nnz if len(data) else 0, dtype=data.dtype))
    csr_take_rows((indptr, indices, data), rows, out)
    return y[rows], out


# -- checks --------------------------------------------------------------------------------

@njit(cache=True, nogil=True)
def csr_check(indptr, indices, n_features, sorted_rows):
    """Whether CSR arrays are safe to hand to a kernel (``streamsvm verify``).

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
        Row pointer; must start at 0, never decrease and end at ``len(indices)``.
    indices : ndarray of shape (nnz,)
        Feature ids; must lie in ``[0, n_features)``.
    n_features : int
    sorted_rows : bool
        Also require strictly increasing ids within each row.

    Returns
    -------
    code : int
        0 valid, 1 bad ``indptr``, 2 a feature id out of range, 3 ids not strictly
        increasing within a row.
    row : int
        The first row at fault (-1 when valid; for code 1, ``n_rows`` when the last
        pointer does not match ``len(indices)``).
    """
    n = indptr.shape[0] - 1
    if n < 0 or indptr[0] != 0:
        return 1, 0
    for i in range(n):
        if indptr[i + 1] < indptr[i] or indptr[i + 1] > indices.shape[0]:
            return 1, i
    if indptr[n] != indices.shape[0]:
        return 1, n
    lo = 0
    hi = 0
    for p in range(indices.shape[0]):
        v = indices[p]
        lo = min(lo, v)
        hi = max(hi, v)
    if lo < 0 or hi >= n_features or sorted_rows:
        for i in range(n):
            prev = -1
            for p in range(indptr[i], indptr[i + 1]):
                j = indices[p]
                if j < 0 or j >= n_features:
                    return 2, i
                if sorted_rows and j <= prev:
                    return 3, i
                prev = j
    return 0, -1


@njit(cache=True, nogil=True)
def indptr_check(indptr, nnz):
    """The first row whose pointers are wrong (-1 when none): ``indptr`` must start at 0,
    never decrease and end at ``nnz``."""
    n = indptr.shape[0] - 1
    if n < 0 or indptr[0] != 0:
        return 0
    for i in range(n):
        if indptr[i + 1] < indptr[i]:
            return i
    if indptr[n] != nnz:
        return n
    return -1


@njit(cache=True, nogil=True)
def values_within(values, lo, hi, nonzero):
    """Whether every value lies in ``[lo, hi]`` (and is non-zero when ``nonzero``).

    The store's reader checks each inner chunk it decodes with it (feature ids in
    ``[0, n_features - 1]``, binary labels in ``{-1, +1}``, class ids in ``[0, k - 1]``),
    while the chunk is still in the CPU cache: a min/max reduction the compiler vectorizes.
    """
    mn = values[0] if values.shape[0] else lo
    mx = mn
    zeros = 0
    for p in range(values.shape[0]):
        v = values[p]
        mn = min(mn, v)
        mx = max(mx, v)
        zeros += v == 0
    return mn >= lo and mx <= hi and not (nonzero and zeros > 0)
