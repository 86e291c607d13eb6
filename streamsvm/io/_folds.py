"""A store seen as the K fold models of a cross-validation trained as one problem.

Fold ``f``'s model trains on every row outside fold ``f``. With the features of model
``c`` shifted into a block of their own (``c * width``), the K training problems become one:
each row, read once, appears ``K − 1`` times, once in the block of every model that trains
on it, and the objective ``Σ_c ½‖w_c‖² + C Σ_{i ∉ fold c} ξ(y_i w_c·x_i)`` is the sum of the
K fold objectives, which share no weight. Every solver then trains the K models in the
same passes, unchanged: a pass over this store reads each row of the store under it once.

Several values of C train together the same way. The SVM at ``C_j`` on rows ``x`` is the
SVM at ``C0`` on rows ``s_j x`` with ``s_j = √(C_j / C0)``: ``w = s_j v`` turns
``½‖v‖² + C0 Σ ξ(y v·s_j x)`` into ``(C0 / C_j) (½‖w‖² + C_j Σ ξ(y w·x))``. So with
``scales`` ``s_j``, block ``j * K + c`` holds fold ``c``'s rows times ``s_j``, each row is
written ``len(scales) · (K − 1)`` times, and the solver's C is ``C0``.

The bias is a feature of each block (``b * width + n_features``, value ``bias · s_j``): the
solver runs without its own, so each model keeps its regularized intercept.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import InvalidParameterError
from ._store_meta import Chunk, StoreMeta

__all__ = ["FoldStore", "fold_of"]


def fold_of(row_start: int, n: int, k: int, seed: int) -> np.ndarray:
    """The folds (int32 in ``[0, k)``) of global rows ``row_start .. row_start + n − 1``."""
    from ..kernels._folds import fold_of_rows
    out = np.empty(n, dtype=np.int32)
    fold_of_rows(int(row_start), int(k), int(seed), out)
    return out


class FoldStore(StoreMeta):
    """``store`` as the K fold models' problem (module doc).

    Parameters
    ----------
    store : StoreMeta
    k : int
        Folds (at least 2).
    seed : int
        Seed of the folds (:func:`fold_of`).
    bias : float
        Value of each model's bias feature (0: none).
    scales : sequence of float, optional
        One group of K blocks per value, its rows scaled by it (module doc); default one
        group, unscaled.
    """

    zero_copy = False
    range_reads = False

    def __init__(self, store: StoreMeta, k: int, seed: int, bias: float, scales=(1.0,)):
        if int(k) < 2:
            raise InvalidParameterError(f"cv must be at least 2 folds, got {k}")
        if int(k) > store.n_rows:
            raise InvalidParameterError(f"cv={k} folds for {store.n_rows:,} rows: give at "
                                        f"most one fold per row")
        self.inner, self.k, self.seed, self.bias = store, int(k), int(seed), float(bias)
        self.scales = np.asarray(scales, dtype=np.float64)
        if self.scales.ndim != 1 or not len(self.scales) or not np.all(self.scales > 0):
            raise InvalidParameterError(f"scales must be positive numbers, got {scales!r}")
        self.blocks = self.k * len(self.scales)
        self.m = (self.k - 1) * len(self.scales)
        self.url, self.storage_options = store.url, store.storage_options
        d = store.n_features
        self.width = d + (1 if self.bias else 0)
        meta = store.meta
        index_dtype = np.dtype(meta.get("index_dtype", "int32"))
        if self.blocks * self.width >= np.iinfo(np.int32).max:
            index_dtype = np.dtype(np.int64)
        self._index_dtype = index_dtype
        hb = 1 if self.bias else 0
        sizes = store.chunk_sizes()
        top = float(self.scales.max()) ** 2
        tag = (f"+cv{self.k}/seed{self.seed}/bias{self.bias:g}/scales"
               f"{','.join(f'{v:.17g}' for v in self.scales)}")
        self.meta = dict(
            meta, n_rows=store.n_rows * self.m, n_features=self.blocks * self.width,
            nnz=(store.nnz + store.n_rows * hb) * self.m, chunk_rows=store.chunk_rows * self.m,
            binary_values=False, index_dtype=index_dtype.name,
            chunk_nnz=[int((a + s * hb) * self.m) for a, s in zip(store.chunk_nnz, sizes)],
            chunk_max_sq_norm=[(float(v) + self.bias ** 2) * top
                               for v in store.chunk_max_sq_norm],
            label_counts={c: int(v) * self.m for c, v in store.label_counts.items()},
            store_id=meta["store_id"] + tag if meta.get("store_id") else meta.get("store_id"))
        self.fingerprint = store.fingerprint + tag if store.fingerprint else ""

    def __repr__(self) -> str:
        return (f"FoldStore({self.inner!r}, k={self.k}, seed={self.seed}, bias={self.bias!r}, "
                f"scales={self.scales.tolist()})")

    # -- the reader under it ---------------------------------------------------------
    def held_bytes_for(self, keep: int) -> int:
        return self.inner.held_bytes_for(keep)

    @property
    def stored_bytes_read(self) -> int:
        return self.inner.stored_bytes_read

    def keep_partial(self, keep: int) -> None:
        self.inner.keep_partial(keep)

    def rows_per_inner_chunk(self) -> float:
        return float(self.inner.rows_per_inner_chunk()) * self.m

    def largest_inner_bytes(self) -> int:
        return self.inner.largest_inner_bytes()

    def read_rows(self, start: int, stop: int, chunk_id: int = -1) -> Chunk:
        """Rows ``[start, stop)`` of the fold problem: the store's rows under them, read
        once and written once per model that trains on them."""
        from ..kernels._folds import expand_folds
        m = self.m
        a, b = start // m, -(-stop // m)
        c = self.inner.read_rows(a, b, chunk_id)
        n = c.n_rows
        folds = fold_of(a, n, self.k, self.seed)
        hb = 1 if self.bias else 0
        nnz = (c.nnz + n * hb) * m
        indptr = np.empty(n * m + 1, dtype=np.int64)
        indices = np.empty(nnz, dtype=self._index_dtype)
        data = np.empty(nnz, dtype=c.data.dtype)
        y = np.empty(n * m, dtype=c.y.dtype)
        expand_folds(np.asarray(c.indptr, dtype=np.int64), c.indices, c.data, c.y, folds,
                     self.k, self.scales, self.width, self.inner.n_features, self.bias, indptr,
                     indices, data, y)
        out = Chunk(chunk_id, a * m, indptr, indices, data, y)
        if start == a * m and stop == b * m:
            return out
        return out.rows(start - a * m, stop - a * m)
