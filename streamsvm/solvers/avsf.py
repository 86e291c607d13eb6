"""``avsf``: dual coordinate descent with adaptive variable selection frequencies
(Glasmachers & Dogan 2013; spec_003 §2–3), streamed over chunks.

Problem: the same as ``dcd`` (LIBLINEAR ``-s 3`` / ``-s 1``, the bias a regularized constant
feature, one-vs-rest for multiclass with every model updated on each read of a row).

Method (spec §2). No shrinking: every row ``i`` has a preference ``p_i ∈ [p_min, p_max]``
per model (a per-row state, float64), and an epoch makes exactly ``ℓ`` coordinate steps
per model, row ``i`` visited ``ℓ·p_i/Σp`` times in expectation (Algorithm 4, exact
marginals). After each step, ``p_i ← p_i·exp(c·(Δ/Δ_ref − 1))`` (Algorithm 5, the ratio
form, spec §5.2) with Δ the step's exact dual gain and Δ_ref a fading average of the gains
(over the first, uniform epoch: its mean gain), ``h ≤ ln(p_max/p_min)`` and ``h = 0`` while
``Δ_ref ≤ 0``. A step that does not move still lowers ``p`` ("soft shrinking").

Out of core (spec §3.3 A, §3.6), one epoch is one pass:

* the budgets, at two levels with exact marginals: Algorithm 4 over the preference masses
  of the blocks (their rows not in the hot cache) and of the hot cache, with budget ``ℓ``;
  then over each block's rows when it arrives (and over the cache's rows);
* the blocks in chunk pairs new every pass (``sched.chunk_order``), the visits of a pair's rows
  and a slice of the cache's visits shuffled together in one kernel call (the cache's visits
  spread evenly over the pass by the blocks' budgets); a block whose budget is 0 (every row
  hot) is not read;
* the **hot cache** (``schedule/_hot.py``): after its visits, a block's rows whose largest
  preference is at least ``τ_in`` (and above the mean preference) are copied to RAM while
  there is room (``cache`` × ℓ rows, within the memory budget); ``τ_in`` is the cache
  size's largest preference (from a histogram of log p over all rows) and a row leaves at
  the end of a pass once its preference is below ``τ_in/2`` (hysteresis);
* when the whole store fits the budget it is read at once and every row is hot: the epochs
  are the paper's, exactly (Algorithm 4 over all ℓ rows, one shuffled schedule);
* optional, off by default (``lazy``, spec §3.7, experimental): a block's visits of an
  epoch are owed instead of made, and the block not read, until the visits owed to it reach
  ``lazy`` per row and model (or it has been skipped ``lazy_max_skip`` epochs); then it is
  read and every visit owed is made. Each block still gets its expected visits, deferred;
  the verifying uniform epoch of the stopping rule drops what is owed and reads every block.

Stopping (spec §2.7). After each epoch, LIBLINEAR's test ``max PG − min PG ≤ ε`` over the
epoch's visits (``stop_rule="max_violation"``: the printed ``max |PG| ≤ ε``). The first time it
holds, the preferences are reset to 1 (and the cache emptied), so the next epoch is a
uniform sweep of every row; if that sweep passes too, a read-only pass computes the exact
projected gradients and the exact duality gap at the current ``w`` (spec §3.6 item 5). With
``eps`` given, training stops when the exact test holds (or the relative gap reaches
``tol``); without it ε starts at LIBLINEAR's 0.1 and is divided by 10 each time the exact
gap is still above ``tol``. The dual objective is exact every epoch; the primal only at the
exact checks (history ``exact``).
"""

from __future__ import annotations

import logging

import numpy as np

from ..kernels._avsf import alg4_counts
from ..exceptions import InvalidParameterError
from ..problem import Problem
from ..schedule import Need, RowField
from ._avsf_cache import HotCachePolicy
from ._avsf_check import AvsfCheck
from ._avsf_visits import AvsfVisits
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, COMMON_PARAMS, SVC_LOSS_PARAM,
                    Param, Solver, register)

__all__ = ["AVSFSolver"]

logger = logging.getLogger(__name__)

_TOP = 0xA5F        # the key of an epoch's top-level draws (sched.rng)


@register("avsf")
class AVSFSolver(HotCachePolicy, AvsfVisits, AvsfCheck, Solver):
    """Dual CD with adaptive variable selection frequencies and a hot cache (module doc; the
    cache's policy in :mod:`._avsf_cache`, the visit codes in :mod:`._avsf_visits`, the exact
    check in :mod:`._avsf_check`)."""

    summary = ("dual coordinate descent with adaptive variable selection frequencies "
               "(Glasmachers & Dogan): per-row preferences instead of shrinking, the hottest "
               "rows kept in RAM; fastest at large C")
    params = (
        C_PARAM,
        SVC_LOSS_PARAM,
        BIAS_PARAM,
        *COMMON_PARAMS,
        CLASS_WEIGHT_PARAM,
        Param("eps", "float", None, "stop when the exact projected-gradient test holds at "
              "this ε (LIBLINEAR -e; the paper's rule); unset: ε from 0.1, tightened until "
              "the duality gap meets tol", low=0.0, low_open=True),
        Param("stop_rule", "choice", "liblinear", "the epoch's test: liblinear = max PG - "
              "min PG <= eps, max_violation = max |PG| <= eps (the paper's print)",
              choices=("liblinear", "max_violation")),
        Param("cache", "float", 0.1, "share of the rows kept hot in RAM (the largest "
              "preferences), within the memory budget; 0: none", low=0.0, high=1.0),
        Param("cache_visits", "float", 0.0, "extra visits of hot rows with each pair of "
              "blocks streamed, as a share of the pair's visits (dual cached loops: work "
              "while the next blocks are read); 0: none", low=0.0),
        Param("change_rate", "float", 0.2, "c of Algorithm 5: p *= exp(c (gain/mean gain - 1))",
              low=0.0, low_open=True),
        Param("p_min", "float", 0.05, "smallest preference", low=0.0, low_open=True),
        Param("p_max", "float", 20.0, "largest preference", low=1.0),
        Param("lazy", "float", 0.0, "experimental: skip reading a block while the "
              "visits owed to it stay below this many per row, then make them all; 0: read "
              "every block with visits each epoch", low=0.0, high=1.0),
        Param("lazy_max_skip", "int", 8, "with lazy: read a block at least every this many "
              "epochs", low=1),
    )
    history_extras = ("steps", "pg_spread", "eps", "hot_rows")

    def problem(self, store) -> Problem:
        return Problem(loss=self.loss, C=self.C, class_weight=self.class_weight, bias=self.bias,
                       layout="binary" if store.task == "binary" else "ovr")

    def for_cluster(self, store):
        """On a dask cluster: the distributed dual loop on the same problem (``_cocoa.py``);
        the adaptive selection frequencies are not used there."""
        from ._cocoa import CocoaDual
        logger.warning("avsf on a dask cluster: the distributed loop of dual coordinate "
                       "descent with shrinking (dcd's), without the adaptive selection "
                       "frequencies")
        return CocoaDual(self.name, C=self.C, loss=self.loss, bias=self.bias, tol=self.tol,
                         max_passes=self.max_passes, class_weight=self.class_weight)

    def check_store(self, store) -> None:
        if self.p_min >= self.p_max:
            raise InvalidParameterError(f"The 'p_min' parameter of solver 'avsf' must be below "
                                        f"p_max={self.p_max:g}. Got {self.p_min!r} instead.")

    # -- setup -------------------------------------------------------------------------
    def start(self, sched) -> None:
        store = sched.store
        binary = store.task == "binary"
        k = self.k = 1 if binary else len(store.classes)
        d = sched.n_features
        # besides the models: a pair of blocks' visit codes and scratch (about 2 visits per
        # row and model), as the hot rows' room leaves them out
        sched.check_budget("avsf", {"the models": Need((d, k)),
                                    "a pair of blocks' visit codes": Need(("block", 4 * k + 3),
                                                                          count=2)})
        self.prob = self.kernel_costs(store)
        self.unit = store.binary_values
        self.W = np.zeros((d + 1, k))          # the bias weight last (kernels/_csr.py)
        # one model: the kernels take its weights as a vector (kernels/_csr.py, w_at)
        self.model = self.W[:, 0] if k == 1 else self.W
        self.alpha = sched.state("avsf.alpha", np.float64, width=k)
        self.p = sched.state("avsf.p", np.float64, width=k, fill=1.0)
        self.hot_flag = sched.state("avsf.hot", np.uint8)
        # [Δ_ref, PG max, PG min, Σ α, ½ Σ D α²] per model (kernels/_avsf.py)
        self.st = np.zeros((k, 5))
        self.epochs = self.steps = self.last_check = self.extra_steps = 0
        self.canstop, self.pending, self.by_pg = True, False, False
        self.tau_in = self.p_mean = 1.0
        self.eps_now = 0.1 if self.eps is None else float(self.eps)
        n = sched.n_rows
        bounds = [sched.block_bounds(b) for b in range(sched.n_blocks)]
        self.bounds = np.array([b[0] for b in bounds] + [bounds[-1][1]], dtype=np.int64)
        # lazy reading (module doc): the visits owed to each block, per model, and the epoch
        # it was last read
        self.owed = np.zeros((sched.n_blocks, k), np.int64)
        self.last_read = np.zeros(sched.n_blocks, np.int64)
        # a hot row: its α and p (the scheduler counts its entries, pointer, label and id),
        # ‖x‖² and its visit codes (2 per model)
        self.hot = sched.hot_rows((self.alpha, self.p), self.hot_flag,
                                  fields=(RowField("float64"), RowField("int64", 2 * k)),
                                  max_rows=int(self.cache * n))
        if self.cache > 0 and self.hot.fits_store():
            self.hot.load_all()                     # the paper's epochs, in RAM
        else:
            asked = int(self.cache * n)
            fits = min(asked, self.hot.rows_that_fit())
            if fits < 0.5 * asked:
                logger.warning(
                    "avsf: the memory budget leaves room for about %d hot rows of the %d "
                    "asked (--cache %g); streamed without them, chunk order costs many more "
                    "epochs (24x on a9a, BENCHMARKS.md 'avsf'): raise --memory by about "
                    "%.1f MB", fits, asked, self.cache,
                    (asked - fits) * self.hot.mean_row_bytes() / 1e6)
        # a mean row: once the cache has no room for one, blocks are not offered their rows
        # (most offers then copied nothing: on the 10^6-row text-like store at 96 MB, 9 of
        # 10, a tenth of an epoch's time)
        self.row_nnz = store.nnz / max(1, n)
        self.codes, self.hbuf = np.empty(0, np.int64), np.empty(0, np.int64)
        self.wbuf = np.empty(0)

    @property
    def n_iter(self) -> int:
        return self.epochs

    # -- one outer iteration -----------------------------------------------------------
    def step(self, sched) -> dict:
        if self.pending:
            return self._check(sched)
        st = self.st
        st[:, 1], st[:, 2] = -np.inf, np.inf
        self.steps += self._epoch(sched)
        self.epochs += 1
        spread = self._spread(st[:, 1], st[:, 2])
        if spread <= self.eps_now:
            if self.canstop:
                self.pending = self.by_pg = True    # the exact check next
            else:
                self._reset()                   # a uniform sweep verifies (spec §2.7)
        else:
            self.canstop = False
        # without ε the certificate is the gap: checked also as epochs go by (once the
        # epochs since the last check are an eighth of all, at least 16), since on data with
        # many duplicate rows (a9a at C = 100) the epoch's test can stay above ε long after
        # the gap meets tol. A check is one read-only pass: about 6 checks per doubling of
        # the epochs, and the run stops at most ~12% of its epochs after the gap met tol (a
        # check every doubling of the epochs can overshoot by 100%: a9a at C = 1000 in RAM
        # ended at 25,694 passes, 63 s, with it and at 19,787, 46 s, now; at C = 100 the
        # doubling happened to check just past the crossing: 1,993 passes then, 2,072 now)
        if self.eps is None and self.epochs - self.last_check >= max(16, self.epochs // 8):
            self.pending = True
        dual = self._dual()
        kind = "slab" if self.hot.whole else "stream"
        return self._entry(kind, np.nan, dual, np.nan, False, spread)

    def _reset(self) -> None:
        self.canstop = True
        self.owed[...] = 0                  # the uniform epoch: every row once, every block
        if not self.hot.whole:
            self.hot.clear()
        self.p.fill(1.0)
        self.hot.local["avsf.p"][...] = 1.0

    def _epoch(self, sched) -> int:
        """One epoch (module doc): ℓ steps per model, one pass over the blocks with budget
        (with ``lazy``: the blocks due, their owed steps included); the steps made per
        model."""
        k, n, hot = self.k, sched.n_rows, self.hot
        nb = sched.n_blocks
        mass = self._masses(n, nb)
        state = sched.rng(self.epochs, _TOP).integers(2**63, size=1, dtype=np.uint64)
        budget = np.zeros((nb + 1, k), np.int64)
        for c in range(k):
            alg4_counts(np.ascontiguousarray(mass[:, c]), n, budget[:, c], state)
        if self.lazy > 0 and not hot.whole:
            self._defer(budget[:nb])
        steps = int(budget.sum()) // k
        # the hot rows' visits, shuffled, then dealt to the groups by their budgets
        H, m = self._hot_codes(budget[nb], state)
        ids = np.flatnonzero(budget[:nb].sum(axis=1) > 0)
        ids = sched.chunk_order(ids, 2, self.epochs)
        per_block = budget[ids].sum(axis=1)
        pairs = [ids[j:j + 2] for j in range(0, len(ids), 2)]
        group_budget = np.array([per_block[j:j + 2].sum() for j in range(0, len(ids), 2)])
        edges = np.zeros(len(pairs) + 1, np.int64)
        if len(pairs):
            edges[1:] = np.floor(np.cumsum(group_budget) * (m / max(1, group_budget.sum())))
            edges[-1] = m
        if pairs:
            # the groups of two blocks, each with its slice of the hot rows' visits
            sched.sweep(self._group_on, sched, budget, H, edges, over="store", order=ids,
                        group=2, drop=(self.alpha, self.p))
        else:
            sched.sweep(self._hot_visits, H, m, self._adapt(sched), over=hot)
        self._evict_cold()
        return steps

    def _defer(self, budget) -> None:
        """Lazy reading (spec §3.7): each block's visits of this epoch join what it is owed;
        a block is read (``budget`` keeps all it is owed) once that reaches ``lazy`` visits
        per row and model or it was last read ``lazy_max_skip`` epochs ago, else its budget
        becomes 0 and the visits stay owed."""
        due = self.owed + budget
        rows = np.diff(self.bounds)
        total = due.sum(axis=1)
        read = (total > 0) & ((total >= self.lazy * rows * self.k)
                              | (self.epochs - self.last_read >= self.lazy_max_skip))
        budget[...] = np.where(read[:, None], due, 0)
        self.owed[...] = np.where(read[:, None], 0, due)
        self.last_read[read] = self.epochs

    def final_check(self, sched) -> dict:
        return self._check(sched)

    def _entry(self, kind, primal, dual, gap, exact, spread) -> dict:
        return {"kind": kind, "primal": primal, "dual": dual, "gap": gap, "exact": exact,
                "active": self.hot.n_rows,
                "steps": float(self.steps + self.extra_steps) * self.k,
                "pg_spread": spread, "eps": self.eps_now, "hot_rows": float(self.hot.n_rows)}

    # -- results and checkpoints ---------------------------------------------------------
    def coef(self):
        # one model: W[:d].T is (1, d) and contiguous, no copy
        return np.ascontiguousarray(self.W[:-1].T), self.W[-1] * self.bias

    hot = None
    """The hot rows (:meth:`PassScheduler.hot_rows`) once started."""

    def close(self) -> None:
        if self.hot is not None:
            self.hot.close()
            self.hot = None

    state_version = 3
    state_arrays = ("W", "st", "owed", "last_read")
    state_values = ("epochs", "steps", "extra_steps", "last_check", "canstop", "pending",
                    "by_pg", "tau_in", "p_mean", "eps_now")

    def state_dict(self):
        arrays, meta = super().state_dict()
        hot_arrays, meta["hot"] = self.hot.state_dict()
        arrays.update({f"hot.{k}": v for k, v in hot_arrays.items()})
        return arrays, meta

    def load_state_dict(self, arrays, meta) -> None:
        super().load_state_dict(arrays, meta)
        self.tau_in, self.p_mean = float(self.tau_in), float(self.p_mean)
        self.hot.load_state_dict({k[4:]: v for k, v in arrays.items() if k.startswith("hot.")},
                                 meta["hot"])

