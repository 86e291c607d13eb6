"""The slabs that hold resident rows (``_resident.py``): in RAM and on scratch disk.

* :class:`RamRows`, one CSR matrix of the kept rows with local copies of the solver's
  per-row states, filled by a :class:`RamCollector` as the blocks of a sweep go by;
* :class:`DiskRows`, the kept rows uncompressed in scratch files, read back block by block
  (:class:`SlabBlock`, with the rows' global ids), written by a :class:`DiskWriter`;
* :func:`rows_from_store`, rows read again from the store by id (a resume rebuilding a
  slab, the hot rows filled at once).

Each charges what it holds as it comes (the RAM collector through the scheduler's
reservation, the disk writer against its limit) and gives up, releasing it, once over.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os

import numpy as np

from ..io import Chunk
from ..kernels import csr_take_rows, take_rows

__all__ = ["DiskRows", "DiskWriter", "RamCollector", "RamRows", "SlabBlock", "block_rows",
           "row_ids", "rows_from_store"]

_PARTS = ("rows", "lens", "y", "indices", "data")


@dataclasses.dataclass(frozen=True, eq=False)
class SlabBlock(Chunk):
    """Rows ``[row_start, row_start + n_rows)`` of a disk slab (``row_start`` counts slab
    rows), read back as CSR with the rows' global ids ``ids``."""
    ids: np.ndarray = None
    sweep: int = -1
    position: int = -1

    @property
    def nbytes(self) -> int:
        return super().nbytes + self.ids.nbytes


def row_ids(block, r: np.ndarray) -> np.ndarray:
    """Global ids of the local rows ``r`` of a store block or a :class:`SlabBlock`."""
    if isinstance(block, SlabBlock):
        return block.ids[r]
    return block.row_start + r


class RamRows:
    """Store rows held in RAM by slot: the one row-id interface of the resident rows' RAM
    slab and of the hot rows (``_hot.py``), and what a solver's function gets from
    :meth:`PassScheduler.sweep` over either.

    ``X = (indptr, indices, data)`` their CSR (``data`` empty for a store whose values are
    all 1), ``y`` their labels, ``ids`` their global row ids, ``local`` copies of the
    solver's per-row states for them (written back when they leave), by slot. The arrays
    are sized once for the most rows and non-zeros a room holds (address space: only the
    pages written become resident, and nothing is copied to grow or install them): rows
    enter after the last slot (:meth:`take`), leave by compaction in place (:meth:`keep`),
    or come all at once (:meth:`holding`, :meth:`put`).
    """

    def __init__(self, store, unit: bool, max_rows: int, max_nnz: int, states=()):
        self.unit = bool(unit)
        self._alloc(max_rows, max_nnz, np.dtype(store.meta["index_dtype"]), store.dtype,
                    {st.name: (st.shape[1:], st.dtype) for st in states})

    def _alloc(self, rows: int, nnz: int, index_dtype, value_dtype, local: dict) -> None:
        self._indptr = np.zeros(rows + 1, dtype=np.int64)
        self._indices = np.empty(nnz, dtype=index_dtype)
        self._data = np.empty(0 if self.unit else nnz, dtype=value_dtype)
        self._ids = np.empty(rows, dtype=np.int64)
        self._y = None                      # the labels' dtype comes with the first rows
        self._local = {k: np.empty((rows,) + tail, dtype=dt) for k, (tail, dt) in local.items()}
        self._taken: dict = {}              # fingerprints of the remote states' copies
        self.n_rows = self.nnz = 0

    @classmethod
    def holding(cls, X, y, ids, unit: bool) -> "RamRows":
        """Rows given whole (a bulk read of the store, rows read again by id), held as they
        are: no copy."""
        self = cls.__new__(cls)
        self.unit = bool(unit)
        self._indptr, self._indices, self._data = X
        self._ids, self._y, self._local, self._taken = ids, y, {}, {}
        self.n_rows, self.nnz = len(ids), int(X[0][-1]) if len(X[0]) else 0
        return self

    # -- views -------------------------------------------------------------------------
    @property
    def X(self) -> tuple:
        n, q = self.n_rows, self.nnz
        return (self._indptr[:n + 1], self._indices[:q], self._data[:0 if self.unit else q])

    @property
    def y(self) -> np.ndarray:
        return self._y[:self.n_rows] if self._y is not None else np.empty(0, np.float32)

    @property
    def ids(self) -> np.ndarray:
        return self._ids[:self.n_rows]

    @property
    def local(self) -> dict:
        return {k: v[:self.n_rows] for k, v in self._local.items()}

    @property
    def capacity(self) -> tuple[int, int]:
        """The most rows and non-zeros the arrays hold."""
        return len(self._ids), len(self._indices)

    @property
    def nbytes(self) -> int:
        """Bytes of the rows held (CSR, labels, ids, local states)."""
        return sum(a.nbytes for a in self.X) + self.y.nbytes + self.ids.nbytes + \
            sum(a.nbytes for a in self.local.values())

    # -- rows in and out ---------------------------------------------------------------
    def take(self, block, rows: np.ndarray, nnz: int, views=()) -> None:
        """Copy the local rows ``rows`` (int64, ``nnz`` entries) of a visited block in
        after the last slot, with ``views``: the block's rows of each local state. The
        caller checked they fit."""
        m, n, q = len(rows), self.n_rows, self.nnz
        if m == 0:
            return
        if self._y is None:
            self._y = np.empty(len(self._ids), dtype=block.y.dtype)
        ptr = np.empty(m + 1, dtype=np.int64)
        data = block.data[:0] if self.unit else block.data
        csr_take_rows((block.indptr, block.indices, data), rows,
                      (ptr, self._indices[q:q + nnz],
                       self._data[q:q + nnz] if len(data) else self._data[:0]))
        self._indptr[n + 1:n + m + 1] = ptr[1:] + q
        self._y[n:n + m] = block.y[rows]
        self._ids[n:n + m] = row_ids(block, rows)
        for v, w in zip(self._local.values(), views):
            v[n:n + m] = w[rows]
        self.n_rows, self.nnz = n + m, q + nnz

    def keep(self, slots: np.ndarray) -> None:
        """Keep only the rows at ``slots`` (ascending), compacted in place: the kept rows
        only move to lower slots, so their entries are copied forward within the same
        arrays (a second copy of the rows, made at every eviction, took up to the whole
        room beyond the budget)."""
        m = len(slots)
        ptr = np.empty(m + 1, dtype=np.int64)
        csr_take_rows(self.X, slots, (ptr, self._indices, self._data))
        self._indptr[:m + 1] = ptr
        self._ids[:m] = self._ids[slots]
        if self._y is not None:
            self._y[:m] = self._y[slots]
        for v in self._local.values():
            v[:m] = v[slots]
        self.n_rows, self.nnz = m, int(ptr[-1])

    def put(self, ids: np.ndarray, y: np.ndarray, X: tuple) -> None:
        """Hold exactly the rows ``ids`` (read again from the store, e.g. on resume) in
        slots 0..m-1, the arrays grown if they hold fewer (local states left to the
        caller)."""
        m, nnz = len(ids), int(X[0][-1])
        rows, entries = self.capacity
        if m > rows or nnz > entries:
            self._alloc(max(m, rows), max(nnz, entries), self._indices.dtype, self._data.dtype,
                        {k: (v.shape[1:], v.dtype) for k, v in self._local.items()})
        if self._y is None:
            self._y = np.empty(len(self._ids), dtype=y.dtype)
        self._indptr[:m + 1] = X[0]
        self._indices[:nnz] = X[1]
        if not self.unit:
            self._data[:nnz] = X[2]
        self._ids[:m], self._y[:m] = ids, y
        self.n_rows, self.nnz = m, nnz

    def gather(self, states) -> None:
        """Local copies of ``states`` for the rows held, gathered by id (a spilled state's
        pages unmapped after: the rows are scattered over its whole file)."""
        self._local, self._taken = {}, {}
        for st in states:
            self._local[st.name] = v = st.take(self.ids)
            if st.remote:                       # (a write-back would go over the network)
                self._taken[st.name] = _digest(self.ids, v)
            st.drop_rows(0, st.shape[0])

    def write_back(self, states, slots=None) -> None:
        """The local copies written back to ``states`` (of the rows at ``slots``: a bool
        mask or indices; default every row). A state on the dask workers is sent back only
        if its rows changed since :meth:`gather` (newton's polish changes its duals, not
        the flags and curvatures beside them: those were 2/3 of what cg sent a pass)."""
        ids = self.ids if slots is None else self.ids[slots]
        taken = self._taken
        for st in states:
            v = self._local[st.name][:self.n_rows]
            if slots is None and st.name in taken and _digest(ids, v) == taken[st.name]:
                continue
            st.put(ids, v if slots is None else v[slots])
            st.drop_rows(0, st.shape[0])        # (as in gather)


def _digest(ids: np.ndarray, values: np.ndarray) -> bytes:
    """A fingerprint of rows ``ids`` holding ``values`` (BLAKE2b, 128 bits)."""
    h = hashlib.blake2b(digest_size=16)
    for a in (ids, values):
        h.update(np.ascontiguousarray(a).view(np.uint8))
    return h.digest()


class RamCollector:
    """Kept rows copied out of the visited blocks for a new RAM slab, charged to the budget
    as they come; gives up, releasing the charge, once they exceed ``room`` bytes.

    The rows go straight into a :class:`RamRows` sized for the most that ``room`` can hold
    (reserved address space: only the pages written become resident), so installing the
    slab copies nothing: collecting per-block pieces and concatenating them held the slab
    twice, and the freed pieces stayed in malloc's arenas (510 MB peak at a 200 MB budget).
    """

    kind = "ram"

    def __init__(self, sched, room: int, row_bytes: int, extra_row_bytes: int, unit: bool):
        self.sched, self.room = sched, room
        self.row_bytes, self.extra_row_bytes = row_bytes, extra_row_bytes
        store = sched.store
        max_rows = int(min(store.n_rows, max(0, room) // max(1, extra_row_bytes)))
        max_nnz = int(min(store.nnz, max(0, room) // max(1, row_bytes)))
        self.rows = RamRows(store, unit, max_rows, max_nnz)
        self.used = 0

    @property
    def collected(self) -> RamRows | None:
        """The rows collected, or None (abandoned)."""
        return self.rows

    def add(self, block, keep: np.ndarray, nnz: int | None = None) -> None:
        """Copy the rows ``keep`` marks (``nnz``: their entries, when the caller counted
        them with ``kept_rows``)."""
        if self.rows is None:
            return
        r = np.flatnonzero(keep)
        nnz = int(np.diff(block.indptr)[keep].sum()) if nnz is None else int(nnz)
        nbytes = nnz * self.row_bytes + len(r) * self.extra_row_bytes
        if self.used + nbytes > self.room:
            self.abandon()
            return
        self.used += nbytes
        self.sched.reserve(self.used)
        self.rows.take(block, r, nnz)

    def abandon(self) -> None:
        self.rows = None
        self.sched.reserve(0)


class DiskWriter:
    """Appends kept rows to the files of a new disk slab; gives up (deleting the files)
    once they exceed ``limit`` bytes, or when a write fails (``error``: a full scratch
    disk is not fatal, the run goes on streaming)."""

    kind = "disk"

    def __init__(self, sched, dtypes: dict, unit: bool, block_rows: int, limit: int):
        self.dtypes = {"rows": np.dtype(np.int64), "lens": np.dtype(np.int32),
                       "y": None if dtypes["y"] is None else np.dtype(dtypes["y"]),
                       "indices": np.dtype(dtypes["indices"]), "data": np.dtype(dtypes["data"])}
        self.unit, self.block_rows, self.limit = unit, int(block_rows), int(limit)
        self.paths = {p: sched.scratch_file(f"resident-{p}") for p in self.parts}
        self._files = {p: open(path, "wb") for p, path in self.paths.items()}
        self.n_rows = self.nbytes = 0
        self.bounds = [[0, 0, 0, 0]]          # per block: row start/stop, nnz start/stop
        self.failed = False
        self.error: OSError | None = None

    @property
    def parts(self):
        return tuple(p for p in _PARTS if not (self.unit and p == "data"))

    def add(self, block, keep: np.ndarray, nnz: int | None = None) -> None:
        """Append the rows ``keep`` marks (``nnz`` unused: :meth:`append` counts them)."""
        r = np.flatnonzero(keep)
        if len(r) == 0 or self.failed:
            return
        y, (indptr, indices, data) = take_rows(
            r, block.y, (block.indptr, block.indices, block.data[:0] if self.unit else block.data))
        self.append(row_ids(block, r), y, indptr, indices, data)

    def append(self, rows, y, indptr, indices, data) -> None:
        if self.failed or len(rows) == 0:
            return
        if self.dtypes["y"] is None:
            self.dtypes["y"] = np.asarray(y).dtype
        nnz = int(indptr[-1] - indptr[0])
        parts = {"rows": np.asarray(rows, np.int64), "lens": np.diff(indptr).astype(np.int32),
                 "y": np.asarray(y, self.dtypes["y"]),
                 "indices": np.asarray(indices[indptr[0]:indptr[-1]], self.dtypes["indices"]),
                 "data": np.asarray(data[indptr[0]:indptr[-1]], self.dtypes["data"])}
        nbytes = sum(parts[p].nbytes for p in self.parts)
        if self.nbytes + nbytes > self.limit:
            self.abandon()
            return
        try:
            self._write_parts(parts)
        except OSError as exc:          # e.g. the scratch disk is full: no slab this time
            self.error = exc
            self.abandon()
            return
        last = self.bounds[-1]
        if last[1] - last[0] + len(rows) > self.block_rows and last[1] > last[0]:
            self.bounds.append([last[1], last[1], last[3], last[3]])
            last = self.bounds[-1]
        last[1] += len(rows)
        last[3] += nnz
        self.n_rows += len(rows)
        self.nbytes += nbytes

    def _write_parts(self, parts: dict) -> None:
        for p in self.parts:
            self._files[p].write(np.ascontiguousarray(parts[p]).data)       # no bytes copy

    def abandon(self) -> None:
        self.failed = True
        try:
            self._close()
        except OSError:                 # flushing to a full disk: removed below anyway
            pass
        for path in self.paths.values():
            _remove(path)

    def finish(self):
        """The slab written, or None if the writer gave up or wrote no row."""
        if self.failed:
            return None
        try:
            self._close()               # flushes the last buffered writes
        except OSError as exc:          # a full scratch disk: no slab this time
            self.error = exc
            self.abandon()
            return None
        if self.n_rows == 0:
            self.abandon()
            return None
        return DiskRows(self.paths, self.dtypes, self.unit, np.array(self.bounds, np.int64))

    def _close(self):
        error = None
        for f in self._files.values():
            if not f.closed:
                try:
                    f.close()
                except OSError as exc:  # every file closed, the first error raised
                    error = error or exc
        if error is not None:
            raise error


class DiskRows:
    """A written disk slab: its blocks (read in any thread), its layout, its deletion.

    Attributes
    ----------
    bounds : ndarray of shape (n_blocks, 4)
        Per block: first and last+1 slab row, first and last+1 non-zero.
    block_rows : ndarray of shape (n_blocks,)
        Kept rows per block (blocks with none are not read).
    block_bytes : ndarray of shape (n_blocks,)
        CSR bytes of those rows.
    bytes_read : int
    """

    def __init__(self, paths: dict, dtypes: dict, unit: bool, bounds: np.ndarray):
        self.paths, self.dtypes, self.unit = paths, dtypes, unit
        self.bounds = bounds
        self.block_rows = (bounds[:, 1] - bounds[:, 0]).astype(np.int64)
        self.block_bytes = np.zeros(len(bounds), dtype=np.int64)
        self.bytes_read = 0

    n_blocks = property(lambda self: len(self.bounds))
    n_rows = property(lambda self: int(self.bounds[-1, 1]))

    @property
    def nbytes(self) -> int:
        """Bytes of its files."""
        return sum(os.path.getsize(p) for p in self.paths.values())

    def _pread(self, part: str, start: int, stop: int) -> np.ndarray:
        dt = self.dtypes[part]
        out = np.empty(max(0, stop - start), dtype=dt)
        buf = memoryview(out).cast("B")
        fd = os.open(self.paths[part], os.O_RDONLY)
        try:
            done = 0
            while done < len(buf):
                got = os.preadv(fd, [buf[done:]], start * dt.itemsize + done)
                if got <= 0:
                    raise OSError(f"{self.paths[part]}: expected {len(buf)} bytes at offset "
                                  f"{start * dt.itemsize}, got {done} (file truncated?)")
                done += got
        finally:
            os.close(fd)
        return out

    def read_block(self, j: int) -> SlabBlock:
        """Block ``j`` (any thread)."""
        r0, r1, p0, p1 = (int(v) for v in self.bounds[j])
        lens = self._pread("lens", r0, r1)
        indptr = np.zeros(r1 - r0 + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        data = np.empty(0, self.dtypes["data"]) if self.unit else self._pread("data", p0, p1)
        blk = SlabBlock(j, r0, indptr, self._pread("indices", p0, p1), data,
                        self._pread("y", r0, r1), ids=self._pread("rows", r0, r1))
        self.bytes_read += blk.nbytes
        return blk

    def layout(self) -> dict:
        """What :func:`_rebuild_disk` needs: row ids and lengths in slab order, block bounds."""
        return {"rows": self._pread("rows", 0, self.n_rows),
                "lens": self._pread("lens", 0, self.n_rows), "bounds": self.bounds.copy(),
                "block_rows": self.block_rows.copy(), "block_bytes": self.block_bytes.copy()}

    def delete(self) -> None:
        for path in self.paths.values():
            _remove(path)


def rows_from_store(sched, ids: np.ndarray, unit: bool):
    """Rows ``ids`` (in that order) read again from the store, outside any sweep (no pass
    counted): ``(y, (indptr, indices, data))``, ``data`` empty for a store of unit values.
    On a dask cluster the workers read their blocks and send these rows."""
    ids = np.asarray(ids, dtype=np.int64)
    if sched.remote:
        pieces = sched._backend.store_rows(ids, unit)
    else:
        pieces = _store_rows(sched, ids, unit)
    if not pieces:
        return np.zeros(0, np.float32), (np.zeros(1, np.int64), np.zeros(0, np.int32),
                                          np.empty(0, sched.store.dtype))
    pos = np.concatenate([p for p, _, _ in pieces])
    back = np.argsort(pos, kind="stable")               # pieces' order → ids order
    lens = np.concatenate([np.diff(X[0]) for _, _, X in pieces])
    starts = np.concatenate([[0], np.cumsum(lens)[:-1]])
    take = np.concatenate([np.arange(s, s + n) for s, n in zip(starts[back], lens[back])]) \
        if len(lens) else np.zeros(0, np.int64)
    indptr = np.zeros(len(ids) + 1, dtype=np.int64)
    np.cumsum(lens[back], out=indptr[1:])
    indices = np.concatenate([X[1] for _, _, X in pieces])[take]
    data = np.empty(0, sched.store.dtype) if unit else \
        np.concatenate([X[2] for _, _, X in pieces])[take]
    return np.concatenate([y for _, y, _ in pieces])[back], (indptr, indices, data)


def _store_rows(sched, ids, unit) -> list:
    """``[(positions in ids, y, X)]``: the rows ``ids`` of each store block holding some."""
    order = np.argsort(ids, kind="stable")
    srt = ids[order]
    pieces = []
    for blk in sched.read_blocks(range(sched.n_blocks)):
        sched.poll_interrupt()
        lo, hi = np.searchsorted(srt, [blk.row_start, blk.row_start + blk.n_rows])
        if lo == hi:
            continue
        pieces.append((order[lo:hi], *block_rows(blk, srt[lo:hi] - blk.row_start, unit)))
    return pieces


def block_rows(blk, rows, unit: bool):
    """``(y, X)`` of the local rows ``rows`` of a store block (``data`` empty when
    ``unit``)."""
    return take_rows(rows, blk.y, (blk.indptr, blk.indices, blk.data[:0] if unit else blk.data))


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
