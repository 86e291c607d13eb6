"""``dcd``: dual coordinate descent for L2-regularized linear SVMs, streamed over chunks.

Problem (LIBLINEAR ``-s 3`` / ``-s 1``; spec_003 §1.1–1.3)::

    min_w  P(w) = ½‖w‖² + ½b² + Σ_i C_i ξ(y_i (wᵀx_i + B·b))
    ξ(m) = max(0, 1 − m)     (loss="hinge")      or   max(0, 1 − m)²   (loss="squared_hinge")

with the bias ``b`` a regularized constant feature of value ``B`` (``bias``; 0 disables
it). Dual: ``min_α f(α) = ½‖Σ y_i α_i x̄_i‖² + ½ Σ D_i α_i² − Σ α_i`` subject to
``0 ≤ α_i ≤ U_i`` (hinge: ``U_i = C_i, D_i = 0``; squared hinge: ``U_i = ∞, D_i = 1/(2C_i)``),
``w = Σ y_i α_i x_i``. Multiclass data is solved one-vs-rest: out of core every model is
updated on each visit of a row (one read serves all classes), in RAM class by class, where
a squared-hinge class on which the dual crawls switches to a primal Newton (``_dcd_ram.py``).

Method: Hsieh et al. 2008 as LIBLINEAR 1.92 implements it, not the paper's printed
Algorithm 2 (spec_003 §1.9), with LIBLINEAR's shrinking per row (the thresholds of the
previous sweep); out of core per spec §3.4, §3.6, §3.8. The kept (active) rows are the
scheduler's resident rows (``schedule/_resident.py``): each outer iteration is one of

* a **streamed sweep** (kind ``stream``): the blocks with active rows in groups of two from
  chunks paired anew each pass, their rows interleaved at random in the kernel (the
  shuffle buffer), each chunk decompressed once;
* a **disk-slab sweep** (``disk``): the same over the active rows copied uncompressed to
  scratch files, once they hold at most half of the store's bytes (on the 10^7-row
  benchmark store this halves the passes to 1e-3; not in spec §3.8, which compacts to RAM
  only);
* **RAM-slab epochs** (``slab``): LIBLINEAR's in-memory epochs over the active rows once
  they fit the budget (from the first iteration when the whole store fits), as many per
  kernel call as fit in a pass of visits;
* an **exact check** (``check``): a read-only pass (over the RAM slab when it holds every
  row) computing the exact primal at the current w; it re-activates the shrunk rows that
  violate their optimality condition (LIBLINEAR re-activates all) and collects the rows
  left active into a new slab.

Stopping: the dual is exact every iteration; the primal is estimated from the margins
recorded at the last visit of the active rows, 0 loss for rows shrunk at α = 0, and the
loss of rows shrunk at α = C (hinge) summed exactly through ``zu = Σ C_i y_i x_i``
(kernels/_dcd.py). An exact check follows when LIBLINEAR's own test fires (the
projected-gradient spread ``PGmax − PGmin ≤ ε``, ε from LIBLINEAR's 0.1 divided by 10 each
time it fires too early), or when the estimated gap of every model is ≤ ``tol`` — then no
sooner than about one check's cost of work after the previous check (half a pass of visits
in a full slab, two passes otherwise; doubled after each miss, up to 4×), since the
estimate can be optimistic. The driver stops on an exact gap ≤ ``tol``.

Passes: a streamed sweep reads the rows of the blocks with active rows (blocks with none
are skipped), a disk sweep the slab's rows, slab epochs their visits; a check is one pass.
"""

from __future__ import annotations

import numpy as np

from ..kernels._dcd import dcd_check, dcd_estimate, dcd_sweep, dcd_terms_add
from ..problem import Problem
from ..schedule import Accumulator, Need, RowField
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, COMMON_PARAMS, SVC_LOSS_PARAM,
                    Param, Solver, register, rel_gap)
from ._dcd_ram import PerClass, RamSlab

__all__ = ["DCDSolver"]

@register("dcd")
class DCDSolver(Solver):
    """Dual coordinate descent with per-row shrinking and active-set compaction (module doc)."""

    summary = ("dual coordinate descent (LIBLINEAR -s 3/-s 1) with shrinking; out of core, "
               "the active rows go to a disk slab and then to RAM")
    params = (
        C_PARAM,
        SVC_LOSS_PARAM,
        BIAS_PARAM,
        *COMMON_PARAMS,
        CLASS_WEIGHT_PARAM,
        Param("shrinking", "bool", True, "LIBLINEAR's shrinking of rows at a bound"),
        Param("slab", "bool", True, "compact the active rows into RAM when they fit"),
        Param("disk_slab", "bool", True, "copy the active rows to scratch files once they "
              "hold at most half of the store's bytes but do not fit in RAM"),
    )

    def problem(self, store) -> Problem:
        return Problem(loss=self.loss, C=self.C, class_weight=self.class_weight, bias=self.bias,
                       layout="binary" if store.task == "binary" else "ovr")

    def for_cluster(self, store):
        """On a dask cluster: the distributed dual loop on the same problem (``_cocoa.py``:
        local dual CD with shrinking on every worker, an exact step on their changes)."""
        from ._cocoa import CocoaDual
        return CocoaDual(self.name, C=self.C, loss=self.loss, bias=self.bias, tol=self.tol,
                         max_passes=self.max_passes, class_weight=self.class_weight,
                         shrinking=self.shrinking)

    # -- setup -------------------------------------------------------------------------
    def start(self, sched) -> None:
        store = sched.store
        binary = store.task == "binary"
        k = self.k = 1 if binary else len(store.classes)
        d = sched.n_features
        # the streamed exact check sums the shrunk rows afresh: a pass's sums, d×k
        sched.check_budget("dcd", {"the model and its shrinking sums": Need((d, k), count=2),
                                   "the exact check's sums": Need((d, k), per_pass=True)})
        self.prob = self.kernel_costs(store)
        self.unit = store.binary_values
        self.W = np.zeros((d + 1, k))          # the bias weight last (kernels/_csr.py)
        # rows shrunk at the upper bound: Σ C_i y_i x_i and [Σ C_i y_i B, Σ C_i] (kernel doc)
        self.zu, self.zs = np.zeros((d, k)), np.zeros((k, 2))
        # one model: the kernels take its weights as vectors (kernels/_csr.py, w_at)
        self.model = ((self.W[:, 0], self.zu[:, 0], self.zs) if k == 1
                      else (self.W, self.zu, self.zs))
        # 9k bytes per row: labels and ‖x_i‖² come with the rows, and the certificate terms
        # are summed while the rows are visited, so only α and the shrink flags persist;
        # a RAM slab's rows also keep ‖x̄_i‖² and their margins (_dcd_ram.py)
        self.alpha = sched.state("dcd.alpha", np.float64, width=k)
        self.active = sched.state("dcd.active", np.uint8, width=k, fill=1)
        self.rows = sched.resident_rows(
            self.active, (self.alpha, self.active),
            fields=(RowField("float32"), RowField("float32", k)), ram=self.slab,
            disk=self.disk_slab)
        self.pgmax_old, self.pgmin_old = np.full(k, np.inf), np.full(k, -np.inf)
        self.shrink = (self.pgmax_old, self.pgmin_old)
        self.cert = np.zeros((k, 2))
        self.cert_fresh = False
        self.terms = np.full((k, 3), np.nan)    # Σ over active pairs (NaN: unknown)
        self.eps_pg = 0.1                       # LIBLINEAR's default dual stopping tolerance
        self.gap_trigger, self.check_due, self.check_misses = self.tol, 0, 0
        self.pending = None                     # an exact check asked for: [by_gap, by_pg]
        self.epochs = 0
        self.visits = 0                         # row visits so far (what the sweeps return)
        self.ramslab = RamSlab(self)            # the RAM slab's own per-row arrays
        self.work = np.empty(0, dtype=np.int64)
        self.per_class = None                   # one-vs-rest in RAM: class by class
        if self.slab and self.rows.fits_ram():  # the whole store fits: read it at once
            self.rows.collect_to = "ram"

    @property
    def n_iter(self) -> int:
        return self.epochs

    # -- one outer iteration --------------------------------------------------------------
    def step(self, sched) -> dict:
        if self.pending is not None:
            return self._check(sched)
        pg = np.zeros((self.k, 3))
        pg[:, 0], pg[:, 1] = -np.inf, np.inf
        rows = self.rows
        if rows.where == "store" and rows.collect_to == "ram" and self.epochs == 0:
            rows.load_all()
            self.ramslab.refresh()
        self.cert_fresh = False
        kind = {"store": "stream", "disk": "disk", "ram": "slab"}[rows.where]
        if kind == "slab" and self.k > 1 and rows.ram_full:
            if self.per_class is None:          # every class's certificate before its turn
                self.ramslab.margins |= self.epochs == 0   # w = 0: the zero margins are exact
                self._objectives()
                self.per_class = PerClass(self)
            return self.per_class.iteration(sched)
        if kind == "slab":
            epochs, spread = self.ramslab.epochs(sched, pg)
        else:
            self._sweep(sched, pg)
            epochs, spread = 1, float(np.max(pg[:, 0] - pg[:, 1]))
            self._update_thresholds(pg)
        self.epochs += epochs
        primal, dual = self._objectives()
        gap = rel_gap(primal, dual)
        by_gap = gap.max() <= self.gap_trigger and self.visits >= self.check_due
        by_pg = spread <= self.eps_pg
        if by_gap or by_pg:
            self.pending = [bool(by_gap), bool(by_pg)]
        elif rows.where in ("store", "disk"):
            rows.plan()
        return self._entry(kind, primal, dual, gap, False)

    def final_check(self, sched) -> dict:
        if self.pending is None:
            self.pending = [False, False]
        return self._check(sched)

    def _entry(self, kind, primal, dual, gap, exact) -> dict:
        active = self.ramslab.active if self.rows.ram is not None else self.rows.kept()[0]
        return {"kind": kind, "primal": primal.sum(), "dual": dual.sum(), "gap": gap.max(),
                "exact": exact, "active": active}

    def _sweep(self, sched, pg) -> None:
        """One sweep over the store's blocks with active rows, or over the disk slab, two
        blocks at a time with their rows interleaved."""
        rows = self.rows
        if not (rows.disk.block_rows if rows.where == "disk" else rows.block_rows).any():
            self.unshrink()        # everything shrunk: un-shrink (LIBLINEAR does the same)
        self.terms[:] = 0.0         # summed over the visited rows (unvisited ones are shrunk)
        self.visits += sched.sweep(self._sweep_group, pg, over=rows, group=2,
                                   epoch=self.epochs, states=(self.alpha, self.active)).visits
        self.ramslab.refresh()

    def _sweep_group(self, g, pg) -> None:
        """:func:`dcd_sweep` over a group of blocks, their rows interleaved."""
        blocks, views = g.blocks * 2 if len(g.blocks) == 1 else g.blocks, g.views
        n = sum(b.n_rows for b in g.blocks)
        if len(self.work) < n:
            self.work = np.empty(n, dtype=np.int64)
        dcd_sweep(tuple((b.indptr, b.indices, b.data) for b in blocks),
                  tuple(b.y for b in blocks), views * 2 if len(views) == 1 else views,
                  len(g.blocks), self.unit, self.model, self.prob, self.shrink,
                  (pg, self.terms), np.array([g.seed], dtype=np.uint64), self.work)

    # -- the exact check ------------------------------------------------------------------
    def _check(self, sched) -> dict:
        """Exact margins, primal and PG spread at the current w; re-activate the shrunk rows
        that violate their optimality condition. In the RAM slab when it holds every row,
        else one pass over the store that also collects the rows left active."""
        by_gap, by_pg = self.pending
        self.pending = None
        self._sync()
        k, rows = self.k, self.rows
        _, dual = self._objectives()            # exact; computed before active changes
        self.zu[:] = 0.0
        self.zs[:] = 0.0
        self.terms[:] = 0.0
        stats = _new_stats(k)
        if rows.ram_full:
            self.visits += sched.sweep(self._check_slab, stats, over=rows).visits
        else:
            self.ramslab.leave()
            rows.plan_full_pass()
            self.terms[:] = 0.0
            res = sched.map_reduce(
                _check_block, states=(self.alpha, self.active), rows=rows,
                args=(self.W, self.prob, self.unit),
                acc={"zu": Accumulator(self.zu.shape), "zs": Accumulator(self.zs.shape),
                     "terms": Accumulator(self.terms.shape),
                     "stats": Accumulator(stats.shape, _fold_stats, per_block=True,
                                          init=stats)})
            self.visits += res.visits
            self.zu[:], self.zs[:], self.terms[:] = res["zu"], res["zs"], res["terms"]
            stats = res["stats"]
            reg = half_sq_norms(self.W)
            sched.finish_collect(install=rel_gap(reg + stats[:, 2], dual).max() > self.tol)
            self.ramslab.refresh()
        base = sched.n_rows // 2 if rows.ram_full else 2 * sched.n_rows
        self.check_due = self.visits + base * 2 ** self.check_misses
        reg = half_sq_norms(self.W)
        primal = reg + stats[:, 2]
        self.cert[:, 0], self.cert[:, 1] = primal, dual         # exact at this w
        self.cert_fresh = True
        gap = rel_gap(primal, dual)
        if self.per_class is not None and rows.ram_full:
            self.per_class.after_check(gap)
        elif gap.max() > self.tol:
            if rows.where in ("store", "disk"):
                rows.plan()
            if by_pg:       # LIBLINEAR's test fired too early: tighten it
                self.eps_pg = max(self.eps_pg * 0.1, 1e-12)
            if by_gap:      # the estimate was optimistic: space the next checks wider
                self.check_misses = min(self.check_misses + 1, 2)
        return self._entry("check", primal, dual, gap, True)

    def _check_slab(self, sl, stats) -> int:
        """The exact check over a RAM slab holding every row: :func:`dcd_check`."""
        dcd_check(sl.X, self.unit, sl.y, self.ramslab.duals()[:2], self.model, self.prob,
                  (self.terms, stats))
        self.ramslab.active = int(sl.local["dcd.active"].any(axis=1).sum())
        return sl.n_rows

    # -- certificate ------------------------------------------------------------------------
    def _objectives(self):
        """Per-model primal estimate and exact dual objective: the margins recorded at the
        last visit of the active rows, the shrunk rows through ``zu``/``zs``."""
        if not self.cert_fresh:
            t = self.terms                      # summed by the last sweep or check
            if self.rows.ram is not None and self.ramslab.margins:
                t = np.zeros((self.k, 3))       # the rows outside the slab are all shrunk
                dcd_terms_add(self.rows.ram.y, self.ramslab.duals(), self.prob, t)
            dcd_estimate(self.model, t, self.cert)
            if self.per_class is not None:
                self.per_class.primal_duals(self.cert)
            self.cert_fresh = True
        return self.cert[:, 0].copy(), self.cert[:, 1].copy()

    def _update_thresholds(self, pg) -> None:
        """LIBLINEAR's threshold update after a sweep (spec §1.5)."""
        hi, lo = self.shrink
        hi[:] = np.where(pg[:, 0] > 0, pg[:, 0], np.inf)
        lo[:] = np.where(pg[:, 1] < 0, pg[:, 1], -np.inf)
        if not self.shrinking:
            hi[:], lo[:] = np.inf, -np.inf

    def unshrink(self) -> None:
        """Every row active again (inside the RAM slab when it holds every row)."""
        self._sync()
        self.zu[:] = 0.0
        self.zs[:] = 0.0
        self.cert_fresh = False
        self.shrink[0][:], self.shrink[1][:] = np.inf, -np.inf
        if self.rows.ram_full:
            self.rows.ram.local["dcd.active"][:] = 1
            self.ramslab.active = self.rows.ram.n_rows
            return
        self.ramslab.leave()
        self.rows.reset()
        self.active.fill(1)
        self.terms[:] = np.nan         # known again after the next sweep

    # -- results and checkpoints ---------------------------------------------------------
    def _sync(self) -> None:    # one-vs-rest class by class: its class-major copies back
        if self.per_class is not None:
            self.per_class.sync()

    def coef(self):
        # one model: W[:d].T is (1, d) and contiguous, taken as it is (a copy would be the
        # run's last O(d) allocation, on top of everything)
        W, b = self.per_class.coef() if self.per_class is not None else \
            (np.ascontiguousarray(self.W[:-1].T), self.W[-1])
        self.ramslab.leave()
        self.rows.close()
        return W, b * self.bias

    def close(self) -> None:
        if self.rows is not None:           # (start() may have refused the budget)
            self.rows.close()

    state_version = 9
    state_arrays = ("W", "zu", "zs", "cert", "pgmax_old", "pgmin_old", "terms")
    state_values = ("epochs", "visits", "eps_pg", "gap_trigger", "check_due", "check_misses",
                    "pending")

    def state_dict(self):
        self._sync()
        arrays, meta = super().state_dict()
        self.rows.save_into(arrays, meta)
        if self.rows.ram is not None:
            slab, meta["slab"] = self.ramslab.state_dict()
            arrays.update(slab)
        if self.per_class is not None:
            per_class, meta["per_class"] = self.per_class.state_dict()
            arrays.update(per_class)
        return arrays, meta

    def load_state_dict(self, arrays, meta) -> None:
        super().load_state_dict(arrays, meta)
        self.rows.load_from(arrays, meta)
        if "per_class" in meta:
            self.per_class = PerClass(self)
            self.per_class.load_state_dict(arrays, meta["per_class"])
        if self.rows.ram is not None:
            self.ramslab.load_state_dict(arrays, meta["slab"])


def _new_stats(k: int) -> np.ndarray:
    """``[max PG, min PG, Σ C_i loss_i, pairs re-activated]`` per model, at the identity."""
    stats = np.zeros((k, 4))
    stats[:, 0], stats[:, 1] = -np.inf, np.inf
    return stats


def _fold_stats(total, part) -> None:
    np.maximum(total[:, 0], part[:, 0], out=total[:, 0])
    np.minimum(total[:, 1], part[:, 1], out=total[:, 1])
    total[:, 2:] += part[:, 2:]


def _check_block(block, views, args, acc) -> None:
    """The exact check on one block (``map_reduce`` kernel): :func:`dcd_check`."""
    W, prob, unit = args
    dcd_check((block.indptr, block.indices, block.data), unit, block.y, views,
              (W, acc["zu"], acc["zs"]), prob, (acc["terms"], acc["stats"]))


def half_sq_norms(W) -> np.ndarray:
    """``½‖w̄_c‖²`` per model of weights ``W`` (n_features + 1, k), the bias weight last:
    the features' sum first, then the bias (dcd's and avsf's order of the sum)."""
    return 0.5 * (np.einsum("dk,dk->k", W[:-1], W[:-1]) + W[-1] ** 2)
