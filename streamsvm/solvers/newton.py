"""``newton``: a Newton method on the smoothed hinge (or the squared hinge) with an ℓ1 active
set (spec_000 §2–§4.2).

Problem (the library's convention; spec §1.2 divided by λ, ``C = 1/(λn)``, ``ρ = μ/λ``)::

    min_w  P(w) = ½‖w‖² + ρ‖w‖₁ + ½b² + Σ_i C_i ℓ(1 − y_i (wᵀx_i + B·b))

with ``ℓ(z) = max(0, z)`` (hinge, LIBLINEAR ``-s 3``'s problem plus ℓ1) or ``max(0, z)²``
(squared hinge, ``-s 2``), ``b`` a regularized constant feature of value ``B``, or an
unregularized intercept with ``free_bias`` (spec §1.6: never in the ℓ1 term, always active).

Hinge (spec §2, §3.6): Newton minimizes ``F_α`` with the hinge replaced by ``j_α(z) = ½(z +
√(α² + z²))`` (``0 ≤ j_α − max(0, z) ≤ α/2``, so ``F_α`` is within ``α/2·Σ C_i`` of ``P``),
from ``α = alpha0`` down by ``alpha_factor`` per level to ``alpha_min`` (1/n by default). A
level is solved once the Newton decrement ``−gᵀd`` is below ``η·α·Σ C_i`` (the spec's ``ηα``
in its mean-loss units) with ``η = max(1e-3, 0.1·α/alpha0)``: the spec's 0.1 at the first
level, whose smoothing (``α/2`` per unit of C) is far above the answer's accuracy, tightening
to 1e-3 at the last ones (at 0.1 throughout the iterate of a late level was too rough for the
polish below: pendigits stalled at a 2.5e-3 gap; at 1e-3 throughout the first levels took
passes that changed nothing: mushrooms spent 6 passes at α = 1). The squared hinge is once differentiable: one level, no smoothing, its
generalized Hessian ``I + Σ_{z_i > 0} 2C_i x̄_i x̄_iᵀ``.

Newton steps (spec §3.3–3.5, which correct the printed algorithm): the direction on the
active features ``A`` (Cholesky of ``H_AA``, a growing ridge if it fails) with the corrected
pseudo-gradient (``g_j − ρ sign g_j`` at a zero weight, not ``+``), the orientation check
that drops zero weights the direction would push into the wrong orthant (and blocks them
until the next accepted step), the exact ℓ1 line search on the quadratic model (§3.4, O(r
log r), coordinates landing on their breakpoint set to exactly 0) and an Armijo safeguard.
Once a level is solved, the zero weights with ``|g_j| > ρ`` join ``A``. With ``ρ = 0`` every
feature is active from the start. Hessian rows whose curvature is below 1e-6 of the peak
``C/(2α)`` are skipped; blocks denser than 25% build the Hessian by BLAS.

Hessian-free (``hessian="cg"``; ``auto`` picks it when ``n_features + 1 > max_dense`` and
ρ = 0, where a dense Hessian would not fit): no Hessian is summed. Each evaluation pass keeps
the rows whose curvature ``C_i j''(z_i)`` is above the cutoff as resident rows in RAM, with
their curvatures (a per-row state), and sums the Hessian's diagonal. The Newton system is
then solved by conjugate gradient preconditioned by that diagonal, to a relative residual
of 0.1, its Hessian-vector products over the resident rows: a CG iteration is not a pass.
The rows stay in RAM until the next pass (and are recorded in checkpoints). When they do
not all fit, a sample weighted by curvature; with none, a Jacobi step; the first three
trials evaluated: :mod:`._newton_pass`'s doc.

Passes (spec §4.2, ``fused=True``): one pass evaluates, for every model still training,
the objective at all Armijo trials ``s, s/2, …, s/2⁷`` of its step (one pass answers the
whole halving loop), and at each of the first three trials (speculatively the next iterate)
the gradient, the Hessian on the Hessian's columns, the loss and a certificate, at the
current smoothing level and (hinge) at the next one ``α/β``. So a Newton step costs one pass
when one of its first three trials is accepted (on the smoothed hinge the full step often
overshoots: accepted trials were s, s/2 and s/4 about equally often on usps and dna), one
more (its evaluation) when a smaller one is; a new smoothing level costs none (it was
evaluated at the same point); an activation of features outside the Hessian one (the
Hessian covers every feature when ``n_features + 1 ≤ max_dense``, and then none). The three
points and two levels need six Hessians' worth of accumulators per model: when the budget
refuses them, fewer points, then one level. Measured (hinge, tol 1e-3): a9a 5 passes for 4
steps, mushrooms 13 for 10 (at one point and speculating near a level's end: 8 and 23).
``fused=False``: a trial pass and an evaluation pass per step (spec §4.3's accounting); both
modes make the same iterates. ``n_iter`` counts Newton steps. When the whole store fits 40%
of the RAM slab's room (in memory) and its rows are long, the passes sum no Hessian: every
row stays in RAM and after the pass each model's Hessians are summed there at its accepted
point only, bit for bit the pass's sums (:mod:`._newton_hessian`; usps 15.1 s → 5.4 s, the
same 19 passes).

Certificate: the relative gap between the best primal value evaluated (the model returned
is that point) and the best dual bound, both exact:

* ``β_i = C_i ℓ'(z_i)`` (``j'_α`` for the hinge, ``2 max(0, z_i)`` for the squared hinge) is
  dual feasible (with a free bias, the heavier class side scaled so that ``Σ β_i y_i =
  0``): ``D(β) = Σ β_i − [Σ β_i²/(4C_i)] − Σ_j ½ max(0, |v_j| − ρ)² − ½v_b²`` with ``v =
  Σ β_i y_i x̄_i`` (the gradient's own sum; the bracket for the squared hinge only). For the
  squared hinge this gap is zero at the optimum; for the hinge it is not (a primal iterate
  does not pin down the free support vectors' duals: on usps it stalls near 2e-3), hence:
* the polish (hinge, ``polish=True``, regularized bias): once ``α ≤ band/2`` every pass
  marks the rows with ``|z_i| ≤ band`` at its first point, the scheduler collects them as
  resident rows in RAM, and the pass sums ``u = Σ C_i y_i x̄_i`` over the rows past the
  band (``z_i > band``); after the pass, every model whose new iterate was evaluated is
  polished (polishing only once a level was solved took more passes: usps 29 against 19,
  for more time on the host: 8 s against 16 s in RAM). On the host, the hinge dual
  restricted to the resident rows, every other row's dual at its bound (``C_i`` past the
  band, 0 before), is solved from the last polish's duals of the rows that were near then
  (a per-row state, ``newton.a``, NaN for the others) and the smoothed duals of the rest.
  With ρ = 0 it is dcd's dual with ``w`` offset by ``u``, a box QP: an interior point
  solves it exactly on dense rows past ``C·R² = 100`` (usps, pendigits: :mod:`._newton_qp`),
  dcd's in-memory epochs elsewhere (class by class, shrinking, to a projected-gradient
  spread of 1e-4, at most 300 epochs, fewer on long rows), the interior point or L-BFGS-B
  where they stall; with ℓ1, L-BFGS-B. Any such point is dual feasible, so
  ``D`` is a bound at once; ``soft(u + Σ a_i y_i x̄_i, ρ)`` is a primal candidate whose value
  the next pass evaluates alongside its own work. Once the iterate's partition of the rows
  is right, the candidate is the optimum. Its row visits are reported as ``polish_passes``
  (the resident rows' work is not a pass over the store: issue 12).
  Bounded work, and the band under a memory budget: :mod:`._newton_polish`'s doc.

The history adds ``alpha`` (the largest level), ``smoothing_bound`` (``Σ_c α_c/2·Σ C_i``: how
far ``F_α`` can be above ``P``) and ``polish_passes``.

One-vs-rest: every model shares each pass; a model whose gap reaches ``tol`` stops.

Code: this module plans the passes; a pass's sums and its block kernel are
``_newton_pass``'s, each model's step (direction, line search, Armijo, levels)
``_newton_step``'s, the bounds ``_newton_certificate``'s and the polish ``_newton_polish``'s.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import InvalidParameterError
from ..problem import Problem
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, COMMON_PARAMS, Param, Solver,
                    register)
from ._blas import small_blas
from ._newton_pass import (HIST_BINS, accumulators, band_that_fits, fit_hessians,
                           newton_block, slots, split_sums, square_hessians,
                           threshold_that_fits)
from ._newton_hessian import (hessian_next_level, hessians_at_accepted, resident_rows,
                              warn_no_room)
from ._newton_step import TRIALS, NewtonSteps, linesearch_l1

__all__ = ["NewtonSolver", "linesearch_l1"]

_POINTS = 3            # trying passes evaluate g and H at the first this many trials
# the polish's band: the full band when its rows fill at most the first share of the RAM
# room, else the widest that fills the second (cg keeps its rows with curvature there too)
_NEAR_SHARES, _CG_NEAR_SHARES = (1.0, 0.7), (0.3, 0.3)


@register("newton")
class NewtonSolver(NewtonSteps, Solver):
    """Smoothed-hinge Newton method with an ℓ1 active set (module doc): the plan of its
    passes; its steps and certificate are :class:`~._newton_step.NewtonSteps`'."""

    summary = ("Newton's method on the smoothed hinge (continuation, certified by an exact "
               "dual polish over resident rows) or the squared hinge, with an optional l1 "
               "term and its active set: about one pass per Newton step")
    # on a dask cluster every pass is a map_reduce; the workers send the rows the polish
    # and cg keep (near the margin, with curvature) into the RAM slab here, where the
    # polish and cg's Hessian-vector products run
    not_distributed = None
    params = (
        C_PARAM,
        Param("loss", "choice", "squared_hinge", "squared_hinge (LIBLINEAR -s 2's problem) or "
              "hinge (smoothed, with continuation; LIBLINEAR -s 3's problem)",
              choices=("hinge", "squared_hinge")),
        BIAS_PARAM,
        Param("l1", "float", 0.0, "weight rho of the l1 term rho*||w||_1 (0: l2 only); w = 0 "
              "once rho >= max_j |2 sum_i C_i y_i x_ij| (no bias)", low=0.0),
        Param("free_bias", "bool", False, "an unregularized intercept instead of the "
              "regularized constant feature"),
        *COMMON_PARAMS,
        CLASS_WEIGHT_PARAM,
        Param("max_dense", "int", 4096, "most Hessian columns per model (active features + "
              "bias); the Hessian covers every feature when n_features + 1 fits", low=2),
        Param("hessian", "choice", "auto", "dense: the Newton system by Cholesky of the "
              "Hessian on max_dense columns at most; cg: Hessian-free, conjugate gradient "
              "over the rows with curvature kept in RAM as resident rows (for wide data); "
              "auto: dense when n_features + 1 <= max_dense or l1 > 0, else cg",
              choices=("auto", "dense", "cg")),
        Param("alpha0", "float", 1.0, "hinge: first smoothing level alpha of j_alpha(z) = "
              "(z + sqrt(alpha^2 + z^2))/2", low=0.0, low_open=True),
        Param("alpha_factor", "float", 4.0, "hinge: alpha <- alpha/alpha_factor once a level "
              "is solved", low=1.0, low_open=True),
        Param("alpha_min", "float", 0.0, "hinge: lowest smoothing level (0: 1/n_rows); the "
              "objective at a level is within alpha/2 per unit of C of "
              "the hinge's", low=0.0),
        Param("polish", "bool", True, "hinge: after each evaluation, solve the hinge dual "
              "exactly over the resident rows with |1 - y w.x| <= band, the others at their "
              "bounds (a dual bound and a primal candidate, no extra pass)"),
        Param("polish_work", "float", 1.0, "hinge: the most work of one polish per model, "
              "as a multiple of a pass's (counted in operations on the rows' entries); the "
              "next polish goes on from its duals (0: up to 300 epochs of coordinate descent "
              "and 500 L-BFGS-B iterations). On dense rows where coordinate descent crawls "
              "(C*R^2 > 100) the polish is an exact interior-point solve instead, at most 40 "
              "iterations, whatever this bound", low=0.0),
        Param("band", "float", 0.5, "hinge: the margin band of the polish's resident rows",
              low=0.0, low_open=True),
        Param("fused", "bool", True, "one pass per Newton step (the Armijo trials and the next "
              "iterate's evaluation in one pass); False: separate trial and evaluation passes"),
    )

    def problem(self, store) -> Problem:
        return Problem(loss=self.loss, C=self.C, class_weight=self.class_weight, bias=self.bias,
                       bias_mode="free" if self.free_bias else "regularized", l1=self.l1,
                       layout="binary" if store.task == "binary" else "ovr")

    def _uses_cg(self, n_features) -> bool:
        if self.hessian != "auto":
            return self.hessian == "cg"
        return self.l1 == 0 and n_features + 1 > self.max_dense

    def check_store(self, store) -> None:
        if self.free_bias and not self.bias:
            raise InvalidParameterError("free_bias=True needs a bias feature: bias must be > 0")
        if self.hessian == "dense" and self.l1 == 0 and store.n_features + 1 > self.max_dense:
            raise InvalidParameterError(
                f"newton with l1=0 keeps every feature active: its Hessian would have "
                f"{store.n_features + 1} columns, more than max_dense={self.max_dense}; raise "
                f"max_dense (k·(n_features+1)²·8 bytes) or use hessian='cg' (or 'auto')")

    # -- setup -------------------------------------------------------------------------
    def start(self, sched) -> None:
        store = sched.store
        binary = store.task == "binary"
        k = self.k = 1 if binary else len(store.classes)
        d = self.d = sched.n_features
        D1 = d + 1
        self.sq = self.loss == "squared_hinge"
        # the Hessian path, its columns, the points and levels per pass the budget holds
        self.cg, self.full_h, self.a, self.P, self.L = fit_hessians(
            sched, k, d, self._uses_cg(d), max_dense=self.max_dense, fused=self.fused, sq=self.sq,
            auto=self.hessian == "auto", points=_POINTS)
        self.prob = self.kernel_costs(store)
        self.unit = store.binary_values
        self.reg = np.ones(D1)
        self.reg[d] = 0.0 if self.free_bias else 1.0
        self.pen = np.full(D1, self.l1)
        self.pen[d] = 0.0
        self.W = self.initial_W(D1, k)
        self.A = self.W != 0                    # (a warm start's non-zero weights: active)
        self.A[d] = True
        if self.l1 == 0:
            self.A[:] = True
        self.blocked = np.zeros((D1, k), dtype=bool)
        self.done = np.zeros(k, dtype=bool)
        self.valid = np.zeros(k, dtype=bool)          # the cache below is at W
        self.level_steps = np.zeros(k, dtype=np.int64)
        self.halvings = np.zeros(k, dtype=np.int64)
        self.amap = np.full((D1, k), -1, dtype=np.int64)
        # the smoothing level of each model (0: the squared hinge is not smoothed)
        self.alpha = np.full(k, 0.0 if self.sq else self.alpha0)
        self.alpha_floor = self.alpha_min if self.alpha_min > 0 else 1.0 / max(1, sched.n_rows)
        self.alpha_next = np.zeros(k)     # the level of the cache's second slot (0: none)
        # the last evaluation at W (columns: models)
        L = self.L
        self.fs = np.zeros((k, L))                    # Σ C_i j_α
        self.gl = np.zeros((L, D1, k))                # Σ C_i y_i j'_α x̄_i
        self.H = np.zeros((k, L, self.a, self.a))     # Σ C_i j''_α x̄_A x̄_Aᵀ (symmetric)
        self.loss_true = np.zeros(k)
        self.csum = np.zeros(k)
        self.hdiag = np.zeros((D1, k))               # diag of Σ C_i j'' x̄_i x̄_iᵀ (cg)
        # the certificate: the best primal point evaluated and the best dual bound so far
        self.primal, self.dual, self.gap = np.full(k, np.inf), np.full(k, -np.inf), \
            np.full(k, np.inf)
        self.Wbest = np.zeros((D1, k))
        # the polish (hinge, regularized bias): its primal candidates, evaluated next pass
        self.polishing = not self.sq and self.polish and not self.free_bias
        self.cand = np.zeros((D1, k))
        self.cand_live = np.zeros(k, dtype=bool)
        # the last pass's rows (and entries) by |z| at E: the polish's band that fits
        self.zhist = np.zeros((k, HIST_BINS, 2))
        self.band_used = -1.0
        self.steps = self.polishes = self.polish_visits = 0
        self.n_rows = sched.n_rows
        self.nnz_per_row = max(1.0, store.nnz / max(1, store.n_rows))
        self._cg_rows = (0, {})
        self.tau = np.zeros(k)     # cg: the curvature below which rows are sampled (below)
        self.rows = resident_rows(self, sched, k)      # (and lazy_h: the Hessians from them)
        self.h_want, self.h_args, self.h_next, self.h_sched = {}, None, {}, None
        self.dec_ratio = np.full(k, np.inf)     # the last Newton decrement ÷ its threshold

    state_arrays = ("W", "A", "blocked", "done", "valid", "level_steps", "halvings",
                    "amap", "alpha", "alpha_next", "fs", "gl", "H", "loss_true",
                    "csum", "hdiag", "primal", "dual", "gap", "Wbest", "cand", "cand_live",
                    "zhist", "tau")
    state_values = ("steps", "polishes", "polish_visits", "band_used")
    state_version, warm_start = 2, True
    history_extras = ("alpha", "smoothing_bound", "polish_passes", "polish_band")

    def state_dict(self):
        hessian_next_level(self, range(self.k))   # (a resumed run could not sum them)
        arrays, meta = super().state_dict()
        if self.rows is not None:              # cg keeps its rows in RAM between steps
            self.rows.save_into(arrays, meta)
        return arrays, meta

    def load_state_dict(self, arrays, meta) -> None:
        super().load_state_dict(arrays, meta)
        if self.rows is not None:
            self.rows.load_from(arrays, meta)

    def close(self) -> None:
        if self.rows is not None:
            self.rows.close()

    @property
    def n_iter(self) -> int:
        return self.steps

    def coef(self):
        """The best primal point evaluated (the certificate's)."""
        return self.Wbest[:-1].T.copy(), self.Wbest[-1] * self.bias

    # -- one outer iteration: decide, one pass, absorb ------------------------------------
    @small_blas
    def step(self, sched) -> dict:
        requests = {c: self._decide(c) for c in range(self.k) if not self.done[c]}
        requests = {c: r for c, r in requests.items() if r is not None}
        if not requests:                      # every model certified
            return self._entry("eval")
        res, E = self._pass(sched, requests)
        kind = "try" if any(r[0] == "try" for r in requests.values()) else "eval"
        self._absorb_candidates(res)
        for c, r in requests.items():
            if r[0] == "eval":
                self._absorb(c, res, E[:, c])
            else:
                self._absorb_trials(c, r, res, E)
        if self.lazy_h:                      # the accepted points' Hessians, from the rows
            hessians_at_accepted(self, sched)
        self._polish(sched, res, E)
        return self._entry(kind)

    @small_blas
    def final_check(self, sched) -> dict:
        stale = [c for c in range(self.k) if not self.valid[c]]
        if stale:
            res, E = self._pass(sched, {c: ("eval",) for c in stale})
            self._absorb_candidates(res)
            for c in stale:
                self._absorb(c, res, E[:, c])
            self._polish(sched, res, E, final=True)
        return self._entry("eval")

    def _entry(self, kind) -> dict:
        entry = {"kind": kind, "primal": float(self.primal.sum()),
                 "dual": float(self.dual.sum()), "gap": float(self.gap.max()),
                 "exact": bool(self.valid.all()),
                 "active": int((self.Wbest[:-1] != 0).any(axis=1).sum())}
        # hinge: the smoothing level, the bound α/2·Σ C_i on what smoothing adds to the
        # objective, and the polish's visits of resident rows in passes (not store passes)
        entry["alpha"] = float(self.alpha.max())
        entry["smoothing_bound"] = float((self.alpha * self.csum).sum() / 2)
        entry["polish_passes"] = self.polish_visits / max(1, self.n_rows)
        entry["polish_band"] = self.band_used        # −1: no polish's rows kept
        return entry

    # -- the pass ---------------------------------------------------------------------
    def _pass(self, sched, requests):
        """One pass for ``requests`` (module doc, "Passes"): each step's Armijo trials and
        evaluations at its first points (``E``: the first), or at ``W``: ``(sums, E)``."""
        k, D1 = self.k, self.d + 1
        Dir = np.zeros((D1, k))
        E = self.W.copy()
        trials = np.zeros((k, TRIALS))
        n_trials = np.zeros(k, dtype=np.int64)
        n_points = np.zeros(k, dtype=np.int64)
        live = np.zeros(k, dtype=bool)
        for c, r in requests.items():
            live[c] = True
            n_points[c] = 1
            if r[0] == "try":
                _, d, s_list, e = r[:4]
                Dir[:, c] = d
                trials[c] = s_list
                n_trials[c] = TRIALS
                n_points[c] = self.P if self.fused else 0    # unfused: the cache is at w
                if self.fused:
                    E[:, c] = e
            if not self.cg:
                self._set_amap(c)
        nxt = np.maximum(self.alpha / self.alpha_factor, self.alpha_floor)
        alphas, cutoff = slots(self.alpha, nxt, self.L, n_points, self.prob, self.sq)
        P = max(1, int(n_points.max()))
        acc = accumulators(k, D1, 1 if self.lazy_h else self.a, P, alphas.shape[1], TRIALS,
                           free_bias=self.free_bias, polish=self.polishing, cg=self.cg)
        polish = None
        if self.rows is not None:
            self.rows.leave_ram()
            room = self.rows.ram_room()            # the RAM slab's room, none held
            warn_no_room(self, sched, room)
        if self.polishing:
            # the rows near the margin at E are kept (band < 0: not this model's turn), in a
            # band that fits the RAM slab (cg: besides its rows with curvature)
            fit = band_that_fits(self.zhist, self.band, self.rows.ram_bytes, room,
                                 _CG_NEAR_SHARES if self.cg else _NEAR_SHARES)
            band = np.where(live & (self.alpha <= self.band / 2), fit, -1.0)
            self.band_used = float(band.max(initial=-1.0))
            polish = (band, self.cand.copy(), self.cand_live.copy(), self.band)
        hess = "cg" if self.cg else "lazy" if self.lazy_h else "full" if self.full_h else "active"
        sample = self.tau if self.cg else None      # (the rows with curvature sampled)
        trying = bool(n_trials.any())
        # W, Dir and E side by side (newton_margins), and the candidate the polish evaluates
        WDE = np.hstack((self.W, Dir, E)) if trying else None
        live_cand = trying and polish is not None and bool(polish[2].any())
        args = (self.W, (Dir, E, np.hstack((WDE, polish[1])) if live_cand else WDE), trying,
                self.prob, float(self.bias), self.unit,
                (live, trials, n_trials, alphas, n_points), self.amap, cutoff, self.free_bias,
                polish, (hess, sample))
        if self.lazy_h:                     # what the Hessians after the pass need
            self.h_args = ((self.W.copy(), (Dir, E, WDE), *args[2:7], self.amap.copy(),
                            cutoff, self.full_h),
                           (P, alphas.shape[1], TRIALS))
        if self.rows is not None:
            self.rows.collect_to = "ram" if self.cg or self.lazy_h or (
                polish is not None and (polish[0] >= 0).any()) else None
            res = sched.map_reduce(newton_block, args=args, acc=acc, states=self.states,
                                   rows=self.rows)
            sched.finish_collect()
            self.zhist = res["zhist"] if self.polishing else self.zhist
            if self.cg:            # the next pass keeps a share that fits the RAM slab
                near = res["nearsize"] if self.polishing else np.zeros(2)
                room = 0.7 * room - float(self.rows.ram_bytes(near[0], near[1]))
                self.tau = threshold_that_fits(res["hhist"], self.rows.ram_bytes,
                                               max(room, 0.0))
        else:
            res = sched.map_reduce(newton_block, args=args, acc=acc)
        split_sums(res, k, alphas.shape[1], self.cg, self.polishing)
        res["alphas"], res["n_points"] = alphas, n_points
        res["H"] = square_hessians(res["H"])                           # (k, L, a, a)
        return res, E

    def _polish(self, sched, res, E, final=False) -> None:
        """The polish over the resident rows near the margin at ``E`` (the pass collected
        them; module doc): a dual bound now, a primal candidate for the next pass."""
        if not self.polishing or self.rows.ram is None or (
                self.lazy_h and not (self.rows.ram.local["newton.near"] & 1).any()):
            return                             # (no row near the margin kept)
        # its row visits are the history's polish_passes, not passes over the store: 0
        sched.sweep(self._polish_on, sched, res, E, final, over=self.rows)
        self.polishes += 1
        if not (self.cg or self.lazy_h):       # their directions use the rows until the next pass
            self.rows.leave_ram()
