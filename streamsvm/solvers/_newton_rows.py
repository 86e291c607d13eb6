"""newton's resident rows as a linear map: the rows ``y_i x̄_i`` of the RAM slab's CSR, by
which the polish's dual (:mod:`._newton_polish`) and cg's Hessian-vector products
(:mod:`._newton_step`) multiply."""

from __future__ import annotations

import numpy as np
import scipy.sparse

from ..kernels import csr_matvec, csr_rmatvec_add

__all__ = ["SlabRows"]

_COPY_NNZ = 2_000_000   # the polish copies a model's rows up to this many entries
_DENSE_SHARE = 0.25     # ... as a dense array when more than this share is non-zero


class SlabRows:
    """The rows ``y_i x̄_i`` (``i`` in ``r``, every row when None) of the RAM slab's CSR
    ``X`` as a linear map: on a copy of these rows when they have at most ``copy_nnz``
    entries (faster when the slab holds other models' rows too), else in place by the CSR
    kernels (a large copy would be charged to no budget: 2.5 GB peak at a 1 GB budget on
    the 3 M-row store)."""

    def __init__(self, X, r, yc, B, d, copy_nnz=_COPY_NNZ):
        self.n = len(X[0]) - 1
        self.X, self.yc, self.B, self.d = X, yc, B, d
        self.r = slice(None) if r is None else r
        self.Z = self.ZT = self.Zd = None
        indptr, indices, data = X
        nnz = 0 if r is None else int((indptr[r + 1] - indptr[r]).sum())
        if r is not None and nnz <= copy_nnz:
            vals = np.ones(len(indices), np.float32) if len(data) == 0 else data
            Xr = scipy.sparse.csr_matrix((vals, indices, indptr), shape=(self.n, d))[r]
            entries = nnz + (len(r) if B else 0)          # (with the bias column's)
            if entries > _DENSE_SHARE * len(r) * (d + 1) and len(r) * (d + 1) <= copy_nnz:
                # dense rows (usps: 256 of 257 columns): BLAS's products, not CSR's, on
                # a dense copy made directly (no sparse copy beside it)
                Xr.data = Xr.data.astype(np.float64) * np.repeat(yc, np.diff(Xr.indptr))
                self.Zd = np.empty((len(r), d + 1))
                self.Zd[:, :d] = Xr.toarray()
                self.Zd[:, d] = yc * B
                return
            Z = scipy.sparse.hstack([Xr.astype(np.float64), np.full((len(r), 1), B)],
                                    format="csr")
            self.Z = scipy.sparse.diags(yc) @ Z
            # its transpose once (a CSC view of the same arrays): scipy builds it anew at
            # each `.T`, 58 µs, a tenth of the polish's L-BFGS-B time on usps
            self.ZT = self.Z.T

    def dense(self):
        """The rows as a dense array (m × (d + 1)), or None when they have no copy."""
        if self.Zd is None and self.Z is not None and \
                len(self.yc) * (self.d + 1) <= _COPY_NNZ:
            self.Zd = self.Z.toarray()
        return self.Zd

    def dot(self, w):
        """``Z w``: one value per row of ``r``."""
        if self.Zd is not None:
            return self.Zd @ w
        if self.Z is not None:
            return self.Z @ w
        t = np.empty(self.n)
        csr_matvec(self.X, w[:self.d], t)
        return self.yc * (t[self.r] + self.B * w[self.d])

    def tdot(self, a):
        """``Zᵀ a = Σ a_i y_i x̄_i``."""
        if self.Zd is not None:
            return self.Zd.T @ a
        if self.Z is not None:
            return self.ZT @ a
        t = np.zeros(self.n)
        t[self.r] = a * self.yc
        out = np.zeros(self.d + 1)
        csr_rmatvec_add(self.X, t, out[:self.d])
        out[self.d] = self.B * t.sum()
        return out
