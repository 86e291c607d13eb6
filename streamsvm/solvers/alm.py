"""``alm``: the augmented-Lagrangian (ADMM) primal SVM of paper 004 (Nie, Huang, Wang,
Huang, ICML 2014; spec_004, which reconstructs the lost equations and corrects the paper).

Problem (spec §1, ``C_i`` the row's cost with class weights, ``p ≥ 1``)::

    min_{w,b}  ½‖w‖² + Σ_i C_i max(0, 1 − y_i (w·x_i + b))^p

with ``b`` a free (unregularized) intercept — the paper's — or, with ``free_bias=False``, a
regularized constant feature of value ``B`` (LIBLINEAR's ``-B``; ``bias=0``: none).
``loss="hinge"`` is p = 1, ``"squared_hinge"`` p = 2, ``loss_power`` any p ≥ 1.

Method (spec §2.7, two-block ADMM on ``Ā w̄ + e = y``, ``Ā`` the rows with the bias column):
with ``t = y − o − λ/μ`` (``o = Ā w̄``), ``e = prox(t)`` per row (closed form for p = 1, 2,
safeguarded Newton otherwise, Eq. 11 with its missing ``y_i``), ``z = y − e − λ/μ``, then
``w̄`` minimizes the ridge problem ``μ⁻¹ w̄ᵀ D w̄ + ‖Ā w̄ − z‖²`` (``D`` = 1 on the regularized
coordinates), then ``λ += μ (Ā w̄ − y + e)`` (Eq. 9). λ and e are per-row state of the
scheduler; the λ update is deferred to the next pass, which recomputes ``o`` anyway (spec
§3.2). The ridge problem is solved by

* ``inner="gram"``: exactly (the paper's Algorithm 1), by Cholesky on ``ĀᵀĀ + D/μ``: the
  Gram matrix ``ĀᵀĀ`` is accumulated during the first pass (a (d+1)² accumulator of the
  scheduler), the factor is recomputed only when μ changes; one pass per iteration;
* ``inner="cg"``: ``cg_steps`` conjugate-gradient steps warm-started at the current point,
  Jacobi-preconditioned (``precondition``), one pass each: ``1 + cg_steps`` passes per
  iteration. One unpreconditioned step is the paper's Algorithm 2 (Eqs. 16, 18);
* ``"auto"``: ``gram`` when ``n_features + 1 ≤ max_gram`` (practical mode), else ``cg``.

``cg_steps=2`` by default, not the spec's 3: with the Jacobi preconditioner two steps reached
1% and 0.1% of the optimum in fewer passes than three (and than one or five) on a9a, L1 and
L2 (BENCHMARKS.md, "alm").

Defaults (spec §4.3, from its measurements): ``mode="practical"``: ``μ = 0.1·C`` constant,
``w₀ = 0``, the best evaluated point returned, stop on the certificate. ``mode="paper"``:
``μ`` and ``ρ`` required (the paper gives neither), ``μ_{k+1} = min(ρ μ_k, mu_max)``,
``w₀ = 1``, Algorithm 2 (one gradient step) unless ``inner="gram"``, at most ``max_iter``
iterations, stop when ``‖∇_w obj‖ ≤ gtol`` (absolute) or the objective changed less than
1e-4 (relative), the last evaluated point returned. ``stop_rule="residuals"`` (practical
mode) adds the spec's heuristic stop: primal and dual residuals at most ``rtol`` and the
objective's relative change below 1e-4 three iterations running (a warning when the gap is
still above ``tol`` then). ``balance`` (off by default): residual
balancing (Boyd et al. §3.4.1): ``μ`` doubles when ``‖R‖ > 10 μ‖Δo‖``, halves when ``μ‖Δo‖ >
10 ‖R‖``, at most 50 changes.

Certificate (spec §1.1, for every p): the multipliers give ``α = −y λ``, clipped to ``[0, C]``
(p = 1) or ``[0, ∞)``; with a free bias each side of the labels is scaled so that ``Σ α y =
0``, and the common scale ``t`` maximizes the dual ``Σ α − Σ ψ*(α) − ½‖Σ α y x̄‖²``
(``ψ*(α) = (p−1) C (α/(pC))^{p/(p−1)}``, the loss's conjugate; a 1-D concave problem) — a dual
bound from the same pass as the objective at the same iterate. A second point, projected the
same way, comes from the primal: ``α = p C ξ^{p−1}`` (p > 1, optimal at the optimum), or for
p = 1 ``C`` where ``ξ > 0.1``, 0 where ``ξ < −0.1`` and the multipliers' in between. The reported gap is
``(P_best − D_best)/P_best``, exact, so the driver stops on ``tol`` as for every solver. Each
iteration also reports the primal residual ``‖R‖/√n``, the dual residual ``μ‖Δo‖/√n`` and the
relative objective change.

Passes: ``kind="admm"`` entries, one outer iteration each (1 pass with ``gram``, ``1 +
cg_steps`` with ``cg``). One-vs-rest classes share every pass (λ and e are n × k).
"""

from __future__ import annotations

import logging
import math

import numpy as np

from ..exceptions import InvalidParameterError
from ..kernels._alm import N_SUMS, alm_rows
from ..problem import Problem
from ..schedule import Accumulator, Need
from ._alm_certificate import BAND, AlmCertificate
from ._alm_ridge import AlmRidge
from ._alm_rules import AlmRules
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, SVC_LOSS_PARAM, Param, Solver,
                    register)

__all__ = ["AlmSolver"]

log = logging.getLogger(__name__)


@register("alm")
class AlmSolver(AlmRules, AlmRidge, AlmCertificate, Solver):
    """Augmented-Lagrangian (ADMM) primal SVM (module doc): the plan of its passes here,
    the certificate in :mod:`._alm_certificate`, the ridge subproblem in :mod:`._alm_ridge`,
    the stopping rules and μ's schedule in :mod:`._alm_rules`."""

    warm_start = True
    summary = ("ADMM on the primal L1, L2 or Lp-loss SVM with a free intercept (Nie, Huang, Wang & Huang, ICML 2014): "
               "closed-form per-row updates and a ridge subproblem solved exactly from the Gram "
               "matrix (one pass per iteration, few features) or by conjugate gradients; a "
               "duality gap from the multipliers")
    state_version = 1
    params = (
        C_PARAM,
        SVC_LOSS_PARAM,
        Param("loss_power", "float", None, "the Lp loss max(0, 1 - y w.x)^P for any P >= 1; "
              "replaces loss (1 = hinge, 2 = squared_hinge)", low=1.0, flag="--loss-power"),
        BIAS_PARAM,
        Param("free_bias", "bool", True, "an unregularized intercept (the paper's); False: "
              "the regularized constant feature of LIBLINEAR -B"),
        Param("tol", "float", 1e-3, "stop when the relative duality gap is at most tol",
              low=0.0, low_open=True),
        Param("max_passes", "float", 3000.0, "stop after this many passes over the data, "
              "with a ConvergenceWarning", low=0.0, low_open=True),
        CLASS_WEIGHT_PARAM,
        Param("mode", "choice", "practical", "practical: measured defaults (mu = 0.1*C, "
              "w0 = 0, stop on the duality gap); paper: the paper's Algorithm 2 (w0 = 1, one "
              "gradient step, its stopping rules; needs mu and rho)",
              choices=("practical", "paper")),
        Param("inner", "choice", "auto", "the ridge subproblem: gram (exact, Cholesky on the "
              "Gram matrix, 1 pass per iteration), cg (cg_steps conjugate-gradient passes), "
              "auto: gram when n_features + 1 <= max_gram (paper mode: cg with 1 step)",
              choices=("auto", "gram", "cg")),
        Param("cg_steps", "int", 2, "inner='cg': conjugate-gradient steps (passes) per "
              "iteration (1 = the paper's single gradient step)", low=1, high=1000),
        Param("max_gram", "int", 4096, "inner='auto': the most n_features + 1 for the Gram "
              "path (it holds two (n_features + 1)^2 float64 matrices)", low=1),
        Param("mu", "float", None, "the penalty mu (default 0.1*C; required in paper mode)",
              low=0.0, low_open=True),
        Param("rho", "float", None, "mu's growth per iteration, mu <- min(rho*mu, mu_max) "
              "(default 1: constant; required in paper mode)", low=1.0),
        Param("mu_max", "float", 1e5, "the cap on mu (the paper's 1e5)", low=0.0,
              low_open=True),
        Param("balance", "bool", False, "residual balancing: double mu when the primal "
              "residual is 10x the dual one, halve it in the opposite case, at most 50 times "
              "(not in the paper)"),
        Param("w0", "choice", "auto", "the starting point: zeros, ones (the paper's literal "
              "w = 1), auto: zeros (practical), ones (paper)", choices=("auto", "zeros", "ones")),
        Param("precondition", "bool", True, "inner='cg': Jacobi preconditioner diag(X^T X) + "
              "1/mu (not in paper mode)"),
        Param("stop_rule", "choice", "gap", "practical mode: gap: stop on the certified "
              "duality gap (tol); residuals: also stop once the primal and dual residuals "
              "(per sqrt(n)) are at most rtol and the objective changed less than 1e-4 "
              "(relative) 3 iterations running (a warning when the gap is above tol)",
              choices=("gap", "residuals")),
        Param("rtol", "float", 1e-3, "stop_rule='residuals': the residuals' bound", low=0.0,
              low_open=True),
        Param("gtol", "float", 0.01, "paper mode: stop when ||grad_w obj|| <= gtol "
              "(absolute, as printed)", low=0.0, low_open=True),
        Param("max_iter", "int", 100, "paper mode: stop after this many iterations (the "
              "paper's 100)", low=1),
    )

    not_distributed = None          # every pass is a map_reduce

    history_extras = ("mu", "primal_residual", "dual_residual", "objective_change")

    # -- the problem -----------------------------------------------------------------
    @property
    def power(self) -> float:
        if self.loss_power is not None:
            return float(self.loss_power)
        return 1.0 if self.loss == "hinge" else 2.0

    def problem(self, store) -> Problem:
        p = self.power
        loss = "hinge" if p == 1.0 else "squared_hinge" if p == 2.0 else "power_hinge"
        mode = "none" if not self.bias else "free" if self.free_bias else "regularized"
        return Problem(loss=loss, C=self.C, class_weight=self.class_weight, bias=self.bias,
                       bias_mode=mode, layout="binary" if store.task == "binary" else "ovr",
                       power=p)

    def check_store(self, store) -> None:
        if self.free_bias and not self.bias:
            raise InvalidParameterError("alm: free_bias=True needs a bias feature: bias must "
                                        "be > 0 (or free_bias=False with bias=0 for no "
                                        "intercept)")
        if self.mode == "paper" and (self.mu is None or self.rho is None):
            raise InvalidParameterError(
                "alm: mode='paper' needs mu and rho: the paper gives no first penalty mu_1 and "
                "no growth factor; e.g. mu=0.1, rho=1")
        if self.inner == "gram":
            D1 = store.n_features + 1
            if D1 > max(self.max_gram, 1):
                raise InvalidParameterError(
                    f"alm: inner='gram' holds two ({D1} x {D1}) float64 matrices "
                    f"({Need((D1, D1), count=2).nbytes({}) / 1e6:.0f} MB) for "
                    f"{store.n_features} features, more "
                    f"than max_gram={self.max_gram} allows; raise max_gram or use inner='cg'")

    # -- setup -------------------------------------------------------------------------
    def start(self, sched) -> None:
        store = sched.store
        self.m = 1 if store.task == "binary" else len(store.classes)
        K = self.k = self.m
        D1 = self.d1 = sched.n_features + 1
        self.p = self.power
        self.paper = self.mode == "paper"
        self.gram = self.inner == "gram" or (self.inner == "auto" and not self.paper and
                                             D1 <= self.max_gram)
        if self.gram and self.inner == "auto":
            try:
                sched.check_budget("alm", self._needs())
            except InvalidParameterError as exc:       # the Gram path does not fit: cg
                log.info("alm: the Gram matrix of %d columns does not fit the memory "
                         "budget: inner='cg' (%s)", D1, exc)
                self.gram = False
        self.steps = 1 if self.paper and self.inner == "auto" else self.cg_steps
        self.jacobi = self.precondition and not self.paper and not self.gram
        self.free = bool(self.free_bias and self.bias)
        sched.check_budget("alm", self._needs())
        self.costs = self.kernel_costs(store)
        self.unit = store.binary_values
        self.n_rows = sched.n_rows
        # D: 1 on the regularized coordinates (the bias: 0 when free; unused when B = 0)
        self.reg = np.ones(D1)
        self.reg[-1] = 0.0 if self.free else 1.0
        self.lam = sched.state("alm.lam", np.float64, width=K)
        self.e = sched.state("alm.e", np.float64, width=K)
        ones = self.w0 == "ones" or (self.w0 == "auto" and self.paper)
        self.W = self.initial_W(D1, K)
        if ones and self.init_W is None:
            self.W[:-1] = 1.0
        self.Wcert = self.W.copy()                  # the point returned (module doc)
        mu = self.mu if self.mu is not None else 0.1 * self.C
        self.mus = np.array([mu, min(mu, self.mu_max)])   # μ_old, μ_new (module doc)
        self.primal = np.full(K, np.inf)
        self.dual = np.full(K, -np.inf)
        self.gap = np.full(K, np.inf)
        self.last = np.full(K, np.nan)              # the objective at the last evaluation
        self.dq = np.zeros(K)                       # ‖Δo‖² of the last (w, b) update
        self.H0 = np.zeros((D1, D1) if self.gram else (0, 0))
        self.colsq = np.zeros(D1 if self.jacobi else 0)
        self.iters = 0
        self.changes = 0                            # residual balancing's μ changes
        self.calm = 0                               # stop_rule="residuals": calm iterations
        self.n_sv = 0
        self._factor = None                         # (μ, Cholesky factor), not saved

    def _needs(self) -> dict:
        """What must stay in memory: the models and sums, and with the Gram path the Gram
        matrix kept between passes plus, at most at once, the first pass's sums of it (one
        array per level of the reduction tree, which the scheduler counts, at least one:
        the Cholesky factor is computed in place of one copy)."""
        D1, K = self.d1, self.k
        gram = (Need((D1, D1)), Need((D1, D1), per_pass=True)) if self.gram else ()
        # a pass sums G (D1 × K), V (D1 × 4K), the paper's objective gradient (D1 × K) and
        # the column norms (D1) in run accumulators, one array per level of the reduction
        # tree (the scheduler counts them): 5 models' 10^5 weights were 124 MB at once
        sums = (Need((D1, 6 * K if self.paper else 5 * K), per_pass=True),
                Need((D1,), per_pass=True))
        return {"the models and the pass's results": Need((D1, K), count=4),
                "a pass's sums": sums,
                "the Gram matrix, its pass's sums or its factor": gram}

    state_arrays = ("W", "Wcert", "mus", "primal", "dual", "gap", "last", "dq", "H0", "colsq")
    state_values = ("iters", "changes", "n_sv", "calm")

    @property
    def n_iter(self) -> int:
        return self.iters

    def coef(self):
        return self.Wcert[:-1].T.copy(), self.Wcert[-1] * self.bias

    # -- one iteration -------------------------------------------------------------------
    def step(self, sched) -> dict:
        s, G, V, gobj = self._pass(sched)
        certified, gnorm, change = self._absorb(s, V, gobj)
        entry = self._entry(s, change)
        self.iters += 1
        if self._stopped(entry, certified, gnorm, change):
            return entry
        # the (w, b) step, then μ for the next iteration
        mu = self.mus[1]
        Wn = self._solve_gram(G, mu) if self.gram else self._cg(sched, G, mu)
        self.W[...] = Wn
        self._next_mu(s)
        return entry

    def final_check(self, sched) -> dict:
        # every iteration's certificate is exact (of the point returned): nothing to add
        return {"kind": "check", "primal": float(self.primal.sum()),
                "dual": float(self.dual.sum()), "gap": float(self.gap.max()), "exact": True,
                "active": self.n_sv, "mu": float(self.mus[1]), "primal_residual": np.nan,
                "dual_residual": np.nan, "objective_change": np.nan}

    def _pass(self, sched):
        """Pass A (spec §3.2): λ's deferred update, the objective and dual sums at ``W``,
        the e-update and the ridge subproblem's data, all in one read."""
        K, D1 = self.k, self.d1
        first = self.iters == 0
        want_H = self.gram and first
        want_colsq = self.jacobi and first
        acc = {"G": Accumulator((D1, K)), "V": Accumulator((D1, 4 * K)),
               "s": Accumulator((K, N_SUMS))}
        if self.paper:
            acc["gobj"] = Accumulator((D1, K))
        if want_colsq:
            acc["colsq"] = Accumulator(D1)
        if want_H:
            acc["H"] = Accumulator((D1, D1))
        loss = (float(self.p), BAND)
        mus = (float(self.mus[0]), float(self.mus[1]))
        flags = (first, self.gram, self.paper, want_colsq, want_H)
        res = sched.map_reduce(_rows_block, args=(self.W, self.costs, loss, mus, flags,
                                                  self.unit),
                               states=(self.lam, self.e), acc=acc)
        if want_H:
            self.H0[...] = res["H"]
        if want_colsq:
            self.colsq[...] = res["colsq"]
        return res["s"], res["G"], res["V"], res.get("gobj")

    def _entry(self, s, change) -> dict:
        n = max(self.n_rows, 1)
        first = self.iters == 0
        return {"kind": "admm", "primal": float(self.primal.sum()),
                "dual": float(self.dual.sum()), "gap": float(self.gap.max()),
                "exact": True, "active": self.n_sv, "mu": float(self.mus[1]),
                "primal_residual": np.nan if first else math.sqrt(float(s[:, 1].sum()) / n),
                "dual_residual": np.nan if first else
                float(self.mus[0]) * math.sqrt(float(self.dq.sum()) / n),
                "objective_change": float(change.max()) if np.isfinite(change).all()
                else np.nan}


def _rows_block(block, views, args, acc) -> None:
    """One block of pass A (``map_reduce`` kernel): :func:`alm_rows`."""
    W, costs, (p, band), mus, flags, unit = args
    lam, e = views
    k = W.shape[1]
    dummy1, dummy2 = _DUMMY1, _DUMMY2
    alm_rows((block.indptr, block.indices, block.data), unit, block.y, costs, p, band, W, lam,
             e, mus, flags, np.empty((2, k)), acc["G"], acc["V"], acc["s"],
             acc.get("gobj", dummy2), acc.get("colsq", dummy1), acc.get("H", dummy2))


_DUMMY1 = np.zeros(0)
_DUMMY2 = np.zeros((0, 0))
