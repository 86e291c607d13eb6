"""dcd's active rows copied, uncompressed, to local scratch files (the "disk slab").

Late in a streamed run most rows are shrunk, yet each streamed pass reads and decompresses
the whole store. When the active rows do not fit the RAM slab but hold at most a fraction
of the store's bytes, a streamed pass (or exact check) also appends them to raw files in
the scheduler's scratch directory; the sweeps that follow read only those files — plain
reads, no decompression, no shrunk rows — in blocks of at most the scheduler's block size.

The slab holds no per-row solver state: the rows' global ids are stored with them, and the
solver gathers and scatters its state by those ids block by block. Entering the slab
copies no state and leaving it only deletes the files. A slab is described by its row ids
and lengths (:meth:`DiskSlab.layout`), from which :func:`rebuild` writes the same files
again from the store (for checkpoints: a resumed run sweeps exactly the same slab).
"""

from __future__ import annotations

import dataclasses
import os

import numpy as np

from ..io._shuffle import _take_rows
from ..io._store import Chunk

__all__ = ["DiskSlab", "DiskSlabWriter", "SlabBlock", "rebuild", "row_ids"]

_PARTS = ("rows", "lens", "y", "indices", "data")


@dataclasses.dataclass(frozen=True, eq=False)
class SlabBlock(Chunk):
    """Rows ``[row_start, row_start + n_rows)`` of a disk slab (``row_start`` counts slab
    rows), read back as CSR with the rows' global ids ``ids``."""
    ids: np.ndarray = None

    @property
    def nbytes(self) -> int:
        return super().nbytes + self.ids.nbytes


class DiskSlabWriter:
    """Appends rows to the files of a new disk slab; gives up (deleting the files) once
    they exceed ``limit`` bytes.

    Parameters
    ----------
    sched : PassScheduler
        Provides the scratch files (removed when it closes, if not before).
    dtypes : dict
        ``{"indices": ..., "data": ..., "y": ...}`` of the store's blocks (``"y"`` may be
        None: the dtype of the first labels appended).
    unit : bool
        Every stored value is 1: no ``data`` file.
    block_rows : int
        Most rows of a slab block.
    limit : int
        Most bytes of the slab's files.
    """

    def __init__(self, sched, dtypes: dict, unit: bool, block_rows: int, limit: int):
        self.dtypes = {"rows": np.dtype(np.int64), "lens": np.dtype(np.int32),
                       "y": None if dtypes["y"] is None else np.dtype(dtypes["y"]),
                       "indices": np.dtype(dtypes["indices"]),
                       "data": np.dtype(dtypes["data"])}
        self.unit = unit
        self.block_rows = int(block_rows)
        self.limit = int(limit)
        self.paths = {p: sched.scratch_file(f"dcd-slab-{p}") for p in self._parts}
        self._files = {p: open(path, "wb") for p, path in self.paths.items()}
        self.n_rows = self.nnz = self.nbytes = 0
        self.bounds = [[0, 0, 0, 0]]          # per block: row start/stop, nnz start/stop
        self.failed = False
        self.error: OSError | None = None     # a write that failed (e.g. disk full)

    @property
    def _parts(self):
        return tuple(p for p in _PARTS if not (self.unit and p == "data"))

    def append(self, rows, y, indptr, indices, data) -> None:
        """Append CSR rows (``rows``: their global ids, ascending or not)."""
        if self.failed or len(rows) == 0:
            return
        if self.dtypes["y"] is None:
            self.dtypes["y"] = np.asarray(y).dtype
        lens = np.diff(indptr).astype(np.int32)
        nnz = int(indptr[-1] - indptr[0])
        parts = {"rows": np.asarray(rows, np.int64), "lens": lens,
                 "y": np.asarray(y, self.dtypes["y"]),
                 "indices": np.asarray(indices[indptr[0]:indptr[-1]], self.dtypes["indices"]),
                 "data": np.asarray(data[indptr[0]:indptr[-1]], self.dtypes["data"])}
        nbytes = sum(parts[p].nbytes for p in self._parts)
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
        self.nnz += nnz
        self.nbytes += nbytes

    def _write_parts(self, parts: dict) -> None:
        for p in self._parts:
            self._files[p].write(np.ascontiguousarray(parts[p]).data)     # no bytes copy

    def add(self, block, act, *state) -> None:
        """Append the rows of a block (store or slab) where ``act`` is True (the solver's
        ``state`` of the rows is not copied: it stays with the solver)."""
        r = np.flatnonzero(act)
        if len(r) == 0 or self.failed:
            return
        y, indptr, indices, data = _take_rows(r, block.y, block.indptr, block.indices,
                                              block.data[:0] if self.unit else block.data)
        self.append(row_ids(block, r), y, indptr, indices, data)

    def abandon(self) -> None:
        """Stop and delete the files."""
        self.failed = True
        self._close()
        for path in self.paths.values():
            _remove(path)

    def finish(self) -> DiskSlab | None:
        """The slab written, or None if the writer gave up or wrote no row."""
        if self.failed:
            return None
        self._close()
        if self.n_rows == 0:
            self.abandon()
            return None
        return DiskSlab(self.paths, self.dtypes, self.unit, np.array(self.bounds, np.int64))

    def _close(self):
        for f in self._files.values():
            if not f.closed:
                f.close()


class DiskSlab:
    """A written disk slab: read its blocks, describe it, delete it.

    Attributes
    ----------
    bounds : ndarray of shape (n_blocks, 4)
        Per block: first and last+1 slab row, first and last+1 non-zero.
    block_active : ndarray of shape (n_blocks,)
        Active rows per block (kept by the solver; blocks with none are not read).
    bytes_read : int
    """

    def __init__(self, paths: dict, dtypes: dict, unit: bool, bounds: np.ndarray):
        self.paths, self.dtypes, self.unit = paths, dtypes, unit
        self.bounds = bounds
        self.block_active = (bounds[:, 1] - bounds[:, 0]).astype(np.int64)
        self.bytes_read = 0

    n_blocks = property(lambda self: len(self.bounds))
    n_rows = property(lambda self: int(self.bounds[-1, 1]))
    nnz = property(lambda self: int(self.bounds[-1, 3]))

    @property
    def nbytes(self) -> int:
        """Bytes of its files."""
        return sum(os.path.getsize(p) for p in self.paths.values())

    def _pread(self, part: str, start: int, stop: int) -> np.ndarray:
        """Entries ``[start, stop)`` of one file, read into a new array."""
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
        """What :func:`rebuild` needs: row ids and lengths in slab order, block bounds."""
        return {"rows": self._pread("rows", 0, self.n_rows),
                "lens": self._pread("lens", 0, self.n_rows), "bounds": self.bounds.copy(),
                "block_active": self.block_active.copy()}

    def delete(self) -> None:
        for path in self.paths.values():
            _remove(path)


def rebuild(sched, blocks, layout: dict, dtypes: dict, unit: bool) -> DiskSlab:
    """Write the slab described by ``layout`` again from the store's ``blocks`` (every
    block, e.g. ``sched.read_blocks(...)``): same rows, same order, same blocks."""
    rows = np.asarray(layout["rows"], np.int64)
    lens = np.asarray(layout["lens"], np.int64)
    writer = DiskSlabWriter(sched, dtypes, unit, 1, 1 << 62)
    writer._close()
    n = len(rows)
    offs = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(lens, out=offs[1:])
    order = np.argsort(rows, kind="stable")            # slab positions by global row
    srt = rows[order]
    files = {p: open(path, "r+b") for p, path in writer.paths.items()}
    try:
        for p in writer._parts:                        # every file at its final size
            files[p].truncate(int(offs[-1] if p in ("indices", "data") else n) *
                              writer.dtypes[p].itemsize)
        for blk in blocks:
            lo, hi = np.searchsorted(srt, [blk.row_start, blk.row_start + blk.n_rows])
            if lo == hi:
                continue
            pos = order[lo:hi]
            sel = np.argsort(pos, kind="stable")
            pos, local = pos[sel], (srt[lo:hi] - blk.row_start)[sel]
            # a store block's rows sit in runs of consecutive slab positions (one run when
            # the slab was collected from a streamed pass)
            for run in np.split(np.arange(len(pos)), np.flatnonzero(np.diff(pos) != 1) + 1):
                p0 = int(pos[run[0]])
                y, indptr, indices, data = _take_rows(
                    local[run], blk.y, blk.indptr, blk.indices,
                    blk.data[:0] if unit else blk.data)
                if not np.array_equal(np.diff(indptr), lens[p0:p0 + len(run)]):
                    raise ValueError("the store's rows do not match the checkpointed slab "
                                     "(row lengths differ)")
                vals = {"rows": rows[p0:p0 + len(run)], "lens": lens[p0:p0 + len(run)],
                        "y": y, "indices": indices, "data": data}
                for p in writer._parts:
                    dt = writer.dtypes[p]
                    at = int(offs[p0] if p in ("indices", "data") else p0) * dt.itemsize
                    files[p].seek(at)
                    files[p].write(np.ascontiguousarray(vals[p], dt).data)
    finally:
        for f in files.values():
            f.close()
    slab = DiskSlab(writer.paths, writer.dtypes, unit, np.asarray(layout["bounds"], np.int64))
    slab.block_active[:] = layout["block_active"]
    return slab


def row_ids(block, r: np.ndarray) -> np.ndarray:
    """Global ids of the local rows ``r`` of a store block or a :class:`SlabBlock`."""
    if isinstance(block, SlabBlock):
        return block.ids[r]
    return block.row_start + r


def _remove(path):
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
