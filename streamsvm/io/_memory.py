"""An in-memory store over a scipy CSR matrix, with the same reading interface as ``Store``.

Used when an estimator is fitted on in-memory ``X, y`` and in tests: the scheduler and
solvers cannot tell it from a Zarr store.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from ..exceptions import InvalidParameterError
from ._labels import encode_labels
from ._store_meta import Chunk, StoreMeta

__all__ = ["InMemoryStore"]


class InMemoryStore(StoreMeta):
    """A chunked view of an in-memory CSR matrix and labels.

    Parameters
    ----------
    X : sparse matrix or array-like of shape (n_rows, n_features)
    y : array-like of shape (n_rows,)
        Original labels; encoded like the converter does (binary → ±1, else class index).
    chunk_rows : int
        Rows per chunk.
    task : {"auto", "binary", "multiclass"}
    dtype : float32 or float64
    """

    def __init__(self, X, y, *, chunk_rows: int = 65536, task: str = "auto",
                 dtype=np.float64):
        import scipy.sparse as sp
        if chunk_rows < 1:
            raise InvalidParameterError(f"chunk_rows must be >= 1, got {chunk_rows}")
        X = sp.csr_matrix(X, dtype=dtype)
        X.sum_duplicates()
        X.sort_indices()
        y = np.asarray(y)
        if y.ndim != 1 or len(y) != X.shape[0]:
            raise InvalidParameterError(f"y must have shape ({X.shape[0]},), got {y.shape}")
        if X.shape[0] == 0:
            raise InvalidParameterError("X has no rows")
        if not np.all(np.isfinite(X.data)):
            raise InvalidParameterError("X contains NaN or infinite values")
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidParameterError(f"y must hold numeric labels: {exc}") from None
        bad = ~np.isfinite(y)
        if bad.any():
            raise InvalidParameterError(
                f"Input y contains NaN or infinity: {np.count_nonzero(bad):,} of {len(y):,} "
                f"labels (first at row {np.flatnonzero(bad)[0]}); every label must be a "
                f"finite number")
        enc = encode_labels(y, task=task, source="y")
        self.url = "memory"
        self.storage_options = {}
        self._X = X
        self._indices = X.indices.astype(np.int32 if X.shape[1] < 2**31 else np.int64)
        self._y = enc.y
        n_chunks = -(-X.shape[0] // chunk_rows)
        nnz_per_row = np.diff(X.indptr)
        sq = np.asarray(X.multiply(X).sum(axis=1)).ravel()
        starts = np.arange(n_chunks) * chunk_rows
        stops = np.minimum(starts + chunk_rows, X.shape[0])
        self.meta = {
            "format_version": 1, "n_rows": int(X.shape[0]), "n_features": int(X.shape[1]),
            "nnz": int(X.nnz), "chunk_rows": int(chunk_rows), "n_chunks": int(n_chunks),
            "task": enc.task, "classes": enc.classes.tolist(), "label_counts": enc.counts,
            "binary_values": False, "dtype": np.dtype(dtype).name,
            "index_dtype": self._indices.dtype.name,
            "chunk_nnz": [int(nnz_per_row[a:b].sum()) for a, b in zip(starts, stops)],
            "chunk_max_sq_norm": [float(sq[a:b].max()) for a, b in zip(starts, stops)],
            "complete": True,
        }

    zero_copy = True
    """Blocks are views of the caller's matrix: reading costs no memory."""

    def __repr__(self) -> str:
        return (f"InMemoryStore(n_rows={self.n_rows}, n_features={self.n_features}, "
                f"nnz={self.nnz}, n_chunks={self.n_chunks}, task={self.task!r})")

    @functools.cached_property
    def fingerprint(self) -> str:
        """sha256 (hex) of the content: shape, CSR arrays, labels and classes.

        Stands for a converted store's ``store_id`` in checkpoint identities: a checkpoint
        of a fit on other data is refused on resume.
        """
        h = hashlib.sha256()
        X = self._X
        for a in (np.array(X.shape), X.indptr, self._indices, X.data, self._y, self.classes):
            a = np.asarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(np.ascontiguousarray(a).view(np.uint8))
        return h.hexdigest()

    def read_rows(self, start: int, stop: int, chunk_id: int = -1) -> Chunk:
        X = self._X
        p0, p1 = int(X.indptr[start]), int(X.indptr[stop])
        indptr = X.indptr[start:stop + 1].astype(np.int64) - p0
        return Chunk(chunk_id, start, indptr, self._indices[p0:p1], X.data[p0:p1],
                     self._y[start:stop])

