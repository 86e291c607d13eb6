"""Per-row solver state (dual variables, margins, masks, preferences), chunk-aligned.

A :class:`RowState` holds one value (or ``width`` values) per row of the store, laid out in
row order, so the rows of every block are one contiguous slice: ``state.view(block)`` is a
writable view, with no copy and no offset arithmetic in solvers.

States live in RAM while their total fits the scheduler's memory budget; a state that does
not fit is *spilled* to a ``np.memmap`` file in a private temporary directory (under
``scratch_dir``, default the system temp dir), removed when the scheduler closes. Why a
memmap rather than a Zarr scratch store: per-row state is dense, fixed-width and rewritten
in place on every pass. A memmap gives the same in-place views as RAM (kernels cannot
tell the difference), the OS writes back only touched pages, and its page cache uses
memory the budget does not claim. Touched pages of a mapping count in the process's resident
set, though: a solver that sweeps a state much larger than the budget (``ww``'s β) calls
:meth:`RowState.drop_pages` once a block is done, so one block's pages stay resident. A
compressed chunk store would have to decode and re-encode every block's state on every
pass, and hand out copies instead of views.
"""

from __future__ import annotations

import logging
import mmap
import os
import shutil
import tempfile
import weakref

import numpy as np

from ..exceptions import InvalidParameterError

__all__ = ["RowState", "ScratchDir"]

logger = logging.getLogger(__name__)


class ScratchDir:
    """A private temporary directory for spilled states, created on first use.

    Parameters
    ----------
    parent : str or os.PathLike or None
        Where to create it (created if missing); None: ``tempfile.gettempdir()``.
    """

    def __init__(self, parent=None):
        self.parent = None if parent is None else os.fspath(parent)
        self.path: str | None = None
        self._finalizer = None

    def file(self, name: str) -> str:
        """Path of a new file for state ``name``."""
        if self.path is None:
            if self.parent is not None:
                os.makedirs(self.parent, exist_ok=True)
            self.path = tempfile.mkdtemp(prefix="streamsvm-state-", dir=self.parent)
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)
        fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".dat", dir=self.path)
        os.close(fd)
        return path

    def remove(self) -> None:
        """Delete the directory and every file in it."""
        if self._finalizer is not None:
            self._finalizer()
        self.path = None
        self._finalizer = None


class RowState:
    """A per-row array owned by the scheduler. Create with :meth:`PassScheduler.state`.

    Attributes
    ----------
    name : str
    dtype : numpy.dtype
    shape : tuple
        ``(n_rows,)`` or ``(n_rows, width)``.
    width : int or None
    spilled : bool
        True when the values live in a memmap file instead of RAM.
    path : str or None
        The memmap file when spilled.
    """

    def __init__(self, name: str, shape: tuple, dtype, fill=0, *, path: str | None = None):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.width = shape[1] if len(shape) == 2 else None
        self.path = path
        if path is None:
            self._array = np.full(shape, fill, dtype=self.dtype)
        else:
            mm = np.memmap(path, dtype=self.dtype, mode="w+", shape=shape)
            self._array = mm.view(np.ndarray)   # plain ndarray views onto the mapping
            if fill != 0:
                self._array[...] = fill

    @property
    def spilled(self) -> bool:
        return self.path is not None

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.dtype.itemsize

    def __repr__(self) -> str:
        where = f"memmap {self.path!r}" if self.spilled else "RAM"
        return f"RowState({self.name!r}, shape={self.shape}, dtype={self.dtype}, {where})"

    @property
    def values(self) -> np.ndarray:
        """Writable view of the whole state, shape ``self.shape`` (no copy, no data pass).

        For whole-state arithmetic between passes (``margins.values += s * xd.values``,
        ``alpha.values.sum()``); a spilled state streams through its memmap pages.
        """
        return self._data()

    def view(self, block) -> np.ndarray:
        """Writable view of the state of ``block``'s rows.

        Parameters
        ----------
        block : Block or Chunk
            A block yielded by the scheduler (anything with ``row_start`` and ``n_rows``).

        Returns
        -------
        ndarray of shape (block.n_rows,) or (block.n_rows, width)
        """
        start = int(block.row_start)
        stop = start + int(block.n_rows)
        if not 0 <= start <= stop <= self.shape[0]:
            raise InvalidParameterError(
                f"state {self.name!r}: block rows [{start}, {stop}) outside [0, {self.shape[0]})")
        return self._data()[start:stop]

    def fill(self, value) -> None:
        """Set every row to ``value``."""
        self._data()[...] = value

    def to_array(self) -> np.ndarray:
        """A copy of the whole state, shape ``self.shape`` (for checkpoints)."""
        return np.array(self._data(), copy=True)

    def load_array(self, array) -> None:
        """Overwrite the whole state from ``array`` of shape ``self.shape`` (from a checkpoint)."""
        np.copyto(self._data(), self._checked(array), casting="same_kind")

    def _checked(self, array) -> np.ndarray:
        """``array`` as an ndarray of this state's shape and a castable dtype."""
        array = np.asarray(array)
        if array.shape != self.shape or not np.can_cast(array.dtype, self.dtype, "same_kind"):
            raise InvalidParameterError(
                f"The 'array' parameter of RowState.load_array for state {self.name!r} must "
                f"have shape {self.shape} and a dtype castable to {self.dtype}. Got shape "
                f"{array.shape} and dtype {array.dtype} instead.")
        return array

    def drop_pages(self, block) -> None:
        """Unmap a spilled state's pages of ``block``'s rows from this process (no-op in
        RAM): the data stays in the file and the OS page cache, but no longer counts in the
        process's resident memory. A solver that sweeps a large spilled state block by block
        calls it once a block is done, so the peak RSS holds one block's pages, not the
        whole state's."""
        base = None if self._array is None else self._array.base
        if not isinstance(base, np.memmap) or getattr(base, "_mmap", None) is None or \
                not hasattr(mmap, "MADV_DONTNEED"):
            return
        row = self.dtype.itemsize * (self.width or 1)
        page = mmap.PAGESIZE
        lo = int(block.row_start) * row // page * page        # whole pages inside the rows
        hi = (int(block.row_start) + int(block.n_rows)) * row // page * page
        if hi > lo:
            base._mmap.madvise(mmap.MADV_DONTNEED, lo, hi - lo)

    def flush(self) -> None:
        """Write a spilled state's dirty pages to its file (no-op in RAM)."""
        base = None if self._array is None else self._array.base
        if isinstance(base, np.memmap):
            base.flush()

    def _data(self) -> np.ndarray:
        if self._array is None:
            raise InvalidParameterError(f"state {self.name!r} has been freed")
        return self._array

    def _release(self) -> None:
        """Drop the data and delete the memmap file (used by the scheduler)."""
        self._array = None
        if self.path is not None:
            try:
                os.remove(self.path)
            except FileNotFoundError:
                pass


class RemoteRowState(RowState):
    """A per-row state whose blocks live with the dask workers that own them
    (``_dask.py``): nothing in this process. Whole-state access gathers or scatters it
    (checkpoints); a block's view exists only on its worker.
    """

    def __init__(self, name: str, shape: tuple, dtype, fill, backend):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.width = shape[1] if len(shape) == 2 else None
        self.path = None
        self._array = None
        self._backend = backend
        backend.new_state(name, self.dtype, self.width, fill)

    @property
    def nbytes(self) -> int:          # held by the workers, not charged to this process
        return 0

    def __repr__(self) -> str:
        return f"RowState({self.name!r}, shape={self.shape}, dtype={self.dtype}, dask workers)"

    def _remote(self, what: str):
        raise InvalidParameterError(
            f"state {self.name!r} lives on the dask workers: {what} is not available in the "
            f"training process (use map_reduce, whose kernels get the block's rows)")

    @property
    def values(self) -> np.ndarray:
        self._remote("values")

    def view(self, block) -> np.ndarray:
        self._remote("a block's view")

    def fill(self, value) -> None:
        self._backend.fill_state(self.name, value)

    def to_array(self) -> np.ndarray:
        return self._backend.gather_state(self.name, self.shape, self.dtype)

    def load_array(self, array) -> None:
        self._backend.scatter_state(self.name,
                                    self._checked(array).astype(self.dtype, copy=False))

    def drop_pages(self, block) -> None:
        pass

    def flush(self) -> None:
        pass

    def _release(self) -> None:
        self._backend.drop_state(self.name)
