"""The store interface: :class:`StoreMeta` (metadata accessors, chunk geometry, the
capabilities the scheduler plans by) and :class:`Chunk`, the CSR block a store reads.

:class:`~._store.Store` (a Zarr store, ``_store.py``) and ``InMemoryStore`` (``_memory.py``)
implement it.
"""

from __future__ import annotations

import abc
import dataclasses

import numpy as np

from ..exceptions import StoreError

__all__ = ["Chunk", "StoreMeta"]


@dataclasses.dataclass(frozen=True, eq=False)
class Chunk:
    """One row chunk of a store, as CSR arrays local to the chunk.

    Attributes
    ----------
    id : int
        Chunk index in the store.
    row_start : int
        Global index of the chunk's first row.
    indptr : ndarray of shape (n_rows + 1,), int64
        Row pointer starting at 0.
    indices : ndarray of shape (nnz,), int32 or int64
        0-based feature ids, strictly increasing within a row.
    data : ndarray of shape (nnz,), float32 or float64
        Values (all ones when the store omits ``data``).
    y : ndarray of shape (n_rows,)
        float32 ±1 (binary) or int32 class index (multiclass).
    """

    id: int
    row_start: int
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    y: np.ndarray

    @property
    def n_rows(self) -> int:
        return len(self.y)

    @property
    def nnz(self) -> int:
        return int(self.indptr[-1])

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in (self.indptr, self.indices, self.data, self.y))

    def rows(self, start: int, stop: int) -> "Chunk":
        """A view of rows ``[start, stop)`` of this chunk (same ``id``)."""
        p0, p1 = int(self.indptr[start]), int(self.indptr[stop])
        return Chunk(self.id, self.row_start + start, self.indptr[start:stop + 1] - p0,
                     self.indices[p0:p1], self.data[p0:p1], self.y[start:stop])

    def to_scipy(self):
        """The chunk as a ``scipy.sparse.csr_matrix`` with ``n_features`` inferred."""
        import scipy.sparse as sp
        n_cols = int(self.indices.max()) + 1 if len(self.indices) else 0
        return sp.csr_matrix((self.data, self.indices, self.indptr), shape=(self.n_rows, n_cols))


class StoreMeta(abc.ABC):
    """The store interface: all the scheduler, the solvers and training use of a store.

    Shared by :class:`Store` and ``InMemoryStore`` (``_memory.py``); any other store (a
    wrapper that counts reads, in the tests) subclasses it too, and the
    :class:`~streamsvm.schedule.PassScheduler` refuses anything else. Metadata accessors read
    ``meta``; a store implements :meth:`read_rows`. The capabilities below default to those
    of a store whose blocks own their arrays, that decodes nothing it keeps between reads,
    and that reads a row range by its whole chunk; a store overrides what differs.

    Attributes
    ----------
    meta : dict
        The store's ``streamsvm`` attributes (DESIGN.md §3).
    url : str
        Where the store is (``"memory"`` for an in-memory store).
    storage_options : dict
        fsspec options that open ``url`` (empty in memory).
    """

    meta: dict
    url: str
    storage_options: dict

    # -- capabilities --------------------------------------------------------------
    zero_copy = False
    """Whether blocks are views of memory the caller holds, so that reading costs nothing of
    the memory budget."""

    range_reads = False
    """Whether reading a row range costs only that range's bytes. If not, the scheduler
    cuts blocks that split a chunk from the chunk read whole, keeping the last few."""

    fingerprint = ""
    """A content hash that stands for ``meta['store_id']`` in checkpoint identities, for a
    store written without one (in memory); empty when the store has its id."""

    def held_bytes_for(self, keep: int) -> int:
        """Bytes the reader keeps decoded between reads when it keeps up to ``keep`` inner
        chunks per array (none here)."""
        return 0

    @property
    def stored_bytes_read(self) -> int:
        """Bytes this process has read from the store's files, as stored (compressed):
        what the disk or the network delivered (none here: nothing is read)."""
        return 0

    def keep_partial(self, keep: int) -> None:
        """Keep up to ``keep`` decoded inner chunks per array between reads (nothing to keep
        here)."""

    def rows_per_inner_chunk(self) -> float:
        """Rows whose entries one decode holds (here every row: nothing is decoded)."""
        return float(self.n_rows)

    def largest_inner_bytes(self) -> int:
        """Decoded bytes of the largest inner chunk, what one read decodes at once (none
        here)."""
        return 0

    @abc.abstractmethod
    def read_rows(self, start: int, stop: int, chunk_id: int = -1) -> Chunk:
        """Read global rows ``[start, stop)`` as a :class:`Chunk` with id ``chunk_id``."""

    # -- metadata ------------------------------------------------------------------
    n_rows = property(lambda self: int(self.meta["n_rows"]))
    n_features = property(lambda self: int(self.meta["n_features"]))
    nnz = property(lambda self: int(self.meta["nnz"]))
    chunk_rows = property(lambda self: int(self.meta["chunk_rows"]))
    n_chunks = property(lambda self: int(self.meta["n_chunks"]))
    task = property(lambda self: self.meta["task"])
    binary_values = property(lambda self: bool(self.meta["binary_values"]))
    dtype = property(lambda self: np.dtype(self.meta["dtype"]))

    @property
    def classes(self) -> np.ndarray:
        """Original labels, in stored order (binary: ``[negative, positive]``)."""
        return np.asarray(self.meta["classes"], dtype=np.float64)

    @property
    def label_counts(self) -> dict[str, int]:
        return dict(self.meta["label_counts"])

    @property
    def chunk_nnz(self) -> np.ndarray:
        return np.asarray(self.meta["chunk_nnz"], dtype=np.int64)

    @property
    def chunk_max_sq_norm(self) -> np.ndarray:
        return np.asarray(self.meta["chunk_max_sq_norm"], dtype=np.float64)

    def _check_chunk(self, i: int) -> None:
        if not 0 <= i < self.n_chunks:
            raise StoreError(f"store {self.url!r}: chunk {i} out of range [0, {self.n_chunks})")

    def chunk_bounds(self, i: int) -> tuple[int, int]:
        """Global row range ``[start, stop)`` of chunk ``i``."""
        self._check_chunk(i)
        start = i * self.chunk_rows
        return start, min(start + self.chunk_rows, self.n_rows)

    def chunk_sizes(self) -> np.ndarray:
        """Number of rows of every chunk, shape (n_chunks,)."""
        sizes = np.full(self.n_chunks, self.chunk_rows, dtype=np.int64)
        if self.n_chunks:
            sizes[-1] = self.n_rows - (self.n_chunks - 1) * self.chunk_rows
        return sizes

    def read_chunk(self, i: int) -> Chunk:
        """Read row chunk ``i``; touches only that chunk's bytes."""
        start, stop = self.chunk_bounds(i)
        return self.read_rows(start, stop, chunk_id=i)

    def iter_chunks(self):
        """Yield every chunk in order (a convenience; solvers use the PassScheduler)."""
        for i in range(self.n_chunks):
            yield self.read_chunk(i)
