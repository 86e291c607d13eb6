"""``dcd``: dual coordinate descent for L2-regularized linear SVMs, streamed over chunks.

Problem (LIBLINEAR ``-s 3`` / ``-s 1``; spec_003 §1.1–1.3)::

    min_w  P(w) = ½‖w‖² + ½b² + Σ_i C_i ξ(y_i (wᵀx_i + B·b))
    ξ(m) = max(0, 1 − m)     (loss="hinge")      or   max(0, 1 − m)²   (loss="squared_hinge")

with the bias ``b`` a regularized constant feature of value ``B`` (``bias``; 0 disables
it). Dual: ``min_α f(α) = ½‖Σ y_i α_i x̄_i‖² + ½ Σ D_i α_i² − Σ α_i`` subject to
``0 ≤ α_i ≤ U_i`` (hinge: ``U_i = C_i, D_i = 0``; squared hinge: ``U_i = ∞, D_i = 1/(2C_i)``),
``w = Σ y_i α_i x_i``. Multiclass data is solved one-vs-rest, every model updated on each
visit of a row (one read serves all classes).

Method (Hsieh et al. 2008 as LIBLINEAR 1.92 implements it, not the paper's printed
Algorithm 2 — spec_003 §1.9; out of core per spec §3.4, §3.6, §3.8):

* Whole store in RAM: when the store (plus the per-row state) fits the memory budget it
  is read at once (``PassScheduler.read_all``) into the slab below, and every sweep is
  LIBLINEAR's in-memory epochs.
* Streamed passes otherwise: the blocks (chunk slices, several hundred per pass) are
  visited two at a time, from chunks paired at random anew each pass (each chunk's blocks
  in storage order from either end, so each compressed inner chunk is decoded once); the
  rows of the two resident blocks are interleaved at random in the kernel (the shuffle
  buffer, so groupings change every pass). LIBLINEAR's shrinking applies per row with the
  global thresholds of the previous pass; a block whose rows are all shrunk is not read.
  Per row only α and the shrink flags persist (9 bytes for a binary problem): labels and
  ``‖x_i‖²`` come with the rows.
* Active-set compaction: once the active rows fit the memory budget they are copied into a
  RAM slab during the next streamed pass (or exact check), and further sweeps run there
  (LIBLINEAR's in-memory epochs, global random order, as many per kernel call as fit in
  one pass of visits). Before that, once they hold at most ``DISK_FRACTION`` of the store's
  bytes, they are copied uncompressed to scratch files (the disk slab,
  ``solvers/_disk_slab.py``) and the sweeps read only those, two blocks at a time as a
  streamed pass, their state gathered from and scattered to the scheduler's states by row
  id; the disk slab is compacted again when half of its rows are shrunk, and gives way to
  the RAM slab when the active rows fit. Not in spec_003 §3.8 (RAM only): on the 10^7-row
  benchmark store it halves the passes to 1e-3 (``tools/bench.py --suite dcd``).
* Certificate every sweep: the dual objective is exact (from α and w). The primal is an
  estimate: the margins of the active rows recorded at their last visit, 0 loss for rows
  shrunk at α = 0 (they were shrunk with margin > 1), and for rows shrunk at α = C (hinge)
  the loss ``C_i (1 − m_i)``, linear in w, summed exactly through ``zu = Σ C_i y_i x_i``
  (kernels/_dcd.py). An exact read-only pass at the current w runs when LIBLINEAR's own
  test fires (the projected-gradient spread ``PGmax − PGmin ≤ ε``, ε starting at
  LIBLINEAR's 0.1 and divided by 10 each time it fires too early), or when the estimated
  gap of every model is ≤ ``tol`` — then no sooner than about one check's cost of work
  after the previous check (half a pass of visits in a full slab, two passes otherwise;
  doubled after each miss, up to 4×), since the estimate can be optimistic. The solver
  stops only if the exact gap is ≤ ``tol``; otherwise the pass has re-activated exactly
  the shrunk rows that violate their optimality condition (LIBLINEAR re-activates all)
  and, out of core, rebuilt the slab from the rows left active.

Cost: one streamed pass per sweep (fewer rows once shrinking removes rows; blocks with no
active row are skipped), a disk-slab sweep reads the slab's rows (raw), a RAM-slab sweep
reads nothing, the exact check is one full pass. ``passes`` counts rows visited (read from
the store or a slab) / n_rows over all of them.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import numpy as np

from ..exceptions import ConvergenceWarning, InvalidParameterError
from ..kernels._dcd import (dcd_check, dcd_estimate, dcd_slab_epochs, dcd_sweep,
                            dcd_terms_add, row_sq_norms_bias)
from ..io._shuffle import _take_rows
from ..schedule._orders import mix64
from ..schedule._prefetch import read_ahead
from ._base import SolveResult, check_param, class_costs, register
from ._disk_slab import DiskSlab, DiskSlabWriter, rebuild, row_ids

__all__ = ["DCDSolver"]

log = logging.getLogger(__name__)

LOSSES = ("hinge", "squared_hinge")
_STATE_VERSION = 3
#: The active rows go to a disk slab once their bytes are at most this share of the store's.
DISK_FRACTION = 0.5
_DISK_STREAM = 3            # mix64 key of the disk slab's visit orders


@dataclasses.dataclass
class _Slab:
    """Active rows copied to RAM, with their per-row state (local copies)."""
    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    ycls: np.ndarray
    qd: np.ndarray
    rows: np.ndarray          # global row ids
    alpha: np.ndarray
    active: np.ndarray
    margin: np.ndarray

    @property
    def nbytes(self) -> int:
        return sum(getattr(self, f.name).nbytes for f in dataclasses.fields(self))

    def arrays(self, prefix: str = "slab.") -> dict:
        return {prefix + f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_arrays(cls, arrays: dict, prefix: str = "slab."):
        return cls(**{f.name: np.ascontiguousarray(arrays[prefix + f.name])
                      for f in dataclasses.fields(cls)})


class _Collector:
    """Active rows copied out of the visited blocks for a new slab, charged to the memory
    budget as they come (the block cache shrinks to make room); gives up, releasing the
    charge, once they exceed ``room`` bytes."""

    def __init__(self, sched, room: int, row_bytes: int, row_state_bytes: int):
        self.sched, self.room = sched, room
        self.row_bytes, self.row_state_bytes = row_bytes, row_state_bytes
        self.pieces: list | None = []
        self.used = 0

    def add(self, block, act, alpha, active) -> None:
        if self.pieces is None:
            return
        r = np.flatnonzero(act)
        nbytes = int(np.diff(block.indptr)[act].sum()) * self.row_bytes + \
            len(r) * self.row_state_bytes
        if self.used + nbytes > self.room:
            self.pieces = None
            self.sched.reserve(0)
            return
        self.used += nbytes
        self.sched.reserve(self.used)
        # (a disk-slab block of an all-ones store has no values; the slab keeps none then)
        self.pieces.append((_take_rows(r, block.y, block.indptr, block.indices, block.data),
                            row_ids(block, r), alpha[r], active[r]))

    def add_block(self, block, act, alpha, active) -> None:
        self.add(block, act, alpha, active)

    def abandon(self) -> None:
        self.pieces = None
        self.sched.reserve(0)


@register("dcd")
class DCDSolver:
    """Dual coordinate descent with per-chunk shrinking and a RAM slab (see module doc).

    Parameters
    ----------
    C : float, default=1.0
    loss : {"squared_hinge", "hinge"}, default="squared_hinge"
    bias : float, default=1.0
        Value of the constant bias feature (LIBLINEAR ``-B``); 0 for no bias.
    tol : float, default=1e-3
        Stop when the exact relative duality gap of every model is ≤ tol.
    max_passes : float, default=200
        Stop (with a ConvergenceWarning) after this many passes over the data.
    class_weight : dict, "balanced" or None
    shrinking : bool, default=True
    slab : bool, default=True
        Allow active-set compaction into RAM.
    disk_slab : bool, default=True
        When the active rows do not fit the RAM slab but hold at most half of the store's
        bytes, copy them uncompressed to files in the scheduler's scratch directory and
        sweep those instead of the store (see ``solvers/_disk_slab.py``).
    """

    def __init__(self, *, C=1.0, loss="squared_hinge", bias=1.0, tol=1e-3, max_passes=200,
                 class_weight=None, shrinking=True, slab=True, disk_slab=True):
        owner = "DCDSolver"
        self.C = float(check_param(owner, "C", C, "float", 0.0, low_open=True))
        self.loss = check_param(owner, "loss", loss, "str", choices=LOSSES)
        self.bias = float(check_param(owner, "bias", bias, "float", 0.0))
        self.tol = float(check_param(owner, "tol", tol, "float", 0.0, low_open=True))
        self.max_passes = float(check_param(owner, "max_passes", max_passes, "float", 0.0,
                                            low_open=True))
        self.class_weight = class_weight
        self.shrinking = bool(check_param(owner, "shrinking", shrinking, "bool",
                                          choices=(True, False)))
        self.slab_enabled = bool(check_param(owner, "slab", slab, "bool", choices=(True, False)))
        self.disk_enabled = bool(check_param(owner, "disk_slab", disk_slab, "bool",
                                             choices=(True, False)))

    def params(self) -> dict:
        return {"solver": "dcd", "C": self.C, "loss": self.loss, "bias": self.bias,
                "tol": self.tol, "max_passes": self.max_passes,
                "class_weight": self.class_weight, "shrinking": self.shrinking,
                "slab": self.slab_enabled, "disk_slab": self.disk_enabled}

    # ------------------------------------------------------------------------------
    def solve(self, sched, state=None, callback=None, checkpoint=None, checkpoint_every=0,
              should_stop=None) -> SolveResult:
        """Train on the scheduler's store.

        Parameters
        ----------
        sched : PassScheduler
        state : tuple (arrays, meta), optional
            A checkpoint from a previous run (``CheckpointManager.load_latest``).
        callback : callable, optional
            Called with a dict after every sweep (the history entry).
        checkpoint : callable, optional
            ``checkpoint(arrays, meta)`` saves a snapshot (e.g. ``CheckpointManager.save``).
        checkpoint_every : float
            Save each time this many more passes over the data are done (0: only when
            stopping or interrupted).
        should_stop : callable, optional
            Polled after every sweep; when it returns True the solver saves a checkpoint
            and raises KeyboardInterrupt.
        """
        d, k = sched.n_features, 1 if sched.store.task == "binary" else len(sched.store.classes)
        sched.check_budget("dcd", {"the model and its shrinking sums": 2 * 8 * k * d})
        run = _Run(self, sched)
        if state is not None:
            run.restore(*state)
        t0 = time.perf_counter()
        while not run.done:           # a checkpoint of a finished run resumes as finished
            entry = run.sweep()
            entry["seconds"] = time.perf_counter() - t0
            if callback is not None:
                callback(entry)
            if run.done:
                break
            due = checkpoint_every and sched.passes // checkpoint_every > run.saved_at
            if checkpoint is not None and due:
                run.saved_at = sched.passes // checkpoint_every
                checkpoint(*run.snapshot())
            if should_stop is not None and should_stop():
                if checkpoint is not None:
                    checkpoint(*run.snapshot())
                raise KeyboardInterrupt("training interrupted; checkpoint saved")
        if checkpoint is not None:
            checkpoint(*run.snapshot())
        result = run.result()       # sets run.gap to the last (estimated) gap if not converged
        if not run.converged:
            import warnings
            warnings.warn(f"dcd stopped after {sched.passes:.1f} passes (max_passes="
                          f"{self.max_passes:g}) with relative duality gap {run.gap:.3g} > tol="
                          f"{self.tol:g}; increase max_passes or tol.", ConvergenceWarning,
                          stacklevel=2)
        return result


class _Run:
    """The state of one dcd run on one scheduler (resumable through snapshot/restore)."""

    def __init__(self, solver: DCDSolver, sched):
        self.s, self.sched = solver, sched
        store = sched.store
        self.task = store.task
        classes = store.classes
        self.k = 1 if self.task == "binary" else len(classes)
        self.pos = np.array([1], np.int32) if self.task == "binary" else \
            np.arange(self.k, dtype=np.int32)
        self.Cp, self.Cn = class_costs("DCDSolver", solver.C, solver.class_weight, self.task,
                                       classes, store.label_counts)
        self.l2 = solver.loss == "squared_hinge"
        self.B = solver.bias
        d = store.n_features
        self.W = np.zeros((self.k, d))
        self.wb = np.zeros(self.k)
        k = self.k
        # every stored value is 1: the kernels read only the indices, the slab keeps no data
        self.unit = bool(getattr(store, "binary_values", False))
        # rows shrunk at the upper bound: Σ C_i y_i x_i and [Σ C_i y_i B, Σ C_i] (kernel doc)
        self.zu = np.zeros((k, d))
        self.zs = np.zeros((k, 2))
        self._cert = np.zeros((k, 2))
        self._cert_fresh = False
        # 9k bytes per row: labels and ‖x_i‖² come with the rows, and the certificate terms
        # are summed while the rows are visited, so only α and the shrink flags persist.
        self.alpha = sched.state("dcd.alpha", np.float64, width=k)
        self.active = sched.state("dcd.active", np.uint8, width=k, fill=1)
        # certificate sums over the active pairs [Σ C_i ξ_i, Σ α_i, ½ Σ D_i α_i²] (NaN: unknown)
        self._terms = np.full((k, 3), np.nan)
        nb = sched.n_blocks
        self.block_active = np.asarray(sched.block_sizes, dtype=np.int64).copy()
        self._work = np.empty(0, dtype=np.int64)        # visit order of a block pair
        self._counts = np.zeros((2, 2), dtype=np.int64)
        self.row_bytes = store.dtype.itemsize + np.dtype(store.meta["index_dtype"]).itemsize
        self.block_active_bytes = np.zeros(nb, dtype=np.int64)
        sizes = np.asarray(sched.block_sizes, dtype=np.int64)
        for c, nnz in enumerate(store.chunk_nnz):      # spread each chunk's nnz over its blocks
            blocks = np.flatnonzero(sched.block_chunks == c)
            share = sizes[blocks] / max(1, int(sizes[blocks].sum()))
            self.block_active_bytes[blocks] = (share * int(nnz) * self.row_bytes).astype(np.int64)
        self.pgmax_old = np.full(k, np.inf)
        self.pgmin_old = np.full(k, -np.inf)
        self.eps_pg = 0.1          # LIBLINEAR's default dual stopping tolerance
        self.mode = "stream"
        self.slab: _Slab | None = None
        self.disk: DiskSlab | None = None
        self.build_disk = False
        self.disk_off = False                   # a disk slab could not be written
        self._disk_bytes = 0                    # bytes read from disk slabs, all sweeps
        self._kernel_s = 0.0                    # seconds inside the numba kernels, this sweep
        self._wait_s = 0.0                      # seconds waiting for blocks, this sweep
        self._store_bytes = int(self.block_active_bytes.sum())     # CSR bytes of every row
        self._slab_active = 0
        self._slab_margins = False
        # Exact checks asked for by the estimated gap (≤ gap_trigger) wait until rows_visited
        # reaches _check_due, so that they cost at most about as much as the work between
        # them (a check reads every row once: half a slab epoch's work when the slab holds
        # every row, a streamed pass plus the slab rebuild otherwise); each check the
        # estimate asked for in vain doubles the spacing (up to 4x).
        self.gap_trigger = solver.tol
        self._check_due = 0
        self._check_misses = 0
        # When the whole store fits the budget, the first pass already builds the slab.
        self.build_slab = solver.slab_enabled and self._slab_fits()
        self.n_iter = 0
        self.saved_at = 0.0
        self.history: list[dict] = []
        self.done = self.converged = False
        self.gap = np.inf
        self.primal = self.dual = np.nan

    # -- one sweep ------------------------------------------------------------------
    def sweep(self) -> dict:
        sched = self.sched
        pg = np.zeros((self.k, 3))
        pg[:, 0], pg[:, 1] = -np.inf, np.inf
        t0 = time.perf_counter()
        bytes0 = sched.bytes_read
        self._kernel_s = self._wait_s = 0.0
        if self.mode == "stream" and self.build_slab and self.n_iter == 0:
            self._load_slab()                           # the whole store fits: read it once
        self._cert_fresh = False
        disk0 = self._disk_bytes
        mode = self.mode                                # the kind of this sweep
        if mode == "slab":
            epochs, spread = self._slab_epochs(pg)      # thresholds updated in the kernel
        else:
            if mode == "disk":
                self._disk_sweep(pg)
            else:
                self._stream_sweep(pg)
            epochs, spread = 1, float(np.max(pg[:, 0] - pg[:, 1]))
            self._update_thresholds(pg)
        self.n_iter += epochs
        primal, dual = self._objectives()
        gap = self._rel_gap(primal, dual)
        entry = {"iter": self.n_iter, "mode": mode, "passes": sched.passes,
                 "primal": float(primal.sum()), "dual": float(dual.sum()), "gap": float(gap.max()),
                 "active": int(self._active_rows()), "pg_spread": spread, "exact": False}
        est = float(gap.max())
        by_gap = est <= self.gap_trigger and sched.rows_visited >= self._check_due
        by_pg = spread <= self.eps_pg
        if by_gap or by_pg:
            entry = self._exact_check(entry)
            if not self.done and by_pg:
                # LIBLINEAR's test (PG spread ≤ eps) fired but the exact gap is too large:
                # tighten it so the next exact check comes when it can succeed.
                self.eps_pg = max(self.eps_pg * 0.1, 1e-12)
            if not self.done and by_gap:
                # the estimate was optimistic: space the next estimate-driven checks wider
                self._check_misses = min(self._check_misses + 1, 2)
        elif self.mode in ("stream", "disk"):
            self._plan_compaction()
        if not self.done and sched.passes >= self.s.max_passes:
            if not entry["exact"]:      # what is reported is an exact certificate, never
                entry = self._exact_check(entry)    # an estimate from stale margins
            self.done = True
        entry["sweep_seconds"] = time.perf_counter() - t0
        entry["kernel_seconds"] = self._kernel_s
        entry["wait_seconds"] = self._wait_s
        entry["mb_read"] = (sched.bytes_read - bytes0 + self._disk_bytes - disk0) / 1e6
        self.history.append(entry)
        log.info("iter %3d %-6s passes %7.2f primal %.6e dual %.6e gap %.2e active %d%s "
                 "%.2fs (kernels %.2fs, waiting for data %.2fs) %.1fMB", entry["iter"],
                 entry["mode"], entry["passes"], entry["primal"], entry["dual"], entry["gap"],
                 entry["active"], " (exact)" if entry["exact"] else "", entry["sweep_seconds"],
                 entry["kernel_seconds"], entry["wait_seconds"], entry["mb_read"])
        return entry

    def _stream_sweep(self, pg):
        sched = self.sched
        self._terms[:] = 0.0        # summed over the visited rows (unvisited ones are shrunk)
        mask = self.block_active > 0
        if not mask.any():      # everything shrunk: un-shrink (LIBLINEAR does the same)
            self._unshrink()
            mask = self.block_active > 0
        ids = self._block_order(mask, sched.rng(self.n_iter, 0))
        pieces = self._new_collector()
        pending = None
        blocks = sched.blocks(ids)
        try:
            for block in self._timed(blocks):
                if pending is None:
                    pending = block
                    continue
                self._sweep_group((pending, block), pg, pieces)
                pending = None
            if pending is not None:
                self._sweep_group((pending,), pg, pieces)
        finally:
            blocks.close()
        self._enter_compacted(pieces)

    def _kernel(self, kernel, *args):
        """Call a numba kernel, adding its wall time to ``_kernel_s``."""
        t0 = time.perf_counter()
        kernel(*args)
        self._kernel_s += time.perf_counter() - t0

    def _timed(self, items):
        """Iterate ``items``, adding the time spent waiting for each to ``_wait_s``."""
        it = iter(items)
        while True:
            t0 = time.perf_counter()
            try:
                item = next(it)
            except StopIteration:
                return
            finally:
                self._wait_s += time.perf_counter() - t0
            yield item

    def _block_order(self, mask, rng):
        """Active blocks in a random order that reads each chunk once per pass.

        Chunks are taken in random pairs (A, B) — new pairs every pass — and their blocks
        alternate ``a0 b0 a1 b1 ...``; consecutive blocks share the shuffle buffer, so every
        group mixes rows of two chunks and no grouping is fixed (spec_003 §3.4: fixed
        contiguous groupings cost 3-8x more epochs). Within a chunk the blocks keep their
        storage order, forwards or backwards at random: neighbouring blocks share the
        store's compressed inner chunks at their boundary, so each inner chunk is decoded
        once (in a random order of a chunk's blocks, a boundary inner chunk is decoded
        again for each of its blocks; a random starting block would add one per chunk).
        """
        ids = np.flatnonzero(mask)
        if len(ids) == 0:
            return ids
        chunk = self.sched.block_chunks[ids]
        n_chunks = int(chunk.max()) + 1
        pair_of = np.empty(n_chunks, dtype=np.int64)
        perm = rng.permutation(n_chunks)
        pair_of[perm] = np.arange(n_chunks) // 2          # chunk → its pair this pass
        side = np.empty(n_chunks, dtype=np.int64)
        side[perm] = np.arange(n_chunks) % 2              # first or second of the pair
        counts = np.bincount(chunk, minlength=n_chunks)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.arange(len(ids)) - starts[chunk]        # ids ascend: storage order
        backward = (rng.random(n_chunks) < 0.5)[chunk]
        within = np.where(backward, counts[chunk] - 1 - rank, rank)
        return ids[np.lexsort((side[chunk], within, pair_of[chunk]))]

    def _views(self, block):
        return self.alpha.view(block), self.active.view(block)

    def _sweep_group(self, group, pg, pieces):
        """One kernel call over the rows of one or two blocks, interleaved at random (the
        visit order is drawn in the kernel from :meth:`PassScheduler.block_seed`)."""
        views = [self._views(b) for b in group]
        self._pair_sweep(group, views, self.sched.block_seed(group[0]), pg)
        for j, b in enumerate(group):
            self.block_active[b.id] = self._counts[j, 0]
            self.block_active_bytes[b.id] = self._counts[j, 1] * self.row_bytes
            if pieces is not None:
                pieces.add(b, views[j][1].any(axis=1), *views[j])

    def _pair_sweep(self, group, views, seed: int, pg) -> None:
        """:func:`dcd_sweep` over one or two blocks with their ``(alpha, active)`` views;
        per-slot active rows and non-zeros are left in ``self._counts``."""
        n_slots = len(group)
        if n_slots == 1:
            group, views = group * 2, views * 2
        rows = group[0].n_rows + (group[1].n_rows if n_slots == 2 else 0)
        if len(self._work) < rows:
            self._work = np.empty(rows, dtype=np.int64)
        self._kernel(dcd_sweep, tuple(b.indptr for b in group), tuple(b.indices for b in group),
                     tuple(b.data for b in group), self.unit, tuple(b.y for b in group),
                     n_slots, np.array([seed], dtype=np.uint64), self._work, self.pos, self.Cp,
                     self.Cn, self.l2, self.B, self.W, self.wb, tuple(v[0] for v in views),
                     tuple(v[1] for v in views), self.pgmax_old, self.pgmin_old, pg, self.zu,
                     self.zs, self._terms, self._counts)

    # -- slab -----------------------------------------------------------------------
    @property
    def _row_state_bytes(self) -> int:
        """Slab bytes per row besides its CSR entries (_Slab: indptr, ycls, qd, rows,
        alpha, active, margin)."""
        return 8 + 4 + 4 + 8 + 13 * self.k

    def _active_csr(self) -> tuple[int, int]:
        """Active rows and the bytes of their CSR entries (in the disk slab when there)."""
        if self.disk is not None:
            return int(self.disk.block_active.sum()), int(self.disk_active_bytes.sum())
        return int(self.block_active.sum()), int(self.block_active_bytes.sum())

    def _slab_state_bytes(self) -> int:
        rows, nbytes = self._active_csr()
        return nbytes + rows * self._row_state_bytes

    def _slab_budget(self) -> int:
        sched = self.sched
        return sched.data_budget - sched.state_bytes - sched.inflight_bytes - self.W.nbytes \
            - self.zu.nbytes

    def _slab_fits(self) -> bool:
        return 0 < self._slab_state_bytes() <= self._slab_budget()

    def _collector(self) -> _Collector:
        return _Collector(self.sched, self._slab_budget(), self.row_bytes, self._row_state_bytes)

    def _new_collector(self):
        """What the coming pass copies the active rows into: a RAM slab (they fit), a new
        disk slab (worth it), or nothing."""
        if self.build_slab:
            return self._collector()
        if self.build_disk:
            store = self.sched.store
            try:
                return DiskSlabWriter(self.sched, {"indices": store.meta["index_dtype"],
                                                   "data": store.dtype, "y": None},
                                      self.unit, self.sched.block_rows or store.chunk_rows,
                                      self._disk_limit())
            except OSError as exc:
                self._disk_failed(exc)
        return None

    def _disk_failed(self, exc: OSError) -> None:
        """The scratch directory cannot take a disk slab: go on without one."""
        self.disk_off = True
        self.build_disk = False
        log.warning("dcd: cannot write the disk slab to the scratch directory (%s); "
                    "continuing with streamed passes (set --scratch-dir to a local disk "
                    "with room for half the decoded store)", exc)

    def _enter_compacted(self, pieces) -> None:
        if isinstance(pieces, _Collector):
            self._enter_slab(pieces.pieces)
        elif isinstance(pieces, DiskSlabWriter):
            self._enter_disk(pieces)

    def _disk_limit(self) -> int:
        """Most bytes of a disk slab: DISK_FRACTION of the store's CSR bytes."""
        return int(DISK_FRACTION * self._store_bytes)

    def _plan_compaction(self) -> None:
        """After a streamed or disk sweep: should the next one collect the active rows into
        a RAM slab (they fit) or a new disk slab (they fit DISK_FRACTION of the store; in a
        disk slab, when at most half of its rows are still active)?"""
        self.build_slab = self.s.slab_enabled and self.slab is None and self._slab_fits()
        self.build_disk = False
        if self.build_slab or self.disk_off or not (self.s.slab_enabled and self.s.disk_enabled):
            return
        rows, nbytes = self._active_csr()
        if rows == 0:
            return
        # the files also hold a row id, a length and a label per row
        size = nbytes + rows * (8 + 4 + 4)
        if size > self._disk_limit():
            return
        self.build_disk = self.disk is None or 2 * rows <= self.disk.n_rows

    def _enter_disk(self, writer: DiskSlabWriter) -> None:
        self.build_disk = False
        slab = writer.finish()
        if writer.error is not None:
            self._disk_failed(writer.error)
        if slab is None:
            return
        self._drop_disk()
        self.disk = slab
        self.disk_active_bytes = (slab.bounds[:, 3] - slab.bounds[:, 2]) * self.row_bytes
        self.mode = "disk"
        log.info("active set compacted: %d rows (%.1f MB) copied to scratch disk",
                 slab.n_rows, slab.nbytes / 1e6)

    def _drop_disk(self) -> None:
        """Delete the disk slab (the per-row state never left the scheduler's states)."""
        if self.disk is not None:
            self.disk.delete()
            self.disk = None
            if self.mode == "disk":
                self.mode = "stream"

    def _disk_sweep(self, pg) -> None:
        """One sweep over the disk slab: its blocks with active rows in a new random order,
        two at a time with their rows interleaved (as a streamed pass), the rows' state
        gathered from and scattered back to the scheduler's states by row id."""
        sl, sched = self.disk, self.sched
        ids = np.flatnonzero(sl.block_active > 0)
        if len(ids) == 0:       # everything shrunk: un-shrink (LIBLINEAR does the same)
            self._unshrink()
            self._stream_sweep(pg)
            return
        self._terms[:] = 0.0
        ids = ids[sched.rng(self.n_iter, _DISK_STREAM).permutation(len(ids))]
        pieces = self._new_collector()
        read0 = sl.bytes_read
        pending, position, rows = None, 0, 0
        blocks = read_ahead(ids.tolist(), sl.read_block, sched.prefetch,
                            threads=sched.readers)
        try:
            for _, block, _ in self._timed(blocks):
                rows += block.n_rows
                if pending is None:
                    pending = block
                    continue
                self._disk_group((pending, block), pg, pieces, position)
                pending, position = None, position + 1
            if pending is not None:
                self._disk_group((pending,), pg, pieces, position)
        finally:
            blocks.close()
        sched.count_rows(rows)
        self._disk_bytes += sl.bytes_read - read0
        self._enter_compacted(pieces)

    def _disk_group(self, group, pg, pieces, position) -> None:
        alpha, active = self.alpha.values, self.active.values
        views = [(alpha[b.ids], active[b.ids]) for b in group]
        self._pair_sweep(group, views, mix64(self.sched.seed, _DISK_STREAM, self.n_iter,
                                             position), pg)
        for j, b in enumerate(group):
            alpha[b.ids] = views[j][0]
            active[b.ids] = views[j][1]
            self.disk.block_active[b.id] = self._counts[j, 0]
            self.disk_active_bytes[b.id] = self._counts[j, 1] * self.row_bytes
            if pieces is not None:
                pieces.add(b, views[j][1].any(axis=1), *views[j])

    def _enter_slab(self, pieces):
        self.build_slab = False
        if not pieces:
            self.sched.reserve(0)
            return
        csr = [p[0] for p in pieces]
        lens = np.concatenate([np.diff(c[1]) for c in csr])
        indptr = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=indptr[1:])
        cat = lambda j: np.ascontiguousarray(np.concatenate([p[j] for p in pieces]))  # noqa: E731
        data = np.empty(0, self.sched.store.dtype) if self.unit else \
            np.concatenate([c[3] for c in csr])
        qd = np.empty(len(lens), np.float32)
        row_sq_norms_bias(indptr, data, self.unit, self.B, qd)
        alpha = cat(2)
        self._set_slab(_Slab(indptr, np.concatenate([c[2] for c in csr]), data,
                             np.concatenate([c[0] for c in csr]), qd, cat(1), alpha, cat(3),
                             np.zeros(alpha.shape, np.float32)))

    def _load_slab(self):
        """Read the whole store into the slab at once (it fits the budget): no streamed
        first pass, the first sweep is already an in-memory epoch."""
        self.build_slab = False
        blk = self.sched.read_all()
        n = blk.n_rows
        ycls = blk.y
        qd = np.empty(n, np.float32)
        row_sq_norms_bias(blk.indptr, blk.data, self.unit, self.B, qd)
        data = np.empty(0, blk.data.dtype) if self.unit else blk.data
        k = self.k
        self._set_slab(_Slab(blk.indptr, blk.indices, data, ycls, qd, np.arange(n, dtype=np.int64),
                             np.zeros((n, k)), np.ones((n, k), np.uint8),
                             np.zeros((n, k), np.float32)))

    def _set_slab(self, slab):
        self.slab = slab
        self._slab_margins = False      # recorded by the first slab epoch
        self.mode = "slab"
        self.sched.reserve(slab.nbytes)
        self._slab_active = len(slab.rows)
        log.info("active set compacted: %d rows (%.1f MB) now in RAM", len(slab.rows),
                 slab.nbytes / 1e6)

    @property
    def _slab_full(self) -> bool:
        return self.slab is not None and len(self.slab.rows) == self.sched.n_rows

    def _slab_epochs(self, pg):
        """In-memory epochs on the slab until half a pass of visits (one kernel call)."""
        sl = self.slab
        info = np.zeros(5)
        rng_state = self.sched.rng(self.n_iter, 1).integers(2**63, size=1, dtype=np.uint64)
        self._kernel(dcd_slab_epochs, sl.indptr, sl.indices, sl.data, self.unit, sl.ycls,
                     self.pos, self.Cp, self.Cn, self.l2, self.B, self.s.shrinking, rng_state,
                     max(1, self.sched.n_rows), self.eps_pg, self.gap_trigger,
                     self._check_due - self.sched.rows_visited,
                     self.W, self.wb,
                     sl.alpha, sl.active, sl.margin, sl.qd, self.pgmax_old, self.pgmin_old,
                     np.empty(len(sl.rows), np.int64), pg, self.zu, self.zs,
                     np.empty((self.k, 3)), self._cert,
                     info)
        self.sched.count_rows(int(info[1]))
        self._slab_active = int(info[4])
        self._cert_fresh = True
        self._slab_margins = True
        if info[3]:            # everything shrunk: un-shrink (LIBLINEAR does the same)
            self._unshrink()
        return max(1, int(info[0])), float(info[2]) if info[0] else -np.inf

    def _leave_slab(self):
        """Write the slab's per-row state back to the scheduler's states."""
        sl = self.slab
        if sl is None:
            return
        if self._slab_margins:          # else _terms still holds the sweep's sums
            self._terms[:] = 0.0        # the rows outside the slab are all shrunk
            dcd_terms_add(sl.ycls, sl.alpha, sl.active, sl.margin, self.pos, self.Cp,
                          self.Cn, self.l2, self._terms)
        for st, arr in ((self.alpha, sl.alpha), (self.active, sl.active)):
            st.values[sl.rows] = arr
        self.slab = None
        self.mode = "stream"
        self.sched.reserve(0)

    # -- certificate ----------------------------------------------------------------
    def _objectives(self):
        """Per-model primal estimate and exact dual objective.

        The primal takes the margins recorded at the last visit of the active rows, and
        the shrunk rows through ``zu``/``zs`` (kernels/_dcd.py module doc). In the slab the
        kernel computed both after its last epoch; when streaming, one kernel pass over
        the in-RAM state (no copies).
        """
        if not self._cert_fresh:
            sl = self.slab
            if sl is None or not self._slab_margins:
                t = self._terms                 # summed by the last sweep or check
            else:               # the rows outside the slab are all shrunk
                t = np.zeros((self.k, 3))
                dcd_terms_add(sl.ycls, sl.alpha, sl.active, sl.margin, self.pos, self.Cp,
                              self.Cn, self.l2, t)
            dcd_estimate(self.W, self.wb, self.zu, self.zs, t, self._cert)
            self._cert_fresh = True
        return self._cert[:, 0].copy(), self._cert[:, 1].copy()

    @staticmethod
    def _rel_gap(primal, dual):
        return (primal - dual) / np.maximum(np.abs(primal), 1e-300)

    def _update_thresholds(self, pg):
        """LIBLINEAR's threshold update after a sweep (spec §1.5)."""
        self.pgmax_old = np.where(pg[:, 0] > 0, pg[:, 0], np.inf)
        self.pgmin_old = np.where(pg[:, 1] < 0, pg[:, 1], -np.inf)
        if not self.s.shrinking:
            self.pgmax_old[:] = np.inf
            self.pgmin_old[:] = -np.inf

    def _exact_check(self, entry):
        """Exact margins, primal and PG spread at the current w; stop, or re-activate the
        shrunk rows that violate their optimality condition and go on.

        When the RAM slab holds every row the pass runs there (no I/O) and the solver
        stays in the slab; otherwise it streams the store (leaving a partial slab, whose
        outside rows may come back).
        """
        k, sched = self.k, self.sched
        _, dual = self._objectives()            # exact; computed before active changes
        self.zu[:] = 0.0
        self.zs[:] = 0.0
        self._terms[:] = 0.0
        if self._slab_full:
            sl = self.slab
            stats = np.empty((k, 4))
            self._kernel(dcd_check, sl.indptr, sl.indices, sl.data, self.unit, sl.ycls,
                         self.pos, self.Cp, self.Cn, self.l2, self.B, self.W, self.wb, sl.alpha,
                         sl.active, self.zu, self.zs, self._terms, stats)
            sched.count_rows(sched.n_rows)
            self._slab_active = int(sl.active.any(axis=1).sum())
        else:
            self._leave_slab()
            # the same pass collects the rows left active into a new slab while they fit
            # (only when the rows active before the check already fit: copying rows that
            # are then dropped would leave the heap fragmented for the rest of the run), or
            # into a new disk slab when that is worth it
            self._plan_compaction()
            self.build_disk = self.build_disk or (self.disk is not None and
                                                  not self.build_slab)
            self._drop_disk()
            self._terms[:] = 0.0
            pieces = self._new_collector()

            def check(block):       # runs in this thread, in block order: zu sums are fixed
                alpha, active = self._views(block)
                out = np.empty((k, 4))
                self._kernel(dcd_check, block.indptr, block.indices, block.data, self.unit,
                             block.y, self.pos, self.Cp, self.Cn, self.l2, self.B, self.W,
                             self.wb, alpha, active, self.zu, self.zs, self._terms, out)
                act = active.any(axis=1)
                nnz = int(np.diff(block.indptr)[act].sum())
                self.block_active[block.id] = int(act.sum())
                self.block_active_bytes[block.id] = nnz * self.row_bytes
                if pieces is not None:
                    pieces.add(block, act, alpha, active)
                return out

            def combine(acc, p):
                return np.stack([np.maximum(acc[:, 0], p[:, 0]), np.minimum(acc[:, 1], p[:, 1]),
                                 acc[:, 2] + p[:, 2], acc[:, 3] + p[:, 3]], axis=1)

            stats = sched.map_reduce(check, combine=combine)
            reg = 0.5 * (np.einsum("kd,kd->k", self.W, self.W) + self.wb ** 2)
            if pieces is not None and self._rel_gap(reg + stats[:, 2], dual).max() > self.s.tol:
                self._enter_compacted(pieces)
            elif pieces is not None:
                pieces.abandon()            # converged: no more sweeps
            self.build_slab = self.build_disk = False
        base = sched.n_rows // 2 if self._slab_full else 2 * sched.n_rows
        self._check_due = sched.rows_visited + base * 2 ** self._check_misses
        reg = 0.5 * (np.einsum("kd,kd->k", self.W, self.W) + self.wb ** 2)
        primal = reg + stats[:, 2]
        self._cert[:, 0], self._cert[:, 1] = primal, dual      # exact at this w
        self._cert_fresh = True
        gap = self._rel_gap(primal, dual)
        entry.update(primal=float(primal.sum()), dual=float(dual.sum()), gap=float(gap.max()),
                     passes=sched.passes, exact=True, active=self._active_rows(),
                     pg_spread=float((stats[:, 0] - stats[:, 1]).max()))
        self.gap, self.primal, self.dual = float(gap.max()), float(primal.sum()), float(dual.sum())
        if gap.max() <= self.s.tol:
            self.done = self.converged = True
        elif self.mode in ("stream", "disk"):
            self._plan_compaction()
        return entry

    def _unshrink(self):
        """Every row active again (inside the slab when it holds every row)."""
        self.zu[:] = 0.0
        self._cert_fresh = False
        self.zs[:] = 0.0
        self.pgmax_old[:] = np.inf
        self.pgmin_old[:] = -np.inf
        if self._slab_full:
            self.slab.active[:] = 1
            self._slab_active = len(self.slab.rows)
            return
        self._leave_slab()
        self._drop_disk()
        self.active.fill(1)
        self.block_active[:] = self.sched.block_sizes
        self._terms[:] = np.nan         # known again after the next sweep

    def _active_rows(self) -> int:
        if self.slab is not None:
            return self._slab_active
        return self._active_csr()[0]

    # -- results and checkpoints -----------------------------------------------------
    def result(self) -> SolveResult:
        if not self.converged:
            primal, dual = self._objectives()
            self.gap = float(self._rel_gap(primal, dual).max())
            self.primal, self.dual = float(primal.sum()), float(dual.sum())
        self._leave_slab()
        self._drop_disk()
        return SolveResult(self.W.copy(), self.wb * self.B, self.n_iter, self.sched.passes,
                           self.converged, self.gap, self.primal, self.dual, list(self.history))

    def snapshot(self):
        arrays = {"W": self.W, "wb": self.wb, "zu": self.zu, "zs": self.zs, "cert": self._cert,
                  "pgmax_old": self.pgmax_old,
                  "pgmin_old": self.pgmin_old, "terms": self._terms,
                  "block_active": self.block_active,
                  "block_active_bytes": self.block_active_bytes}
        for name, st in self.sched.states.items():
            arrays["state." + name] = st.to_array()
        if self.slab is not None:
            arrays.update(self.slab.arrays())
        if self.disk is not None:       # its rows are read again from the store on resume
            arrays.update({"disk." + k: v for k, v in self.disk.layout().items()})
            arrays["disk.active_bytes"] = self.disk_active_bytes
        meta = {"solver": "dcd", "version": _STATE_VERSION, "params": self.s.params(),
                "n_iter": self.n_iter, "mode": self.mode, "build_slab": self.build_slab,
                "build_disk": self.build_disk, "disk_bytes": self._disk_bytes,
                "disk_off": self.disk_off,
                "disk_y_dtype": None if self.disk is None else str(self.disk.dtypes["y"]),
                "slab_active": self._slab_active if self.slab is not None else 0,
                "slab_margins": bool(self.slab is not None and self._slab_margins),
                "eps_pg": self.eps_pg, "gap_trigger": self.gap_trigger,
                "check_due": self._check_due, "check_misses": self._check_misses,
                "done": self.done, "converged": self.converged, "gap": self.gap,
                "primal": self.primal, "dual": self.dual,
                "sched": self.sched.state_dict(), "saved_at": self.saved_at}
        arrays.update(_history_to_arrays(self.history))
        return arrays, meta

    def restore(self, arrays: dict, meta: dict) -> None:
        if meta.get("solver") != "dcd" or meta.get("version") != _STATE_VERSION:
            raise InvalidParameterError("checkpoint is not a dcd checkpoint of this version")
        self.W[:] = arrays["W"]
        self.wb[:] = arrays["wb"]
        self.zu[:] = arrays["zu"]
        self.zs[:] = arrays["zs"]
        self._cert[:] = arrays["cert"]
        self.pgmax_old[:] = arrays["pgmax_old"]
        self.pgmin_old[:] = arrays["pgmin_old"]
        self._terms[:] = arrays["terms"]
        self.block_active[:] = arrays["block_active"]
        self.block_active_bytes[:] = arrays["block_active_bytes"]
        for name, st in self.sched.states.items():
            st.load_array(arrays["state." + name])
        self.sched.load_state_dict(meta["sched"])
        self.n_iter = int(meta["n_iter"])
        self.build_slab = bool(meta["build_slab"])
        self.eps_pg = float(meta["eps_pg"])
        self.gap_trigger = float(meta["gap_trigger"])
        self._check_due = int(meta["check_due"])
        self._check_misses = int(meta["check_misses"])
        self.done, self.converged = bool(meta["done"]), bool(meta["converged"])
        self.gap, self.primal, self.dual = (float(meta[k]) for k in ("gap", "primal", "dual"))
        self.history = _history_from_arrays(arrays)
        self.saved_at = float(meta["saved_at"])
        self.build_disk = bool(meta["build_disk"])
        self.disk_off = bool(meta["disk_off"])
        self._disk_bytes = int(meta["disk_bytes"])
        if meta["mode"] == "slab":
            self._set_slab(_Slab.from_arrays(arrays))
            self._slab_active = int(meta["slab_active"])
            self._slab_margins = bool(meta["slab_margins"])
        elif meta["mode"] == "disk":
            store = self.sched.store
            layout = {k: arrays["disk." + k] for k in ("rows", "lens", "bounds", "block_active")}
            self.disk = rebuild(self.sched, self.sched.read_blocks(range(self.sched.n_blocks)),
                                layout, {"indices": store.meta["index_dtype"],
                                         "data": store.dtype, "y": meta["disk_y_dtype"]},
                                self.unit)
            self.disk_active_bytes = np.array(arrays["disk.active_bytes"], dtype=np.int64)
            self.mode = "disk"


_HIST_FLOAT = ("passes", "primal", "dual", "gap", "pg_spread", "sweep_seconds", "mb_read",
               "seconds", "kernel_seconds", "wait_seconds")
_HIST_INT = ("iter", "active")


def _history_to_arrays(history: list) -> dict:
    """The sweep log as numeric columns (cheap to checkpoint every pass)."""
    out = {f"history.{k}": np.array([h.get(k, np.nan) for h in history], dtype=np.float64)
           for k in _HIST_FLOAT}
    out.update({f"history.{k}": np.array([h[k] for h in history], dtype=np.int64)
                for k in _HIST_INT})
    out["history.exact"] = np.array([h["exact"] for h in history], dtype=bool)
    out["history.slab"] = np.array([h["mode"] == "slab" for h in history], dtype=bool)
    out["history.disk"] = np.array([h["mode"] == "disk" for h in history], dtype=bool)
    return out


def _history_from_arrays(arrays: dict) -> list:
    n = len(arrays["history.iter"])
    rows = []
    for j in range(n):
        h = {"iter": int(arrays["history.iter"][j]),
             "mode": "slab" if arrays["history.slab"][j] else
             "disk" if arrays["history.disk"][j] else "stream"}
        for k in ("passes", "primal", "dual", "gap"):
            h[k] = float(arrays[f"history.{k}"][j])
        h["active"] = int(arrays["history.active"][j])
        h["pg_spread"] = float(arrays["history.pg_spread"][j])
        h["exact"] = bool(arrays["history.exact"][j])
        for k in ("sweep_seconds", "mb_read", "seconds"):
            h[k] = float(arrays[f"history.{k}"][j])
        for k in ("kernel_seconds", "wait_seconds"):    # (not in checkpoints before them)
            if f"history.{k}" in arrays:
                h[k] = float(arrays[f"history.{k}"][j])
        rows.append(h)
    return rows
