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
The rows stay in RAM until the next pass (and are recorded in checkpoints). When they did
not all fit the RAM slab, the next pass keeps a share ``p`` of them (70% of the room, by the
bytes the pass counted) drawn by row id, with their curvatures weighted by ``1/p``
(subsampled Newton-CG: the Hessian estimate is unbiased, Armijo guards the step); with no
rows at all (the first pass of a store too big for the room, or no room), the step is a
Jacobi step ``−g / (1 + diag H)`` that Armijo scales. The next smoothing level is not speculated in this mode (one level's rows only).

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
modes make the same iterates. ``n_iter`` counts Newton steps.

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
  With ρ = 0 it is dcd's dual with ``w`` offset by ``u``, so dcd's in-memory epochs (class
  by class, shrinking, at most 300 epochs to a projected-gradient spread of 1e-4) run
  first, and L-BFGS-B with box constraints takes over where they hit their limit
  (ill-conditioned rows: usps, pendigits) and with ℓ1. Any such point is dual feasible, so
  ``D`` is a bound at once; ``soft(u + Σ a_i y_i x̄_i, ρ)`` is a primal candidate whose value
  the next pass evaluates alongside its own work. Once the iterate's partition of the rows
  is right, the candidate is the optimum. Its row visits are reported as ``polish_passes``
  (the resident rows' work is not a pass over the store: issue 12). When the rows do not
  fit the memory budget, no polish runs that pass.

The history adds ``alpha`` (the largest level), ``smoothing_bound`` (``Σ_c α_c/2·Σ C_i``: how
far ``F_α`` can be above ``P``) and ``polish_passes``.

One-vs-rest: every model shares each pass; a model whose gap reaches ``tol`` stops.
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.linalg
import scipy.optimize
import scipy.sparse

from ..exceptions import InvalidParameterError
from ..kernels import csr_matmat, csr_matvec, csr_rmatmat_add, csr_rmatvec_add
from ..kernels._csr import row_sq_norms
from ..kernels._dcd import dcd_classes_epochs
from ..kernels._newton import newton_hess_add, newton_rows, smooth_hinge, symmetrize_lower
from ..problem import Problem
from ..schedule import Accumulator, Need, RowField
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, COMMON_PARAMS, Param, Solver,
                    register)

__all__ = ["NewtonSolver", "linesearch_l1"]

log = logging.getLogger(__name__)

_C1 = 1e-4              # Armijo constant (spec §3.2)
_TRIALS = 8             # Armijo trials per pass (s, s/2, …)
_MAX_HALVINGS = 30      # then the level is given up (spec §3.3)
_MAX_STEPS = 50         # Newton steps before an activation round (spec §3.2)
_ETA = 1e-3             # a smoothing level is solved once dec ≤ η·α·Σ C_i (spec §3.6) ...
_ETA_FIRST = 0.1        # ... η = this at alpha0, tightening with α down to _ETA
_CUTOFF = 1e-6          # Hessian rows with curvature below this share of the peak C/(2α)
_POLISH_ITERS = 500     # most L-BFGS-B iterations of one polish (with l1)
_POLISH_EPOCHS = 300    # most dual coordinate descent epochs of one polish (l2), then L-BFGS-B
_POLISH_EPS = 1e-4      # ... which stop at this projected-gradient spread
_DENSE_SHARE = 0.25     # blocks with more nonzeros than this share: the Hessian by BLAS
_COPY_NNZ = 2_000_000   # the polish copies a model's rows up to this many entries
_CG_RTOL = 0.1          # cg: the Newton system solved to this relative residual
_CG_ITERS = 50          # ... in at most this many Hessian-vector products (resident rows)
_POINTS = 3            # trying passes evaluate g and H at the first this many trials


@register("newton")
class NewtonSolver(Solver):
    """Smoothed-hinge Newton method with an ℓ1 active set (module doc)."""

    summary = ("Newton's method on the smoothed hinge (continuation, certified by an exact "
               "dual polish over resident rows) or the squared hinge, with an optional l1 "
               "term and its active set: about one pass per Newton step")
    params = (
        C_PARAM,
        Param("loss", "choice", "hinge", "hinge (smoothed, with continuation; LIBLINEAR -s 3's "
              "problem) or squared_hinge (LIBLINEAR -s 2's problem)",
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
        Param("alpha_min", "float", 0.0, "hinge: lowest smoothing level (0: 1/n_rows, the "
              "spec's choice); the objective at a level is within alpha/2 per unit of C of "
              "the hinge's", low=0.0),
        Param("polish", "bool", True, "hinge: after each evaluation, solve the hinge dual "
              "exactly over the resident rows with |1 - y w.x| <= band, the others at their "
              "bounds (a dual bound and a primal candidate, no extra pass)"),
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

    def check_distributed(self, store) -> None:
        """On a dask cluster: the dense-Hessian path without the polish (its resident rows
        and the hinge polish's dual CD live in the training process)."""
        if self._uses_cg(store.n_features):
            raise InvalidParameterError(
                f"newton cannot train on a dask cluster with the Hessian-free path (hessian="
                f"{self.hessian!r}, {store.n_features} features): its rows with curvature are "
                f"kept in the training process; use alm or nesvm there")
        if self.loss == "hinge" and self.polish and not self.free_bias:
            raise InvalidParameterError("newton (hinge) cannot train on a dask cluster with "
                                        "polish=True (the polish solves a dual over rows kept "
                                        "in the training process); pass polish=False")

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
        self.cg = self._uses_cg(d)
        self._fit_hessians(sched)
        Cp, Cn = self.problem(store).costs(store.classes, store.label_counts)
        pos = np.array([1], np.int32) if binary else np.arange(k, dtype=np.int32)
        self.prob = (pos, Cp, Cn, self.sq)
        self.unit = store.binary_values
        self.reg = np.ones(D1)
        self.reg[d] = 0.0 if self.free_bias else 1.0
        self.pen = np.full(D1, self.l1)
        self.pen[d] = 0.0
        self.W = np.zeros((D1, k))
        self.A = np.zeros((D1, k), dtype=bool)
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
        self.steps = self.polishes = self.polish_visits = 0
        self.n_rows = sched.n_rows
        self._cg_rows = (0, {})
        self.sample_p = 1.0        # cg: the share of the rows with curvature kept (below)
        self.rows = None
        if self.polishing or self.cg:
            # resident rows: 1 = near the margin (the polish), 2 = with curvature (cg)
            self.near = sched.state("newton.near", np.uint8, width=k)
            states = (self.near,)
            if self.cg:                         # with each row's curvature per model
                self.hrow = sched.state("newton.h", np.float32, width=k)
                states += (self.hrow,)
            if self.polishing:                  # the last polish's duals (NaN: not near)
                self.apol = sched.state("newton.a", np.float32, width=k, fill=np.nan)
                states += (self.apol,)
            self.states = states
            # per resident row besides: the polish's and CG's work arrays (‖x̄_i‖², an order
            # and an index; per model a dual and a margin) and, for the state not kept (the
            # curvature or the polish's dual), a float32 per model all the same
            self.rows = sched.resident_rows(
                self.near, states, fields=(RowField("float64", 3), RowField("float64", 2 * k),
                                           RowField("float32", k * (3 - len(states)))),
                ram=True, disk=False)

    def _fit_hessians(self, sched) -> None:
        """The Hessian path (dense or cg), its columns ``a``, the smoothing levels ``L`` and
        the points ``P`` per pass whose Hessians the budget holds.

        A pass sums ``P·L`` Hessians of ``a²`` entries per model into run accumulators
        (one array per level of the reduction tree, which the scheduler counts), reorders them
        into one copy, keeps ``L`` between passes, and the Newton system takes two ``a×a``
        copies. Fewer points, then one level, when they do not fit; with ``hessian="auto"``
        the Hessian-free path when not even one fits (a dense Hessian of ``n_features + 1``
        columns over a small budget), on a cluster the budget is refused.
        """
        D1 = self.d + 1
        while True:
            self.full_h = D1 <= self.max_dense and not self.cg
            self.a = 1 if self.cg else D1 if self.full_h else self.max_dense
            # smoothing levels per evaluation point (kernels/_newton.py): the hinge can
            # speculate the next level α/β (cg works from the rows of one level); points per
            # trying pass: the first _POINTS Armijo trials (one when unfused, or with cg)
            top = (1 if self.cg or not self.fused else _POINTS, 1 if self.sq or self.cg else 2)
            self.P, self.L = top
            refused = self._shrink_to_budget(sched)
            if refused is None:
                break
            if self.cg or self.hessian != "auto" or sched.remote:
                raise refused
            log.info("newton: dense Hessians of %d columns do not fit the memory budget: "
                     "the Hessian-free (cg) path (%s)", self.a, refused)
            self.cg = True
        if (self.P, self.L) != top:
            log.info("newton: the budget leaves room for Hessians at %d point(s) and %d "
                     "level(s) per pass", self.P, self.L)

    def _shrink_to_budget(self, sched):
        """Fewer points, then one level, until :meth:`_needs` fits the budget; the refusal
        when not even one point at one level fits, else None."""
        while True:
            try:
                sched.check_budget("newton", self._needs())
                return None
            except InvalidParameterError as exc:
                if self.P == 1 and self.L == 1:
                    return exc
                if self.P > 1:
                    self.P -= 1
                else:
                    self.L = 1

    def _needs(self) -> dict:
        """What must stay in memory for the Hessian path chosen (:meth:`_fit_hessians`)."""
        k, D1, a, P, L = self.k, self.d + 1, self.a, self.P, self.L
        sums = (Need((L * P, D1, k), per_pass=True), Need((k, a, a, L * P), per_pass=True))
        return {"the models and their gradients": Need((D1, k), count=7 + L),
                "the Hessians kept between passes": Need((k, L, a, a)),
                "the pass's gradient and Hessian sums": sums,
                "their reordered copy and the Newton system":
                    (Need((L * P, D1, k)), Need((k, a, a, L * P)), Need((a, a), count=2))}

    state_arrays = ("W", "A", "blocked", "done", "valid", "level_steps", "halvings",
                    "amap", "alpha", "alpha_next", "fs", "gl", "H", "loss_true",
                    "csum", "hdiag", "primal", "dual", "gap", "Wbest", "cand", "cand_live")
    state_values = ("steps", "polishes", "polish_visits", "sample_p")
    history_extras = ("alpha", "smoothing_bound", "polish_passes")

    def state_dict(self):
        arrays, meta = super().state_dict()
        if self.rows is not None:              # cg keeps its rows in RAM between steps
            self.rows.save_into(arrays, meta)
        return arrays, meta

    def load_state_dict(self, arrays, meta) -> None:
        super().load_state_dict(arrays, meta)
        if self.rows is not None:
            self.rows.load_from(arrays, meta)

    def close(self) -> None:
        if getattr(self, "rows", None) is not None:
            self.rows.close()

    @property
    def n_iter(self) -> int:
        return self.steps

    def coef(self):
        """The best primal point evaluated (the certificate's)."""
        return self.Wbest[:-1].T.copy(), self.Wbest[-1] * self.bias

    # -- one outer iteration: decide, one pass, absorb ------------------------------------
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
        self._polish(sched, res, E)
        return self._entry(kind)

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
        return entry

    # -- the pass ---------------------------------------------------------------------
    def _pass(self, sched, requests):
        k, D1 = self.k, self.d + 1
        Dir = np.zeros((D1, k))
        E = self.W.copy()
        trials = np.zeros((k, _TRIALS))
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
                n_trials[c] = _TRIALS
                n_points[c] = self.P if self.fused else 0    # unfused: the cache is at w
                if self.fused:
                    E[:, c] = e
            if not self.cg:
                self._set_amap(c)
        # evaluation slots: point p (trial p, or w) × level (α, and α/β when speculated)
        P, Lv = max(1, int(n_points.max())), self.L
        alphas = np.repeat(self.alpha[:, None], Lv, axis=1)
        if self.sq:                             # every row with z_i > 0 has curvature 2C_i
            cutoff = np.zeros((k, Lv))
        else:                                   # the rows far from the margin add ~nothing
            if Lv > 1:                          # the next level, speculated
                alphas[:, 1] = np.maximum(self.alpha / self.alpha_factor, self.alpha_floor)
            peak = np.maximum(self.prob[1], self.prob[2])[:, None] / (2 * alphas)
            cutoff = _CUTOFF * peak
            cutoff[:, 1:][alphas[:, 1:] == alphas[:, :1]] = np.inf    # no level left: no H
        alphas, cutoff = np.tile(alphas, (1, P)), np.tile(cutoff, (1, P))
        for p in range(1, P):                   # no Hessian at the points a model skips
            cutoff[n_points <= p, p * Lv:] = np.inf
        L = P * Lv
        plan = (live, trials, n_trials, alphas, n_points)
        acc = {"ftry": Accumulator((k, _TRIALS)), "f": Accumulator((k, L)),
               "sb": Accumulator((k, L)), "sbpos": Accumulator((k, L)),
               "loss": Accumulator((k, P)), "csum": Accumulator(k),
               "g": Accumulator((L, D1, k)), "H": Accumulator((k, self.a, self.a, L))}
        if self.free_bias:
            acc["gpos"] = Accumulator((L, D1, k))
        polish = None
        if self.polishing:
            # the rows near the margin at E are kept (band < 0: not this model's turn)
            band = np.where(live & (self.alpha <= self.band / 2), self.band, -1.0)
            polish = (band, self.cand.copy(), self.cand_live.copy())
            acc.update(u=Accumulator((D1, k)), usum=Accumulator(k), closs=Accumulator(k))
        if self.cg:
            # [rows with curvature, their entries, rows near the margin, their entries]
            acc.update(hdiag=Accumulator((D1, k)), rowsize=Accumulator(4))
        hess = "cg" if self.cg else "full" if self.full_h else "active"
        sample = self.sample_p if self.cg else None      # (the share of them kept)
        args = (self.W, Dir, E, bool(n_trials.any()), self.prob, float(self.bias), self.unit,
                plan, self.amap, cutoff, self.free_bias, polish, (hess, sample))
        if self.rows is not None:
            self.rows.leave_ram()
            self.rows.collect_to = "ram" if self.cg or (polish[0] >= 0).any() else None
            states = self.states
            res = sched.map_reduce(_newton_block, args=args, acc=acc, states=states,
                                   rows=self.rows)
            sched.finish_collect()
            if self.cg:            # the next pass keeps a share that fits the RAM slab
                size = res["rowsize"]
                self.sample_p = self.rows.share_that_fits(size[:2], size[2:], 0.7)
        else:
            res = sched.map_reduce(_newton_block, args=args, acc=acc)
        res["alphas"], res["n_points"] = alphas, n_points
        H = res["H"] = np.ascontiguousarray(res["H"].transpose(0, 3, 1, 2))   # (k, L, a, a)
        for c in range(k):
            for lv in range(L):
                symmetrize_lower(H[c, lv])
        return res, E

    def _set_amap(self, c) -> None:
        """Model ``c``'s Hessian columns: every feature when they fit, else ``A``."""
        cols = np.arange(self.d + 1) if self.full_h else np.flatnonzero(self.A[:, c])
        if len(cols) > self.a:
            raise InvalidParameterError(
                f"newton: {len(cols)} active features exceed max_dense={self.max_dense}; raise "
                f"max_dense or l1")
        self.amap[:, c] = -1
        self.amap[cols, c] = np.arange(len(cols))

    def _bound(self, c, primal=None, w=None, dual=None) -> None:
        """A primal value at ``w`` and/or a dual bound for model ``c``: keep the best of
        each, the certified gap is theirs."""
        if primal is not None and primal < self.primal[c]:
            self.primal[c] = primal
            self.Wbest[:, c] = w
        if dual is not None:
            self.dual[c] = max(self.dual[c], dual)
        self.gap[c] = (self.primal[c] - self.dual[c]) / max(abs(self.primal[c]), 1e-300)

    def _absorb(self, c, res, w, p=0) -> None:
        """The evaluation at point ``p`` of the pass (``w``) becomes model ``c``'s cache."""
        slots = slice(p * self.L, (p + 1) * self.L)
        self.fs[c] = res["f"][c, slots]
        self.gl[:, :, c] = res["g"][slots, :, c]
        self.H[c] = res["H"][c, slots]
        self.loss_true[c] = res["loss"][c, p]
        self.csum[c] = res["csum"][c]
        if self.cg:
            self.hdiag[:, c] = res["hdiag"][:, c]
        self.valid[c] = True
        nxt = res["alphas"][c, slots.stop - 1]
        self.alpha_next[c] = nxt if nxt != self.alpha[c] else 0.0
        self._bound_point(c, res, w, p)

    def _bound_point(self, c, res, w, p) -> None:
        """The primal value at point ``p`` (``w``) and the dual bounds of its slots."""
        self._bound(c, self._penalties(w) + res["loss"][c, p], w,
                    max(self._dual(c, lv, res, p) for lv in range(p * self.L,
                                                                 (p + 1) * self.L)))

    def _dual(self, c, lv, res, p) -> float:
        """``D(β)`` at ``β_i = C_i j'(z_i)`` of slot ``lv`` (at point ``p``; module doc)."""
        v = res["g"][lv, :, c].copy()
        sb = res["sb"][c, lv]
        if self.free_bias:                     # scale the heavier side: Σ β_i y_i = 0
            vpos = res["gpos"][lv, :, c]
            sp = res["sbpos"][c, lv]
            sn = sb - sp
            if sp > sn:
                v = (sn / sp) * vpos + (v - vpos) if sp > 0 else v - vpos
                sb = 2.0 * sn
            else:
                v = vpos + (sp / sn) * (v - vpos) if sn > 0 else vpos
                sb = 2.0 * sp
            v[-1] = 0.0
        soft = _soft(v[:-1], self.l1)
        dual = sb - 0.5 * float(soft @ soft) - 0.5 * self.reg[-1] * v[-1] ** 2
        # squared hinge: Σ β_i²/(4C_i) = Σ C_i max(0, z_i)², the loss at E
        return dual - res["loss"][c, p] if self.sq else dual

    # -- the polish (hinge) -------------------------------------------------------------
    def _absorb_candidates(self, res) -> None:
        """The primal values of the last polish's candidates (evaluated by this pass)."""
        if not self.polishing:
            return
        for c in np.flatnonzero(self.cand_live):
            w = self.cand[:, c]
            self._bound(c, self._penalties(w) + res["closs"][c], w)
        self.cand_live[:] = False

    def _polish(self, sched, res, E, final=False) -> None:
        """The hinge dual over the resident rows near the margin at ``E`` (the pass
        collected them), every other row's dual at its bound (C_i past the band, 0 before),
        solved by L-BFGS-B with box constraints: a dual bound now, and ``soft(v)`` a primal
        candidate for the next pass (module doc)."""
        if not self.polishing or self.rows.ram is None:
            return
        # its row visits are the history's polish_passes, not passes over the store: 0
        sched.sweep(self._polish_on, sched, res, E, final, over=self.rows)
        self.polishes += 1
        if not self.cg:                        # cg's directions use the rows until the next pass
            self.rows.leave_ram()

    def _polish_on(self, sl, sched, res, E, final) -> int:
        """:meth:`_polish` over the resident rows ``sl``."""
        near = (sl.local["newton.near"] & 1).astype(bool)
        B, d = float(self.bias), self.d
        pos, Cp, Cn, _ = self.prob
        # only at a model's iterate once its level is solved (not at a rejected first
        # trial: the partition of a poor iterate makes a poor bound)
        todo = [c for c in np.flatnonzero(near.any(axis=0))
                if final or (self.valid[c] and not self.done[c])]
        subs = {}
        for c in todo:
            r = np.flatnonzero(near[:, c])
            yc = np.where(sl.y[r] == pos[c], 1.0, -1.0)
            Cc = np.where(yc > 0, Cp[c], Cn[c])
            Z = _SlabRows(sl.X, r, yc, B, d)                 # rows y_i x̄_i, no copy
            jz = np.empty((len(r), 3))
            smooth_hinge(1.0 - Z.dot(E[:, c]), float(self.alpha[c]), jz)
            # warm start: the last polish's duals of the rows that were near then, the
            # smoothed duals at E of the others
            last = sl.local["newton.a"][r, c].astype(np.float64)
            a0 = np.where(np.isnan(last), Cc * jz[:, 1], np.clip(last, 0.0, Cc))
            subs[c] = (r, Z, Cc, a0)
        # ℓ2: dual coordinate descent first (the restricted dual is dcd's, offset by u);
        # L-BFGS-B for ℓ1 and where coordinate descent crawls, from where it stopped
        found, crawled = self._polish_cd(sched, sl, subs, res["u"]) if self.l1 == 0 and todo \
            else ({c: subs[c][3] for c in todo}, todo)
        for c in crawled:
            r, Z, Cc, _ = subs[c]
            found[c], nfev = _polish_dual(Z, res["u"][:, c], self.pen, found[c], Cc)
            self.polish_visits += nfev * len(r)
        for c, a in found.items():
            sl.local["newton.a"][subs[c][0], c] = a
            w = _soft(res["u"][:, c] + subs[c][1].tdot(a), self.pen)
            self._bound(c, dual=res["usum"][c] + float(a.sum()) - 0.5 * float(w @ w))
            self.cand[:, c] = w
            self.cand_live[c] = True
        return 0

    def _polish_cd(self, sched, sl, subs, u) -> dict:
        """The restricted hinge duals of the models in ``subs`` (ℓ2 only) by dual
        coordinate descent (dcd's in-memory epochs, class by class, with shrinking) over
        the resident rows, from the smoothed duals, with ``w`` started at ``u + Zᵀa``:
        ``({c: a}, the models whose epochs stopped at the visit limit)``. Any ``a`` in the
        box is dual feasible: the epochs only sharpen it."""
        k, d, n, B = self.k, self.d, sl.n_rows, float(self.bias)
        classes = np.array(sorted(subs), dtype=np.int64)
        alpha, active = np.zeros((k, n)), np.zeros((k, n), np.uint8)
        W, wb = np.zeros((k, d)), np.zeros(k)
        limit = np.zeros(k, dtype=np.int64)
        for c in classes:
            r, Z, _, a0 = subs[c]
            alpha[c, r], active[c, r] = a0, 1
            v = u[:, c] + Z.tdot(a0)
            W[c], wb[c] = v[:d], v[d]
            limit[c] = _POLISH_EPOCHS * len(r)
        qd = np.empty(n, np.float32)
        row_sq_norms(sl.X, B * B, qd)
        pos, Cp, Cn, _ = self.prob
        eps = np.full(k, _POLISH_EPS)
        for rnd in range(2):                   # then once more with every row un-shrunk
            if rnd:
                for c in classes:
                    active[c, subs[c][0]] = 1
            pg, info, cert = np.zeros((k, 3)), np.zeros((k, 6)), np.zeros((k, 2))
            seeds = sched.rng(self.polishes, rnd).integers(2**63, size=k, dtype=np.uint64)
            shrink = (np.full(k, np.inf), np.full(k, -np.inf))
            plan = np.zeros((k, 3), dtype=np.int64)
            plan[:, 1] = limit              # no stop on the (unused) gap estimate
            dcd_classes_epochs(sl.X, self.unit, sl.y, qd,
                               (alpha, active, np.zeros((k, n), np.float32)),
                               (W, wb, np.zeros((k, d)), np.zeros((k, 2))),
                               (pos, Cp, Cn, False, B), shrink,
                               (classes, True, limit, -np.inf, 1, eps, plan, False), seeds,
                               (np.empty(n, np.int64), np.empty((1, 3)), np.empty((1, 4)),
                                np.empty(5)), (pg, cert, info))
            self.polish_visits += int(info[classes, 1].sum())
        crawled = [int(c) for c in classes if info[c, 1] >= limit[c]]
        return {c: alpha[c, subs[c][0]] for c in subs}, crawled

    def _eta(self, c) -> float:
        """The level's η: loose at the first levels (their smoothing is far above the
        answer's accuracy), ``_ETA`` at the last ones."""
        return max(_ETA, _ETA_FIRST * self.alpha[c] / self.alpha0)

    def _absorb_trials(self, c, request, res, E) -> None:
        """Armijo on the trials of model ``c``'s step: the first accepted one is the new
        iterate (its evaluation is in the pass when it is the first trial)."""
        _, d, s_list, e, D, F0 = request
        w = self.W[:, c]
        npts = int(res["n_points"][c])
        for p in range(npts):                  # every point evaluated bounds the gap
            self._bound_point(c, res, e if p == 0 else w + s_list[p] * d, p)
        accepted = -1
        for t in range(_TRIALS):
            wt = e if t == 0 else w + s_list[t] * d
            Ft = res["ftry"][c, t] + self._penalties(wt)
            if Ft <= F0 + _C1 * s_list[t] * D + 10 * np.finfo(float).eps * abs(F0):
                accepted = t
                break
        if accepted < 0:
            self.halvings[c] += _TRIALS
            if self.halvings[c] >= _MAX_HALVINGS:       # no descent left at this precision
                self.halvings[c] = 0
                self.level_steps[c] = _MAX_STEPS        # an activation round next
            return
        self.W[:, c] = e if accepted == 0 else w + s_list[accepted] * d
        self.steps += 1
        self.level_steps[c] += 1
        self.halvings[c] = 0
        self.blocked[:, c] = False
        if self.l1 > 0:
            self.A[:, c] = self.W[:, c] != 0
            self.A[-1, c] = True
        if accepted < npts:                    # evaluated in this pass (fused)
            self._absorb(c, res, self.W[:, c], accepted)
        else:                                  # the next pass evaluates the new iterate
            self.valid[c] = False

    def _penalties(self, w) -> float:
        return 0.5 * float(self.reg @ (w * w)) + float(self.pen @ np.abs(w))

    # -- the host-side Newton step --------------------------------------------------------
    def _decide(self, c):
        """What model ``c`` needs from the next pass: ``("eval",)``, ``("try", d, trials,
        e, D, F0)``, or None once its gap is certified (spec §3.3's loop until a pass is
        needed)."""
        while True:
            if not self.valid[c]:
                return ("eval",)
            if self.gap[c] <= self.tol:
                self.done[c] = True
                return None
            w = self.W[:, c]
            g = self.reg * w - self.gl[0, :, c]
            d, dec, gt = self._direction(c, w, g)
            scale = max(abs(self.primal[c]), 1.0)
            # a smoothing level is solved (spec §3.6, in C units); the squared hinge has one
            threshold = 0.1 * self.tol * scale if self.sq else \
                self._eta(c) * self.alpha[c] * self.csum[c]
            solved = dec < threshold
            if self.l1 > 0 and (solved or self.level_steps[c] >= _MAX_STEPS):
                new = (w == 0) & ~self.A[:, c] & ~self.blocked[:, c] & (np.abs(g) > self.pen)
                new[-1] = False
                self.level_steps[c] = 0
                if new.any():                  # activation round (spec §3.5)
                    self.A[:, c] |= new
                    if not self.full_h:
                        self.valid[c] = False
                    continue
            if not self.sq and (solved or self.level_steps[c] >= _MAX_STEPS) and \
                    self.alpha[c] > self.alpha_floor:
                # the next level: α ← α/β (spec §3.6), evaluated at the same w — by the
                # last pass already when it speculated that level
                self.alpha[c] = max(self.alpha[c] / self.alpha_factor, self.alpha_floor)
                self.level_steps[c] = self.halvings[c] = 0
                if self.alpha_next[c] == self.alpha[c]:
                    self.fs[c, 0] = self.fs[c, 1]
                    self.gl[0, :, c] = self.gl[1, :, c]
                    self.H[c, 0] = self.H[c, 1]
                    self.alpha_next[c] = 0.0
                    continue
                self.valid[c] = False
                return ("eval",)
            if dec <= 1e-14 * scale:           # no progress left at this precision:
                return ("eval",)               # max_passes ends the run
            A = self.A[:, c]
            b = float(g[A] @ d[A])
            a = 0.5 * float(d[A] @ self._hess_vec(c, A)(d[A]))
            s, Z = linesearch_l1(w, d, b, a, self.pen)
            if s <= 0.0:                       # cannot happen after the orientation check
                return ("eval",)
            s_list = s * 0.5 ** (self.halvings[c] + np.arange(_TRIALS))
            e = w + s_list[0] * d
            if self.halvings[c] == 0:
                e[Z] = 0.0
            sgn0 = np.where(w != 0, np.sign(w), np.sign(d))
            D = b + float(self.pen @ (sgn0 * d))
            F0 = self.fs[c, 0] + self._penalties(w)
            return ("try", d, s_list, e, D, F0)

    def _direction(self, c, w, g):
        """Newton direction on the active features (with the orientation check):
        ``(d, decrement, pseudo-gradient)``."""
        d = np.zeros_like(w)
        while True:
            A = self.A[:, c]
            gt = g.copy()
            if self.l1 > 0:
                nz = w != 0
                gt += np.where(nz, self.pen * np.sign(w), -self.pen * np.sign(g))
            if self.cg:
                dA = _pcg(self._hess_vec(c, A), -gt[A], self.reg[A] + self.hdiag[A, c])
            else:
                HAA = self._dense_hessian(c, A)
                HAA[np.diag_indices_from(HAA)] += self.reg[A]
                dA = _solve(HAA, -gt[A])
            d[:] = 0.0
            d[A] = dA
            if self.l1 == 0:
                break
            bad = A & (w == 0) & (d * g >= 0) & (self.pen > 0)
            if not bad.any():
                break
            self.A[:, c] &= ~bad
            self.blocked[:, c] |= bad
        return d, float(-gt[self.A[:, c]] @ d[self.A[:, c]]), gt

    def _dense_hessian(self, c, A):
        """Model ``c``'s Hessian of the loss on the features ``A`` (a copy)."""
        idx = self.amap[A, c]
        return self.H[c, 0][np.ix_(idx, idx)]

    def _hess_vec(self, c, A):
        """``v ↦ (reg + H)_AA v`` for model ``c`` at its cached evaluation: the dense
        Hessian, or (cg) ``Σ h_i x̄_i x̄_iᵀ`` over the resident rows with curvature, or, when
        they did not fit the memory budget, its diagonal (a Jacobi step)."""
        reg = self.reg[A]
        if not self.cg:
            HAA = self._dense_hessian(c, A)
            return lambda v: reg * v + HAA @ v
        hc = self._curvature_rows(c)
        if hc is None:
            diag = reg + self.hdiag[A, c]
            return lambda v: diag * v
        # Σ h_i x̄_i x̄_iᵀ = X̄ᵀ diag(h) X̄, in place on the slab's CSR (no copies)
        S = _SlabRows(self.rows.ram.X, None, 1.0, float(self.bias), self.d, copy_nnz=-1)
        cols = np.flatnonzero(A)

        def hv(v):
            full = np.zeros(self.d + 1)
            full[cols] = v
            return reg * v + S.tdot(hc * S.dot(full))[cols]
        return hv

    def _curvature_rows(self, c):
        """Model ``c``'s curvature on each row of the RAM slab (cg; 0 on the rows kept
        for other reasons), or None when the pass could not keep them (memory budget)."""
        sl = self.rows.ram
        if sl is None:
            return None
        version, cache = self._cg_rows
        if version != self.rows.ram_version:
            cache = {}
            self._cg_rows = (self.rows.ram_version, cache)
        if c not in cache:
            local = sl.local
            cache[c] = np.where(local["newton.near"][:, c] & 2, local["newton.h"][:, c], 0.0)
        return cache[c]


def _pcg(hv, r, diag, rtol=_CG_RTOL, maxiter=_CG_ITERS):
    """``x ≈ H⁻¹ r`` by conjugate gradient preconditioned with ``diag`` (≈ diag H), to a
    residual of ``rtol·‖r‖`` or ``maxiter`` products ``hv`` (Newton-CG: an inexact
    direction is still one of descent, and Armijo takes care of its length)."""
    x = np.zeros_like(r)
    res = r.copy()
    z = res / diag
    p = z.copy()
    rz = float(res @ z)
    stop = rtol * float(np.linalg.norm(r))
    for _ in range(maxiter):
        if float(np.linalg.norm(res)) <= stop:
            break
        q = hv(p)
        pq = float(p @ q)
        if pq <= 0.0:
            break
        step = rz / pq
        x += step * p
        res -= step * q
        z = res / diag
        rz, rz_old = float(res @ z), rz
        p = z + (rz / rz_old) * p
    return x if x.any() else r / diag


class _SlabRows:
    """The rows ``y_i x̄_i`` (``i`` in ``r``, every row when None) of the RAM slab's CSR
    ``X`` as a linear map: on a copy of these rows when they have at most ``copy_nnz``
    entries (faster when the slab holds other models' rows too), else in place by the CSR
    kernels (a large copy would be charged to no budget: 2.5 GB peak at a 1 GB budget on
    the 3 M-row store)."""

    def __init__(self, X, r, yc, B, d, copy_nnz=_COPY_NNZ):
        self.n = len(X[0]) - 1
        self.X, self.yc, self.B, self.d = X, yc, B, d
        self.r = slice(None) if r is None else r
        self.Z = None
        indptr, indices, data = X
        if r is not None and int((indptr[r + 1] - indptr[r]).sum()) <= copy_nnz:
            vals = np.ones(len(indices), np.float32) if len(data) == 0 else data
            Xs = scipy.sparse.csr_matrix((vals, indices, indptr), shape=(self.n, d))
            Z = scipy.sparse.hstack([Xs[r].astype(np.float64), np.full((len(r), 1), B)],
                                    format="csr")
            self.Z = scipy.sparse.diags(yc) @ Z

    def dot(self, w):
        """``Z w``: one value per row of ``r``."""
        if self.Z is not None:
            return self.Z @ w
        t = np.empty(self.n)
        csr_matvec(self.X, w[:self.d], t)
        return self.yc * (t[self.r] + self.B * w[self.d])

    def tdot(self, a):
        """``Zᵀ a = Σ a_i y_i x̄_i``."""
        if self.Z is not None:
            return self.Z.T @ a
        t = np.zeros(self.n)
        t[self.r] = a * self.yc
        out = np.zeros(self.d + 1)
        csr_rmatvec_add(self.X, t, out[:self.d])
        out[self.d] = self.B * t.sum()
        return out


def _row_uniform(start, n):
    """Uniform numbers in [0, 1) for the global rows ``start … start + n − 1``, a
    function of the row id alone (SplitMix64's finalizer): the same rows are drawn for
    any chunking, and after a resume."""
    z = np.arange(start, start + n, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def _soft(v, pen):
    """``sign(v)·max(|v| − pen, 0)``: the weights of the dual point ``v`` (ℓ1: soft
    thresholding)."""
    return np.sign(v) * np.maximum(np.abs(v) - pen, 0.0)


def _polish_dual(Z, u, pen, a0, Cc):
    """``max_a D(a) = Σ a_i − ½‖soft(u + Zᵀa, pen)‖²`` over ``0 ≤ a ≤ Cc`` by L-BFGS-B from
    ``a0`` (rows of ``Z``: ``y_i x̄_i``): ``(a, function evaluations)``."""
    def fg(a):                                 # −D and its gradient
        w = _soft(u + Z.tdot(a), pen)
        return 0.5 * float(w @ w) - float(a.sum()), Z.dot(w) - 1.0

    opt = scipy.optimize.minimize(
        fg, a0, jac=True, method="L-BFGS-B", bounds=scipy.optimize.Bounds(np.zeros(len(a0)), Cc),
        options={"maxiter": _POLISH_ITERS, "ftol": 1e-15, "gtol": 1e-12})
    return np.clip(opt.x, 0.0, Cc), int(opt.nfev)


def _solve(H, r):
    """``H⁻¹ r`` by Cholesky, with a growing ridge if ``H`` is not numerically positive
    definite."""
    if len(r) == 0:
        return r.copy()
    ridge = 0.0
    scale = max(float(np.trace(H)) / len(r), 1e-300)
    for _ in range(12):
        try:
            f = scipy.linalg.cho_factor(H + ridge * np.eye(len(r)), lower=True,
                                        check_finite=False)
            return scipy.linalg.cho_solve(f, r, check_finite=False)
        except np.linalg.LinAlgError:
            ridge = scale * (1e-10 if ridge == 0 else ridge / scale * 100)
    return np.linalg.lstsq(H, r, rcond=None)[0]


def linesearch_l1(w, d, b, a, pen):
    """``argmin_{s ≥ 0} a s² + b s + Σ_j pen_j |w_j + s d_j|`` (spec §3.4, ``a > 0``):
    ``(s, Z)`` with ``Z`` the coordinates whose breakpoint is the minimizer (set them to 0
    exactly)."""
    empty = np.zeros(0, dtype=np.int64)
    sgn0 = np.where(w != 0, np.sign(w), np.sign(d))
    slope0 = b + float(pen @ (sgn0 * d))
    if slope0 >= 0:
        return 0.0, empty
    K = np.flatnonzero((w != 0) & (d != 0) & (np.sign(w) != np.sign(d)) & (pen > 0))
    if len(K) == 0:
        return -slope0 / (2 * a), empty
    sig = -w[K] / d[K]
    order = np.argsort(sig, kind="stable")
    sig, K = sig[order], K[order]
    jump_i = pen[K] * np.abs(d[K])
    values, first = np.unique(sig, return_index=True)
    jumps = np.add.reduceat(jump_i, first)
    jp = 2 * a * values + slope0 + 2 * np.cumsum(jumps)
    jm = jp - 2 * jumps
    k = int(np.searchsorted(jp >= 0, True))     # first group with j'(σ⁺) ≥ 0
    if k < len(values) and jm[k] <= 0:
        stop = first[k + 1] if k + 1 < len(first) else len(K)
        return float(values[k]), K[first[k]:stop]
    sl, sp = (0.0, slope0) if k == 0 else (float(values[k - 1]), float(jp[k - 1]))
    return sl - sp / (2 * a), empty


def _newton_block(block, views, args, acc):
    """One block of a pass (module doc): margins, the per-row terms, the gradient sums and
    the Hessian's rows; for the polish, the rows near the margin at ``E`` marked (they are
    collected), the sums over the rows past the band, and the candidates' losses."""
    W, Dir, E, trying, prob, B, unit, plan, amap, cutoff, free, polish, (hess, sample) = args
    X = (block.indptr, block.indices, block.data)
    n, k = block.n_rows, W.shape[1]
    d = W.shape[0] - 1
    U = np.empty((n, k))
    csr_matmat(X, W, U)
    U += B * W[d]
    L = plan[3].shape[1]
    P = max(1, int(plan[4].max()))
    V = U
    Ev = np.empty((P, n, k))
    if trying:                       # point 0 at E (the first trials), point p at trial p
        V = np.empty((n, k))
        csr_matmat(X, Dir, V)
        V += B * Dir[d]
        csr_matmat(X, E, Ev[0])
        Ev[0] += B * E[d]
        for p in range(1, P):
            Ev[p] = U + plan[1][:, p] * V
    else:
        Ev[0] = U
    coef, h = np.empty((L, n, k)), np.empty((L, n, k))
    newton_rows(block.y, (U, V, Ev), prob, plan,
                (acc["ftry"], acc["f"], acc["sb"], acc["sbpos"], acc["loss"], acc["csum"]),
                (coef, h))
    g = acc["g"]
    positive = block.y[:, None] == prob[0][None, :]
    for lv in range(L):
        csr_rmatmat_add(X, coef[lv], g[lv])
        g[lv, d] += B * coef[lv].sum(axis=0)
        if free:
            cp = np.where(positive, coef[lv], 0.0)
            csr_rmatmat_add(X, cp, acc["gpos"][lv])
            acc["gpos"][lv, d] += B * cp.sum(axis=0)
    if hess == "cg":
        # no Hessian: its diagonal (cg's preconditioner), and the rows with curvature kept
        # (resident rows, with their curvatures), the polish's marks added below
        vals = np.ones(len(block.indices)) if unit else block.data.astype(np.float64)
        Xsq = (block.indptr, block.indices, vals * vals)
        csr_rmatmat_add(Xsq, h[0], acc["hdiag"])
        acc["hdiag"][d] += B * B * h[0].sum(axis=0)
        # when they did not all fit the RAM slab last pass, a share p of them drawn by row
        # id, their curvature weighted by 1/p (subsampled Newton-CG: an unbiased estimate)
        p = sample
        curv = (h[0] > 0.0) & (h[0] >= cutoff[None, :, 0])
        keep = curv
        if p < 1.0:
            keep = curv & (_row_uniform(block.row_start, n)[:, None] < p)
        views[0][:] = 2 * keep
        views[1][:] = np.where(keep, h[0] * (1.0 / p if p > 0 else 0.0), 0.0)
        lens, kept = np.diff(block.indptr), curv.any(axis=1)
        acc["rowsize"][0] += float(np.count_nonzero(kept))
        acc["rowsize"][1] += float(lens[kept].sum())
    elif hess == "full" and len(block.indices) > _DENSE_SHARE * n * d:
        # dense rows and a Hessian over every feature: BLAS on the rows with curvature
        Xd = np.empty((n, d + 1))
        Xd[:, :d] = scipy.sparse.csr_matrix((np.ones(len(block.indices)) if unit else block.data,
                                   block.indices, block.indptr), shape=(n, d)).toarray()
        Xd[:, d] = B
        for c in range(k):
            for lv in range(L):
                sel = (h[lv, :, c] > 0.0) & (h[lv, :, c] >= cutoff[c, lv])
                if sel.any():
                    Xs = Xd[sel]
                    acc["H"][c, :, :, lv] += (Xs.T * h[lv, sel, c]) @ Xs
    else:
        longest = int(np.diff(block.indptr).max(initial=0)) + 1
        newton_hess_add(X, unit, B, h, cutoff, amap,
                        (np.empty(longest, np.int64), np.empty(longest), np.empty(L)),
                        acc["H"])
    if polish is not None:
        band, cand, cand_live = polish
        yk = np.where(positive, 1.0, -1.0)
        Ck = np.where(positive, prob[1][None, :], prob[2][None, :])
        z = 1.0 - yk * Ev[0]
        on = band[None, :] >= 0
        near = on & (np.abs(z) <= band[None, :])
        views[0][:] = views[0] | near if hess == "cg" else near
        views[-1][:] = np.where(near, views[-1], np.float32(np.nan))   # a warm start if near
        if hess == "cg":
            kept = near.any(axis=1)
            acc["rowsize"][2] += float(np.count_nonzero(kept))
            acc["rowsize"][3] += float(lens[kept].sum())
        past = np.where(on & (z > band[None, :]), Ck, 0.0)
        coef_u = past * yk
        csr_rmatmat_add(X, coef_u, acc["u"])
        acc["u"][d] += B * coef_u.sum(axis=0)
        acc["usum"] += past.sum(axis=0)
        if cand_live.any():
            M = np.empty((n, k))
            csr_matmat(X, cand, M)
            M += B * cand[d]
            acc["closs"] += np.where(cand_live[None, :],
                                     Ck * np.maximum(0.0, 1.0 - yk * M), 0.0).sum(axis=0)
