"""CSR primitives: the one sparse-operator module (like LIBLINEAR's ``sparse_operator``).

Losses, per-chunk solver epochs and the Walrus kernels build on these functions; nothing
else in streamsvm loops over CSR arrays.

Conventions (DESIGN.md §7)
--------------------------
- Module-level ``@njit(cache=True, nogil=True)`` functions of arrays and scalars only: no
  globals, no I/O, no allocation.
- A CSR matrix is passed as its three arrays: ``indptr`` of shape (n_rows + 1,) (int32 or
  int64; positions into ``indices``/``data``, so a chunk's local ``indptr`` starting at 0
  works as well as a global one), ``indices`` of shape (nnz,) (int32 or int64 feature ids)
  and ``data`` of shape (nnz,) (float32 or float64).
- Results go only into arguments named ``out*``. Kernels whose name ends in ``_add``
  accumulate into ``out``; the others overwrite it.
- Dot products accumulate in float64 whatever the dtype of ``data``. Matrix outputs
  (``csr_matmat``) accumulate in the dtype of ``out``: pass float64.
- **No bias.** These kernels see only the stored features. A solver with a bias ``b``
  treated as a constant feature ``B`` adds ``B * b`` to each ``row_dot`` and
  ``B * sum(v)`` to the bias component of a transposed product itself.

Compile cost: numba compiles one specialization per combination of argument types
(``indices`` int32/int64 × ``data`` float32/float64 × dtype and layout of ``w``/``out``).
Keep ``w``, ``W`` and ``out`` float64 and C-contiguous so each kernel has at most four
versions; ``cache=True`` keeps them on disk across processes.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "row_dot", "row_axpy", "row_dot_multi", "row_axpy_multi", "row_sq_norms",
    "csr_matvec", "csr_matvec_subset", "csr_rmatvec_add", "csr_rmatvec_subset_add",
    "csr_matmat", "csr_rmatmat_add", "csr_take_rows", "csr_check", "values_within",
    "indptr_check",
]


@njit(cache=True, nogil=True)
def row_dot(indptr, indices, data, i, w):
    """Dot product of row ``i`` with a dense vector, accumulated in float64.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
    indices : ndarray of shape (nnz,)
    data : ndarray of shape (nnz,)
    i : int
        Row index.
    w : ndarray of shape (n_features,)

    Returns
    -------
    float
        ``x_i · w``.
    """
    s = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        s += np.float64(data[p]) * w[indices[p]]
    return s


@njit(cache=True, nogil=True)
def row_axpy(indptr, indices, data, i, a, out_w):
    """Add ``a * x_i`` to a dense vector in place.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    i : int
        Row index.
    a : float
    out_w : ndarray of shape (n_features,)
        Updated in place: ``out_w += a * x_i``.
    """
    for p in range(indptr[i], indptr[i + 1]):
        out_w[indices[p]] += a * np.float64(data[p])


@njit(cache=True, nogil=True)
def row_dot_multi(indptr, indices, data, i, W, out):
    """Products of row ``i`` with every column of ``W`` (several models at once).

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    i : int
        Row index.
    W : ndarray of shape (n_features, k)
    out : ndarray of shape (k,)
        Overwritten with ``x_i @ W`` (accumulated in the dtype of ``out``).
    """
    k = W.shape[1]
    for j in range(k):
        out[j] = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        x = np.float64(data[p])
        c = indices[p]
        for j in range(k):
            out[j] += x * W[c, j]


@njit(cache=True, nogil=True)
def row_axpy_multi(indptr, indices, data, i, a, out_W):
    """Add the outer product ``x_i ⊗ a`` to a dense matrix in place.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    i : int
        Row index.
    a : ndarray of shape (k,)
    out_W : ndarray of shape (n_features, k)
        Updated in place: ``out_W[c, :] += x_ic * a`` for every stored feature ``c``.
    """
    k = a.shape[0]
    for p in range(indptr[i], indptr[i + 1]):
        x = np.float64(data[p])
        c = indices[p]
        for j in range(k):
            out_W[c, j] += x * a[j]


@njit(cache=True, nogil=True)
def row_sq_norms(indptr, indices, data, out):
    """Squared Euclidean norm of every row, accumulated in float64.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    out : ndarray of shape (n_rows,)
        Overwritten with ``‖x_i‖²``.
    """
    n = indptr.shape[0] - 1
    if out.shape[0] != n:
        raise ValueError("row_sq_norms: out must have shape (n_rows,)")
    for i in range(n):
        s = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = np.float64(data[p])
            s += x * x
        out[i] = s


@njit(cache=True, nogil=True)
def csr_matvec(indptr, indices, data, w, out):
    """Matrix-vector product ``out = X w``.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    w : ndarray of shape (n_features,)
    out : ndarray of shape (n_rows,)
        Overwritten with ``X @ w``.
    """
    n = indptr.shape[0] - 1
    if out.shape[0] != n:
        raise ValueError("csr_matvec: out must have shape (n_rows,)")
    for i in range(n):
        out[i] = row_dot(indptr, indices, data, i, w)


@njit(cache=True, nogil=True)
def csr_matvec_subset(indptr, indices, data, rows, w, out):
    """Matrix-vector product restricted to some rows: ``out[i] = x_i · w`` for ``i`` in ``rows``.

    Entries of ``out`` for rows not listed are left unchanged (an active-set ``X_I w``).

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    rows : ndarray of shape (n_subset,), int
        Row indices (local to the CSR arrays).
    w : ndarray of shape (n_features,)
    out : ndarray of shape (n_rows,)
        Indexed by row.
    """
    n = indptr.shape[0] - 1
    if out.shape[0] != n:
        raise ValueError("csr_matvec_subset: out must have shape (n_rows,)")
    for r in range(rows.shape[0]):
        i = rows[r]
        out[i] = row_dot(indptr, indices, data, i, w)


@njit(cache=True, nogil=True)
def csr_rmatvec_add(indptr, indices, data, v, out):
    """Transposed product added in place: ``out += Xᵀ v``.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    v : ndarray of shape (n_rows,)
    out : ndarray of shape (n_features,)
        Updated in place. Rows with ``v_i == 0`` are skipped.
    """
    n = indptr.shape[0] - 1
    if v.shape[0] != n:
        raise ValueError("csr_rmatvec_add: v must have shape (n_rows,)")
    for i in range(n):
        a = np.float64(v[i])
        if a != 0.0:
            row_axpy(indptr, indices, data, i, a, out)


@njit(cache=True, nogil=True)
def csr_rmatvec_subset_add(indptr, indices, data, rows, v, out):
    """Transposed product over some rows: ``out += Σ_{i in rows} v_i x_i``.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    rows : ndarray of shape (n_subset,), int
        Row indices (local to the CSR arrays), e.g. an active set ``I``.
    v : ndarray of shape (n_rows,)
        Indexed by row (not by position in ``rows``).
    out : ndarray of shape (n_features,)
        Updated in place.
    """
    n = indptr.shape[0] - 1
    if v.shape[0] != n:
        raise ValueError("csr_rmatvec_subset_add: v must have shape (n_rows,)")
    for r in range(rows.shape[0]):
        i = rows[r]
        row_axpy(indptr, indices, data, i, np.float64(v[i]), out)


@njit(cache=True, nogil=True)
def csr_matmat(indptr, indices, data, W, out):
    """Product with several models at once: ``out = X W``.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    W : ndarray of shape (n_features, k)
        One model per column (several C values or classes).
    out : ndarray of shape (n_rows, k)
        Overwritten with ``X @ W`` (accumulated in the dtype of ``out``).
    """
    n = indptr.shape[0] - 1
    if out.shape[0] != n or out.shape[1] != W.shape[1]:
        raise ValueError("csr_matmat: out must have shape (n_rows, k)")
    for i in range(n):
        row_dot_multi(indptr, indices, data, i, W, out[i])


@njit(cache=True, nogil=True)
def csr_rmatmat_add(indptr, indices, data, V, out):
    """Transposed product with several columns added in place: ``out += Xᵀ V``.

    Parameters
    ----------
    indptr, indices, data : CSR arrays, see the module docstring.
    V : ndarray of shape (n_rows, k)
    out : ndarray of shape (n_features, k)
        Updated in place.
    """
    n = indptr.shape[0] - 1
    if V.shape[0] != n or out.shape[1] != V.shape[1]:
        raise ValueError("csr_rmatmat_add: V must have shape (n_rows, k), out (n_features, k)")
    for i in range(n):
        row_axpy_multi(indptr, indices, data, i, V[i], out)


@njit(cache=True, nogil=True)
def csr_take_rows(indptr, indices, data, rows, out_indptr, out_indices, out_data):
    """Copy rows ``rows`` (in that order) into a new CSR matrix.

    ``out_indptr`` (shape (len(rows) + 1,), int64) is overwritten with the new row pointer;
    ``out_indices`` and ``out_data`` must hold ``sum of the rows' lengths`` entries. When
    ``data`` is empty (a store whose values are all 1 keeps none) ``out_data`` is not
    written.
    """
    out_indptr[0] = 0
    q = 0
    copy_data = len(data) > 0
    for k in range(len(rows)):
        i = rows[k]
        for p in range(indptr[i], indptr[i + 1]):
            out_indices[q] = indices[p]
            if copy_data:
                out_data[q] = data[p]
            q += 1
        out_indptr[k + 1] = q


@njit(cache=True, nogil=True)
def csr_check(indptr, indices, n_features, sorted_rows):
    """Whether CSR arrays are safe to hand to a kernel (the store's read-time check).

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
        Row pointer; must start at 0, never decrease and end at ``len(indices)``.
    indices : ndarray of shape (nnz,)
        Feature ids; must lie in ``[0, n_features)``.
    n_features : int
    sorted_rows : bool
        Also require strictly increasing ids within each row (``streamsvm verify``).

    Returns
    -------
    code : int
        0 valid, 1 bad ``indptr``, 2 a feature id out of range, 3 ids not strictly
        increasing within a row.
    row : int
        The first row at fault (-1 when valid; for code 1, ``n_rows`` when the last
        pointer does not match ``len(indices)``).

    Notes
    -----
    The range check is a min/max reduction over ``indices`` (vectorized: a pass over the
    store's indices costs about what copying them does); the row at fault is searched for
    only when it fails.
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
