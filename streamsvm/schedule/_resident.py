"""Resident rows: rows a solver revisits without a pass over the store (DESIGN.md §4).

A solver marks the rows it wants kept by a per-row *key state* (dcd: the active flags; a
row is kept while any of its columns is at least ``threshold``). The scheduler counts the
kept rows of every store block as blocks go by (blocks with none are skipped), and copies
them, when that pays, into

* a **RAM slab** (:class:`RamRows`): one CSR matrix of the kept rows, with local copies of
  the solver's per-row states for its in-memory epochs, once they fit the memory budget;
* a **disk slab** (:class:`DiskRows`): the kept rows uncompressed in scratch files, read
  back in blocks (no decompression, no dropped rows), once they hold at most
  ``disk_fraction`` of the store's bytes but do not fit in RAM.

Rows are collected during a sweep (of the store or of the disk slab): the sweep that
follows :meth:`ResidentRows.plan` copies the kept rows of each block it visits, charging the
bytes to the budget as they come (a RAM collection gives up once over its room). Every
byte is charged to the memory budget (:meth:`PassScheduler.reserve`), every row visited is
counted as a fraction of a pass, and the rows carry their global ids, so per-row state stays
with the scheduler's states: gathered into local copies for the RAM slab, gathered and
scattered block by block for the disk slab. A slab is described by its row ids (and the
disk slab by its block bounds): :meth:`ResidentRows.load_state_dict` writes the same slab
again from the store after a resume. The slabs themselves are in ``_slabs.py``.
"""

from __future__ import annotations

import logging

import numpy as np

from .._scratch import free_bytes, no_room
from ..kernels import kept_rows, take_rows
from ._slabs import DiskRows, DiskWriter, RamCollector, RamRows, SlabBlock, rows_from_store

__all__ = ["ResidentRows"]

logger = logging.getLogger(__name__)


class ResidentRows:
    """Which rows a solver keeps, and where they live (module doc). Create with
    :meth:`PassScheduler.resident_rows`.

    Parameters
    ----------
    sched : PassScheduler
    key : RowState
        A row is kept while ``key`` (any column) is at least ``threshold``.
    states : tuple of RowState
        The solver's states copied locally for the RAM slab (and written back).
    extra_row_bytes : int
        Bytes a RAM-slab row costs besides its CSR entries (its label and id, the local
        copies, the solver's own per-row arrays).
    fixed_bytes : int
        Bytes the solver holds whatever the budget (its model), left out of the RAM room.
    ram, disk : bool
        Allow the RAM slab / the disk slab.
    disk_fraction : float
        A disk slab holds at most this share of the store's CSR bytes.

    Attributes
    ----------
    where : {"store", "disk", "ram"}
        Where the sweeps go: the store (kept rows of each block), the disk slab, the RAM slab.
    block_rows, block_bytes : ndarray of shape (n_blocks,)
        Kept rows of each store block and their CSR bytes (an estimate until a sweep has
        counted them).
    """

    def __init__(self, sched, key, states, *, extra_row_bytes: int, fixed_bytes: int,
                 ram: bool = True, disk: bool = True, disk_fraction: float = 0.5,
                 threshold: int = 1):
        store = sched.store
        self.sched, self.key, self.states = sched, key, tuple(states)
        self.extra_row_bytes, self.fixed_bytes = int(extra_row_bytes), int(fixed_bytes)
        self.ram_enabled, self.disk_enabled = bool(ram), bool(disk)
        self.disk_fraction, self.threshold = float(disk_fraction), threshold
        self.unit = store.binary_values
        self.row_bytes = store.dtype.itemsize + np.dtype(store.meta["index_dtype"]).itemsize
        sizes = np.asarray(sched.block_sizes, dtype=np.int64)
        self.block_rows = sizes.copy()
        self.block_bytes = np.zeros(sched.n_blocks, dtype=np.int64)
        for c, nnz in enumerate(store.chunk_nnz):      # spread each chunk's nnz over its blocks
            blocks = np.flatnonzero(sched.block_chunks == c)
            share = sizes[blocks] / max(1, int(sizes[blocks].sum()))
            self.block_bytes[blocks] = (share * int(nnz) * self.row_bytes).astype(np.int64)
        self.store_bytes = int(self.block_bytes.sum())
        self.where = "store"
        self.ram: RamRows | None = None
        self.disk: DiskRows | None = None
        self.collect_to: str | None = None        # what the next sweep collects into
        self.disk_off = False                     # a disk slab could not be written
        self.disk_need = 0                        # bytes of the disk slab planned
        self.disk_bytes_read = 0
        self.ram_kept = 0                         # rows kept inside the RAM slab
        self.ram_version = 0                      # counts the RAM slabs installed

    # -- sizes and plans ---------------------------------------------------------------
    def kept(self) -> tuple[int, int]:
        """Kept rows and the bytes of their CSR entries (in the disk slab when there)."""
        if self.disk is not None:
            return int(self.disk.block_rows.sum()), int(self.disk.block_bytes.sum())
        return int(self.block_rows.sum()), int(self.block_bytes.sum())

    def _ram_room(self) -> int:
        s = self.sched
        return s.data_budget - s.state_bytes - s.inflight_bytes - self.fixed_bytes

    def ram_room(self) -> int:
        """Bytes a RAM slab may take now (the budget less the states, the blocks in
        flight and the solver's fixed bytes)."""
        return self._ram_room()

    def ram_bytes(self, rows, nnz):
        """What ``rows`` rows with ``nnz`` entries in all (numbers or arrays) take in the RAM
        slab: a solver sizes what it keeps (newton's polish band, cg's sample) by it."""
        return np.asarray(nnz, dtype=np.float64) * self.row_bytes + \
            np.asarray(rows, dtype=np.float64) * self.extra_row_bytes

    def fits_ram(self) -> bool:
        rows, nbytes = self.kept()
        return 0 < nbytes + rows * self.extra_row_bytes <= self._ram_room()

    @property
    def ram_full(self) -> bool:
        """The RAM slab holds every row of the store."""
        return self.ram is not None and self.ram.n_rows == self.sched.n_rows

    def _disk_limit(self) -> int:
        return int(self.disk_fraction * self.store_bytes)

    def plan(self) -> None:
        """After a sweep of the store or the disk slab: should the next one collect the
        kept rows into a RAM slab (they fit) or a new disk slab (they fit ``disk_fraction``
        of the store; in a disk slab, when at most half of its rows are still kept)?"""
        self.collect_to = "ram" if (self.ram_enabled and self.ram is None and
                                    self.fits_ram()) else None
        if self.collect_to or self.disk_off or not (self.ram_enabled and self.disk_enabled):
            return
        rows, nbytes = self.kept()
        if rows == 0:
            return
        # the files also hold a row id, a length and a label per row
        need = nbytes + rows * (8 + 4 + 4)
        if need > self._disk_limit():
            return
        if self.disk is None or 2 * rows <= self.disk.n_rows:
            self.collect_to = "disk"
            self.disk_need = need

    def plan_full_pass(self) -> None:
        """Before a read-only pass over the whole store (an exact check): leave the slabs;
        collect again what stays kept (a new disk slab too when there was one)."""
        self.leave_ram()
        self.plan()
        if self.collect_to is None and self.disk is not None:
            self.collect_to = "disk"
            rows, nbytes = self.kept()
            self.disk_need = nbytes + rows * (8 + 4 + 4)
        self.drop_disk()

    # -- collecting --------------------------------------------------------------------
    def collector(self):
        """What the coming sweep copies the kept rows into, or None."""
        if self.collect_to == "ram":
            return RamCollector(self.sched, self._ram_room(), self.row_bytes,
                                 self.extra_row_bytes, self.unit)
        if self.collect_to == "disk":
            store = self.sched.store
            directory = self.sched.scratch_directory
            free = free_bytes(directory)
            if self.disk_need > free:       # refused before a byte is written
                self._disk_failed(no_room(directory, "the disk slab of resident rows",
                                          self.disk_need, free))
                return None
            try:
                return DiskWriter(self.sched, {"indices": store.meta["index_dtype"],
                                                "data": store.dtype, "y": None},
                                   self.unit, self.sched.block_rows or store.chunk_rows,
                                   self._disk_limit())
            except OSError as exc:
                self._disk_failed(exc)
        return None

    def after_block(self, block, collector, key=None) -> None:
        """Count the kept rows of a block just swept (store or disk slab), and collect
        them (``key``: the block's rows of the key state when the caller holds them)."""
        if key is None:
            key = self.key.values[block.ids] if isinstance(block, SlabBlock) else \
                self.key.view(block)
        keep = np.empty(block.n_rows, dtype=bool)
        rows, nnz = kept_rows(block.indptr, key if key.ndim == 2 else key[:, None],
                              self.threshold, keep)
        if isinstance(block, SlabBlock):
            self.disk.block_rows[block.id] = rows
            self.disk.block_bytes[block.id] = nnz * self.row_bytes
        else:
            self.block_rows[block.id] = rows
            self.block_bytes[block.id] = nnz * self.row_bytes
        if collector is not None:
            collector.add(block, keep, nnz)

    def remote_keep(self, collector) -> dict:
        """What the dask workers need to count the kept rows of their blocks after a pass's
        kernel, and send them up to ``collector``'s room (:meth:`DaskBackend.map_ids`)."""
        return dict(state=self.key.name, threshold=self.threshold, unit=self.unit,
                    limit=None if collector is None else collector.room,
                    row_bytes=self.row_bytes, extra=self.extra_row_bytes)

    def after_remote_block(self, block: int, rows: int, nnz: int, part, collector) -> None:
        """:meth:`after_block` of a block a dask worker swept: its kept ``rows`` and their
        ``nnz`` entries counted there, ``part`` = ``(ids, y, X)`` of those rows when the
        sweep collects them."""
        self.block_rows[block] = rows
        self.block_bytes[block] = nnz * self.row_bytes
        if collector is not None and part is not None:
            ids, y, (indptr, indices, data) = part
            collector.add(SlabBlock(block, 0, indptr, indices, data, y, ids=ids),
                          np.ones(rows, dtype=bool), nnz)

    def finish(self, collector, install: bool = True) -> None:
        """Install what a sweep collected (or drop it: ``install=False``)."""
        self.collect_to = None
        if collector is None:
            return
        if not install:
            collector.abandon()
            return
        if collector.kind == "ram":
            self._enter_ram(collector.collected)
        else:
            self._enter_disk(collector)

    def _enter_ram(self, collected: RamRows | None) -> None:
        if collected is None or collected.n_rows == 0:
            self.sched.reserve(0)
            return
        self._install_ram(collected)

    def load_all(self) -> None:
        """The whole store into the RAM slab at once (it fits): one bulk read, no streamed
        first pass."""
        self.collect_to = None
        blk = self.sched.read_all()
        data = np.empty(0, blk.data.dtype) if self.unit else blk.data
        self._install_ram(RamRows.holding((blk.indptr, blk.indices, data), blk.y,
                                          np.arange(blk.n_rows, dtype=np.int64), self.unit))

    def _install_ram(self, ram: RamRows) -> None:
        ram.gather(self.states)
        self.ram = ram
        self.ram_version += 1
        self.where = "ram"
        self.ram_kept = ram.n_rows
        self.sched.reserve(ram.nbytes + ram.n_rows * self._solver_row_bytes())
        logger.info("active set compacted: %d rows (%.1f MB) now in RAM", ram.n_rows,
                    ram.nbytes / 1e6)

    def _solver_row_bytes(self) -> int:
        """Per-row bytes of the solver's own slab arrays (``extra_row_bytes`` less the row
        pointer, label, id and local state copies held here)."""
        own = 8 + self.ram.y.itemsize + 8 + \
            sum(st.dtype.itemsize * (st.width or 1) for st in self.states)
        return max(0, self.extra_row_bytes - own)

    def _enter_disk(self, writer: DiskWriter) -> None:
        slab = writer.finish()
        if writer.error is not None:
            self._disk_failed(writer.error)
        if slab is None:
            return
        self.drop_disk()
        self.disk = slab
        slab.block_bytes = (slab.bounds[:, 3] - slab.bounds[:, 2]) * self.row_bytes
        self.where = "disk"
        logger.info("active set compacted: %d rows (%.1f MB) copied to scratch disk",
                    slab.n_rows, slab.nbytes / 1e6)

    def _disk_failed(self, exc: OSError) -> None:
        self.disk_off = True
        if self.collect_to == "disk":
            self.collect_to = None
        logger.warning("cannot write the disk slab to the scratch directory (%s); "
                       "continuing with streamed passes (set --scratch-dir to a local disk "
                       "with room for half the decoded store)", exc)

    # -- leaving -----------------------------------------------------------------------
    def leave_ram(self) -> None:
        """Write the RAM slab's local state copies back to the states; sweeps go to the
        store again."""
        if self.ram is None:
            return
        self.ram.write_back(self.states)
        self.ram = None
        self.where = "store"
        self.sched.reserve(0)

    def drop_disk(self) -> None:
        """Delete the disk slab (the per-row state never left the scheduler's states)."""
        if self.disk is not None:
            self.disk.delete()
            self.disk = None
            if self.where == "disk":
                self.where = "store"

    def reset(self) -> None:
        """Every row kept again (after the solver re-activated them all): slabs left."""
        self.leave_ram()
        self.drop_disk()
        self.block_rows[:] = self.sched.block_sizes

    def close(self) -> None:
        self.leave_ram()
        self.drop_disk()

    # -- checkpoints -------------------------------------------------------------------
    def state_dict(self) -> tuple[dict, dict]:
        """Arrays and meta to restore exactly this placement (the slabs by row ids)."""
        arrays = {"block_rows": self.block_rows, "block_bytes": self.block_bytes}
        if self.ram is not None:
            arrays["ram.ids"] = self.ram.ids
            arrays.update({f"ram.local.{k}": v for k, v in self.ram.local.items()})
        if self.disk is not None:
            arrays.update({f"disk.{k}": v for k, v in self.disk.layout().items()})
        meta = {"where": self.where, "collect_to": self.collect_to, "disk_off": self.disk_off,
                "disk_bytes_read": self.disk_bytes_read, "ram_kept": self.ram_kept,
                "disk_y_dtype": None if self.disk is None else str(self.disk.dtypes["y"])}
        return arrays, meta

    def save_into(self, arrays: dict, meta: dict) -> None:
        """Add :meth:`state_dict` to a solver's checkpoint (arrays under ``rows.``, meta
        under ``"rows"``)."""
        rows_arrays, meta["rows"] = self.state_dict()
        arrays.update({f"rows.{k}": v for k, v in rows_arrays.items()})

    def load_from(self, arrays: dict, meta: dict) -> None:
        """Restore what :meth:`save_into` added to a solver's checkpoint."""
        self.load_state_dict({k[5:]: v for k, v in arrays.items() if k.startswith("rows.")},
                             meta["rows"])

    def load_state_dict(self, arrays: dict, meta: dict) -> None:
        """Restore :meth:`state_dict`, writing the slabs again from the store (read outside
        any sweep: no pass counted, later orders unchanged)."""
        self.block_rows[:] = arrays["block_rows"]
        self.block_bytes[:] = arrays["block_bytes"]
        self.collect_to, self.disk_off = meta["collect_to"], bool(meta["disk_off"])
        self.disk_bytes_read = int(meta["disk_bytes_read"])
        if meta["where"] == "ram":
            ids = np.asarray(arrays["ram.ids"], np.int64)
            y, X = rows_from_store(self.sched, ids, self.unit)
            self._install_ram(RamRows.holding(X, y, ids, self.unit))
            for name in self.ram.local:
                self.ram.local[name][...] = arrays[f"ram.local.{name}"]
            self.ram_kept = int(meta["ram_kept"])
        elif meta["where"] == "disk":
            self._rebuild_disk({k: arrays[f"disk.{k}"] for k in
                                ("rows", "lens", "bounds", "block_rows", "block_bytes")},
                               meta["disk_y_dtype"])

    def _rebuild_disk(self, layout: dict, y_dtype) -> None:
        """Write the disk slab described by ``layout`` again from the store: same rows,
        same order, same blocks (each store block's rows written at their slab places)."""
        rows = np.asarray(layout["rows"], np.int64)
        lens = np.asarray(layout["lens"], np.int64)
        store = self.sched.store
        writer = DiskWriter(self.sched, {"indices": store.meta["index_dtype"],
                                          "data": store.dtype, "y": y_dtype}, self.unit, 1,
                             1 << 62)
        writer._close()
        n = len(rows)
        offs = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lens, out=offs[1:])
        order = np.argsort(rows, kind="stable")            # slab positions by global row
        srt = rows[order]
        for p in writer.parts:          # every file at its final size, its blocks reserved
            self.sched.reserve_scratch(writer.paths[p], int(
                offs[-1] if p in ("indices", "data") else n) * writer.dtypes[p].itemsize,
                f"the disk slab of resident rows ({p})")
        files = {p: open(path, "r+b") for p, path in writer.paths.items()}
        try:
            for blk in self.sched.read_blocks(range(self.sched.n_blocks)):
                self.sched.poll_interrupt()
                lo, hi = np.searchsorted(srt, [blk.row_start, blk.row_start + blk.n_rows])
                if lo == hi:
                    continue
                pos = order[lo:hi]
                sel = np.argsort(pos, kind="stable")
                pos, local = pos[sel], (srt[lo:hi] - blk.row_start)[sel]
                # a store block's rows sit in runs of consecutive slab positions
                for run in np.split(np.arange(len(pos)), np.flatnonzero(np.diff(pos) != 1) + 1):
                    p0 = int(pos[run[0]])
                    y, (indptr, indices, data) = take_rows(
                        local[run], blk.y,
                        (blk.indptr, blk.indices, blk.data[:0] if self.unit else blk.data))
                    if not np.array_equal(np.diff(indptr), lens[p0:p0 + len(run)]):
                        raise ValueError("the store's rows do not match the checkpointed slab "
                                         "(row lengths differ)")
                    vals = {"rows": rows[p0:p0 + len(run)], "lens": lens[p0:p0 + len(run)],
                            "y": y, "indices": indices, "data": data}
                    for p in writer.parts:
                        dt = writer.dtypes[p]
                        at = int(offs[p0] if p in ("indices", "data") else p0) * dt.itemsize
                        files[p].seek(at)
                        files[p].write(np.ascontiguousarray(vals[p], dt).data)
        finally:
            for f in files.values():
                f.close()
        slab = DiskRows(writer.paths, writer.dtypes, self.unit,
                        np.asarray(layout["bounds"], np.int64))
        slab.block_rows[:] = layout["block_rows"]
        slab.block_bytes = np.array(layout["block_bytes"], dtype=np.int64)
        self.disk = slab
        self.where = "disk"
