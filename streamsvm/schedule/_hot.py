"""Hot rows: store rows a solver visits between the passes that bring them (DESIGN.md §4).

AVSF's hot cache (spec_003 §3.6 item 3): the rows with the largest preferences are copied
into RAM as their blocks stream by, and their visits are spread over the whole pass instead
of being packed into their block's window. Unlike the RAM slab of
:class:`~streamsvm.schedule.ResidentRows`, which replaces the sweeps of the store, hot rows
live *beside* the sweeps: rows enter one at a time (:meth:`HotRows.admit`) and leave one at
a time (:meth:`HotRows.evict`), addressed by slot. Both hold their rows the same way, a
:class:`~streamsvm.schedule._slabs.RamRows` (CSR, labels, global ids and local state copies
by slot): what differs is only which rows enter and when — the solver's key state for the
resident rows, the solver's scores for the hot rows.

While a row is hot its per-row states live in :attr:`HotRows.local` (the scheduler's states
hold a stale copy, written back by :meth:`HotRows.sync` and on eviction), and the flag
state is 1. Every byte is charged to the memory budget (:meth:`PassScheduler.reserve`); the
rows carry their global ids, so a checkpoint names them and :meth:`HotRows.load_state_dict`
reads them again from the store.
"""

from __future__ import annotations

import logging

import numpy as np

from ._slabs import RamRows, rows_from_store

__all__ = ["HotRows"]

logger = logging.getLogger(__name__)


class HotRows:
    """A RAM cache of store rows beside the sweeps (module doc). Create with
    :meth:`PassScheduler.hot_rows`.

    Parameters
    ----------
    sched : PassScheduler
    states : tuple of RowState
        The solver's states copied to :attr:`local` while a row is hot.
    flag : RowState
        uint8, 1 while the row is hot (kept in step by admit and evict).
    max_rows : int
        Most rows held.
    room : int
        Most bytes held (CSR entries plus ``extra_row_bytes`` a row).
    extra_row_bytes : int
        Bytes a hot row costs besides its CSR entries (pointer, label, id, local states,
        the solver's own per-row arrays).

    Attributes
    ----------
    X : tuple (indptr, indices, data)
        The hot rows' CSR, slot order (``data`` empty for a store of unit values).
    y, ids : ndarray
        Labels and global row ids by slot.
    local : dict of name → ndarray
        The states of the hot rows by slot.
    """

    def __init__(self, sched, states, flag, *, max_rows: int, room: int, extra_row_bytes: int):
        store = sched.store
        self.sched, self.states, self.flag = sched, tuple(states), flag
        self.unit = store.binary_values
        self.row_bytes = store.dtype.itemsize + np.dtype(store.meta["index_dtype"]).itemsize
        self.extra_row_bytes = int(extra_row_bytes)
        self.room = max(0, int(room))
        self.max_rows = int(max(0, min(max_rows, self.room // max(1, self.extra_row_bytes))))
        self.max_nnz = int(min(store.nnz, self.room // max(1, self.row_bytes)))
        # sized for the most the room can hold: address space, only written pages resident
        self.rows = RamRows(store, self.unit, self.max_rows, self.max_nnz, self.states)
        self.whole = False

    # -- views (the rows by slot: :class:`~streamsvm.schedule._slabs.RamRows`) -------------
    X = property(lambda self: self.rows.X)
    y = property(lambda self: self.rows.y)
    ids = property(lambda self: self.rows.ids)
    local = property(lambda self: self.rows.local)
    n_rows = property(lambda self: self.rows.n_rows)
    nnz = property(lambda self: self.rows.nnz)

    @property
    def nbytes(self) -> int:
        return self.nnz * self.row_bytes + self.n_rows * self.extra_row_bytes

    def fits_store(self) -> bool:
        """Whether every row of the store fits the room (:meth:`load_all`)."""
        store = self.sched.store
        return store.nnz * self.row_bytes + store.n_rows * self.extra_row_bytes <= self.room

    def mean_row_bytes(self) -> float:
        """What a row of the store's mean length costs."""
        store = self.sched.store
        return self.extra_row_bytes + self.row_bytes * store.nnz / max(1, store.n_rows)

    def rows_that_fit(self) -> int:
        """About how many rows of the store's mean length the room holds."""
        return int(self.room // self.mean_row_bytes())

    def full(self, row_nnz: float = 1.0) -> bool:
        """No room for another row of ``row_nnz`` non-zeros (in rows or in bytes)."""
        return (self.n_rows >= self.max_rows or self.nnz + row_nnz > self.max_nnz
                or self.nbytes + self.extra_row_bytes + self.row_bytes * row_nnz > self.room)

    # -- entering and leaving -------------------------------------------------------------
    def load_all(self) -> None:
        """Every store row hot, read at once (the whole store fits): one bulk read."""
        blk = self.sched.read_all()
        data = np.empty(0, blk.data.dtype) if self.unit else blk.data
        self.rows = RamRows.holding((blk.indptr.astype(np.int64), blk.indices, data), blk.y,
                                    np.arange(blk.n_rows, dtype=np.int64), self.unit)
        self.rows.gather(self.states)
        self.max_rows, self.whole = blk.n_rows, True
        self.flag.fill(1)
        self.sched.reserve(self.nbytes)
        logger.info("the whole store (%d rows, %.1f MB) is hot: in RAM", self.n_rows,
                    self.nbytes / 1e6)

    def admit(self, block, rows: np.ndarray, views: tuple) -> int:
        """Copy the local rows ``rows`` of a visited ``block`` in (as many as fit, in that
        order), with ``views``: the block's rows of each state; returns how many."""
        n, q = self.n_rows, self.nnz
        if len(rows) == 0 or self.whole:
            return 0
        lens = np.diff(block.indptr)[rows]
        cost = np.cumsum(lens * self.row_bytes + self.extra_row_bytes)
        fit = int(min(len(rows), self.max_rows - n,
                      np.searchsorted(cost, self.room - self.nbytes, side="right"),
                      np.searchsorted(np.cumsum(lens), self.max_nnz - q, side="right")))
        if fit <= 0:
            return 0
        rows = np.asarray(rows[:fit], dtype=np.int64)
        self.rows.take(block, rows, int(lens[:fit].sum()), views)
        self.flag.view(block)[rows] = 1
        self.sched.reserve(self.nbytes)
        return fit

    def sync(self) -> None:
        """Write the hot rows' local states back to the scheduler's states."""
        self.rows.write_back(self.states)

    def evict(self, slots: np.ndarray) -> None:
        """Rows at ``slots`` (bool mask or indices) leave: their states written back, the
        rest compacted in slot order."""
        if self.whole:
            raise RuntimeError("a store held whole stays hot")
        mask = np.zeros(self.n_rows, dtype=bool)
        mask[slots] = True
        if not mask.any():
            return
        gone = self.ids[mask]
        self.rows.write_back(self.states, mask)
        self.flag.values[gone] = 0
        self.rows.keep(np.flatnonzero(~mask))
        self.sched.reserve(self.nbytes)

    def clear(self) -> None:
        """Every row leaves (states written back)."""
        if self.n_rows:
            self.evict(np.arange(self.n_rows))

    def close(self) -> None:
        """States written back, the memory released."""
        if self.whole:
            self.rows.write_back(self.states)
        else:
            self.clear()
        self.sched.reserve(0)

    # -- checkpoints -------------------------------------------------------------------
    def state_dict(self) -> tuple[dict, dict]:
        arrays = {"ids": self.ids.copy()}
        arrays.update({f"local.{k}": v.copy() for k, v in self.local.items()})
        return arrays, {"whole": self.whole}

    def load_state_dict(self, arrays: dict, meta: dict) -> None:
        """The same rows in the same slots, read again from the store (no pass counted)."""
        if meta["whole"]:
            self.load_all()
        else:
            ids = np.asarray(arrays["ids"], dtype=np.int64)
            self.rows.n_rows = self.rows.nnz = 0
            if len(ids):
                y, X = rows_from_store(self.sched, ids, self.unit)
                self.rows.put(ids, y, X)
            self.sched.reserve(self.nbytes)
        for name, v in self.local.items():
            v[...] = arrays[f"local.{name}"]
