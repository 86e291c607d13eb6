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

A spilled state's file gets all its blocks reserved before it is mapped
(``posix_fallocate``, :meth:`ScratchDir.new_file`): a write into a mapping of a sparse file
on a full disk is a SIGBUS that kills the process. A state that does not fit the scratch
directory is refused before anything is allocated, naming the directory, the bytes needed
and free. Nothing is written by hand: a state of zeros is the reserved file as it is; other
initial values are written slice by slice, each slice's pages dropped from the process once
written (:meth:`RowState.fill`), with the scheduler's poll between slices so that a run
interrupted while setting up stops at once.
"""

from __future__ import annotations

import logging
import math
import mmap
import os
import shutil
import tempfile
import weakref

import numpy as np

from .._scratch import OWNER, format_bytes, private_dir, reserve_file, sweep_once
from ..exceptions import InvalidParameterError

__all__ = ["RowState", "ScratchDir", "flagged_rows"]

logger = logging.getLogger(__name__)


class ScratchDir:
    """A private temporary directory for spilled states, created on first use.

    It holds an owner file, so a later run removes it if this process dies without
    cleaning up (``streamsvm._scratch``), and its files are reserved before use
    (:meth:`new_file`).

    Parameters
    ----------
    parent : str or os.PathLike or None
        Where to create it (created if missing); None: ``tempfile.gettempdir()``.
    poll : callable, optional
        Called between steps of long reservations (may raise to interrupt them).
    """

    def __init__(self, parent=None, poll=None):
        self.parent = None if parent is None else os.fspath(parent)
        self.path: str | None = None
        self.poll = poll
        self._finalizer = None
        self._sparse: dict[str, int] = {}      # files the file system could not reserve

    @property
    def directory(self) -> str:
        """The scratch directory asked for (the parent of the private one), for messages."""
        return self.parent if self.parent is not None else tempfile.gettempdir()

    def sweep(self) -> None:
        """Remove the private folders that dead processes left in the parent directory
        (once per process and directory)."""
        sweep_once(self.directory)

    def file(self, name: str) -> str:
        """Path of a new empty file for state ``name``."""
        if self.path is None:
            self.path = private_dir("streamsvm-state-", self.parent)
            self._finalizer = weakref.finalize(self, shutil.rmtree, self.path, True)
        fd, path = tempfile.mkstemp(prefix=f"{name}-", suffix=".dat", dir=self.path)
        os.close(fd)
        return path

    def new_file(self, name: str, nbytes: int, what: str) -> str:
        """Path of a new file of ``nbytes`` bytes for ``what``, its blocks reserved (or,
        where the file system cannot reserve, checked against the free space).

        Raises
        ------
        OutputNotWritableError
            Not enough room: nothing is left behind (the private directory is removed
            if this was its only file).
        """
        path = self.file(name)
        try:
            self.reserve(path, nbytes, what)
        except BaseException:
            self.discard(path)
            raise
        return path

    def reserve(self, path: str, nbytes: int, what: str) -> None:
        """Reserve ``nbytes`` for the existing file ``path`` (:func:`reserve_file`)."""
        pending = sum(n for p, n in self._sparse.items() if p != path and os.path.exists(p))
        if not reserve_file(path, nbytes, directory=self.directory, what=what,
                            pending=pending, poll=self.poll):
            self._sparse[path] = int(nbytes)

    def discard(self, path: str) -> None:
        """Delete the file ``path``; the private directory too once nothing else is in it."""
        self._sparse.pop(path, None)
        try:
            os.remove(path)
        except FileNotFoundError:
            pass
        if self.path is not None and os.listdir(self.path) == [OWNER]:
            self.remove()

    def remove(self) -> None:
        """Delete the directory and every file in it."""
        if self._finalizer is not None:
            self._finalizer()
        self.path = None
        self._finalizer = None
        self._sparse.clear()


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
    remote : bool
        True when the values live with the dask workers (:class:`RemoteRowState`).
    """

    remote = False

    def __init__(self, name: str, shape: tuple, dtype, fill=0, *, path: str | None = None,
                 poll=None):
        self.name = name
        self.dtype = np.dtype(dtype)
        self.shape = shape
        self.width = shape[1] if len(shape) == 2 else None
        self.path = path
        self._poll = poll
        self._array = None
        if path is None:
            try:     # zeros: pages the OS hands out zeroed, none written here
                self._array = np.zeros(shape, dtype=self.dtype) if fill == 0 else \
                    np.empty(shape, dtype=self.dtype)
            except MemoryError:
                raise InvalidParameterError(
                    f"state {name!r}: this machine cannot allocate its "
                    f"{format_bytes(self.nbytes)} in RAM; give a smaller memory budget "
                    f"(--memory), so that it spills to the scratch directory") from None
        else:    # the file is already at its size, its blocks reserved (ScratchDir.new_file)
            mm = np.memmap(path, dtype=self.dtype, mode="r+", shape=shape)
            self._array = mm.view(np.ndarray)   # plain ndarray views onto the mapping
        if fill != 0:
            self.fill(fill)

    @property
    def spilled(self) -> bool:
        return self.path is not None

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

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
        """Set every row to ``value`` (a spilled state slice by slice, each slice's pages
        dropped once written: :meth:`drop_pages`)."""
        data = self._data()
        for lo, hi in self._slices():
            data[lo:hi] = value
            self.drop_rows(lo, hi)

    def to_array(self) -> np.ndarray:
        """A copy of the whole state, shape ``self.shape`` (for checkpoints)."""
        return np.array(self._data(), copy=True)

    def take(self, ids: np.ndarray) -> np.ndarray:
        """A copy of the rows ``ids`` (global row ids): a RAM slab's local copies."""
        return np.ascontiguousarray(self._data()[ids])

    def put(self, ids: np.ndarray, values: np.ndarray) -> None:
        """Write ``values`` into the rows ``ids`` (a RAM slab's local copies back)."""
        self._data()[ids] = values

    def load_array(self, array) -> None:
        """Overwrite the whole state from ``array`` of shape ``self.shape`` (from a checkpoint)."""
        array, data = self._checked(array), self._data()
        for lo, hi in self._slices():
            np.copyto(data[lo:hi], array[lo:hi], casting="same_kind")
            self.drop_rows(lo, hi)

    FILL_BYTES = 64 << 20
    """Bytes per slice when a whole state is written (:meth:`fill`, :meth:`load_array`)."""

    def _slices(self):
        """Row ranges of about :attr:`FILL_BYTES` bytes covering the state, the scheduler's
        poll (set-up interruption) called before each."""
        n = self.shape[0]
        step = max(1, self.FILL_BYTES // (self.dtype.itemsize * (self.width or 1)))
        for lo in range(0, n, step):
            if self._poll is not None:
                self._poll()
            yield lo, min(n, lo + step)

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
        self.drop_rows(int(block.row_start), int(block.row_start) + int(block.n_rows))

    def drop_rows(self, start: int, stop: int) -> None:
        """:meth:`drop_pages` of rows ``[start, stop)``: for a solver's own scan of a whole
        state (outside a sweep), piece by piece, so that a spilled state's file is not
        mapped whole."""
        base = None if self._array is None else self._array.base
        if not isinstance(base, np.memmap) or getattr(base, "_mmap", None) is None or \
                not hasattr(mmap, "MADV_DONTNEED"):
            return
        row = self.dtype.itemsize * (self.width or 1)
        page = mmap.PAGESIZE
        lo = start * row // page * page        # whole pages inside the rows
        hi = stop * row // page * page
        if stop >= self.shape[0]:              # the last rows: to the mapping's end
            hi = len(base._mmap)
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
    (checkpoints), :meth:`take` and :meth:`put` fetch and write some rows (a RAM slab's
    local copies); a block's view exists only on its worker.
    """

    remote = True

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

    def take(self, ids: np.ndarray) -> np.ndarray:
        return self._backend.take_rows(self.name, np.asarray(ids, np.int64), self.dtype)

    def put(self, ids: np.ndarray, values: np.ndarray) -> None:
        self._backend.put_rows(self.name, np.asarray(ids, np.int64),
                               np.asarray(values).astype(self.dtype, copy=False))

    def drop_pages(self, block) -> None:
        pass

    def drop_rows(self, start: int, stop: int) -> None:
        pass

    def flush(self) -> None:
        pass

    def _release(self) -> None:
        self._backend.drop_state(self.name)


def flagged_rows(flags: np.ndarray) -> int:
    """How many rows of ``flags`` (a block's view of a state, shape (n,) or (n, width)) have
    a nonzero entry."""
    f = np.asarray(flags)
    return int(np.count_nonzero(f if f.ndim == 1 else f.any(axis=1)))
