"""Blocks: the scheduler's unit of work — a store chunk, or a slice of one.

``block_rows`` splits large chunks into blocks of at most that many rows, so that
block-coordinate solvers get many small blocks (spec_003 §3.5: aim for K >= 500) while the
store keeps large, well-compressed chunks. A block never spans two chunks, so reading a
block touches only its own chunk's bytes.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..exceptions import StoreError
from ..io import Chunk
from ._reduce import N_GROUPS, group_count, reduction_groups

__all__ = ["Block", "BlockLayout"]


@dataclasses.dataclass(frozen=True, eq=False)
class Block(Chunk):
    """One visited block: a :class:`~streamsvm.io.Chunk` view plus where it came from.

    Attributes
    ----------
    id : int
        Block id in ``[0, sched.n_blocks)`` (equals the chunk id when blocks are whole
        chunks). Blocks are numbered in row order.
    row_start : int
        Global index of the block's first row (use ``sched.state(...).view(block)`` rather
        than offset arithmetic).
    indptr, indices, data, y
        CSR arrays local to the block, as in :class:`~streamsvm.io.Chunk`.
    chunk : int
        Store chunk holding the block.
    sweep : int
        Sweep that visited the block (-1 outside a sweep).
    position : int
        Position of this visit in the sweep (-1 outside a sweep).
    rank : int
        Rank of this visit in (block id, occurrence) order (reductions fold by it).
    memo : dict or None
        Values a kernel derives from the rows alone (:meth:`derived`), kept with a block
        that outlives its pass (a dask worker's fused block) and carried by
        ``dataclasses.replace``; None: derived anew at each visit.
    """

    chunk: int = -1
    sweep: int = -1
    position: int = -1
    rank: int = -1
    memo: dict | None = dataclasses.field(default=None, repr=False)

    def derived(self, key, make):
        """``make()``, a value of the block's rows alone, kept in :attr:`memo` under
        ``key`` when the block has one (the next pass over the same rows takes it from
        there)."""
        if self.memo is None:
            return make()
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]


class BlockLayout:
    """Row ranges of the blocks of a store.

    Parameters
    ----------
    chunk_sizes : ndarray of shape (n_chunks,)
        Rows of each chunk (``store.chunk_sizes()``); chunks are consecutive row ranges.
    block_rows : int or None
        Split chunks into blocks of at most this many rows (the last block of a chunk
        is ragged). None: one block per chunk.

    Attributes
    ----------
    chunk : ndarray of shape (n_blocks,), int64
        Chunk of each block.
    start, stop : ndarray of shape (n_blocks,), int64
        Global row range ``[start, stop)`` of each block.
    whole : ndarray of shape (n_blocks,), bool
        Whether the block is its entire chunk.
    n_groups : int
        Most reduction groups (``_reduce.py``; :meth:`from_store` sizes it to the store).
    """

    def __init__(self, chunk_sizes, block_rows: int | None = None):
        sizes = np.asarray(chunk_sizes, dtype=np.int64)
        chunk_start = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
        if block_rows is None:
            per_chunk = np.ones(len(sizes), dtype=np.int64)
            step = np.maximum(sizes, 1)
        else:
            per_chunk = np.maximum(1, -(-sizes // block_rows))
            step = np.full(len(sizes), block_rows, dtype=np.int64)
        self.block_rows = block_rows
        self.chunk = np.repeat(np.arange(len(sizes), dtype=np.int64), per_chunk)
        first = np.repeat(np.cumsum(per_chunk) - per_chunk, per_chunk)
        k = np.arange(len(self.chunk), dtype=np.int64) - first
        self.start = chunk_start[self.chunk] + k * step[self.chunk]
        chunk_stop = chunk_start[self.chunk] + sizes[self.chunk]
        self.stop = np.minimum(self.start + step[self.chunk], chunk_stop)
        self.whole = (self.start == chunk_start[self.chunk]) & (self.stop == chunk_stop)
        self.n_rows = int(sizes.sum())
        self.n_groups = N_GROUPS        # at most; from_store sets it from the store's size
        self._groups = None

    @classmethod
    def from_store(cls, store, block_rows: int | None) -> "BlockLayout":
        """The layout of ``store`` (checks that its chunks cover its rows)."""
        sizes = np.asarray(store.chunk_sizes(), dtype=np.int64)
        if len(sizes) != store.n_chunks or sizes.sum() != store.n_rows or np.any(sizes < 0):
            raise StoreError(f"store {store.url!r}: chunk sizes do not add up "
                             f"to n_rows={store.n_rows}")
        layout = cls(sizes, block_rows)
        layout.n_groups = group_count(store.nnz, store.n_features, layout.n_blocks)
        return layout

    @property
    def n_blocks(self) -> int:
        return len(self.chunk)

    @property
    def sizes(self) -> np.ndarray:
        """Rows of each block, shape (n_blocks,)."""
        return self.stop - self.start

    @property
    def groups(self) -> np.ndarray:
        """Reduction group of each block, shape (n_blocks,): the unit in which run
        accumulators combine and a dask cluster places blocks (``_reduce.py``)."""
        if self._groups is None:
            self._groups = reduction_groups(self.sizes, self.n_groups)
        return self._groups
