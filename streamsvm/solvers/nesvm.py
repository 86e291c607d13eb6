"""``nesvm``: Nesterov smoothing and the optimal gradient method, one pass per round
(paper 001, Zhou, Tao, Wu; spec_001, which corrects the printed algorithms).

Problems (the library's convention, spec §1; ``x̄ = (x, B)``, ``w̄ = (w, b)``, the bias a
regularized constant feature of value ``B``, ``C_i`` the row's cost with class weights)::

    C-SVM  (loss="hinge",   penalty="l2"):  ½‖w̄‖² + Σ_i C_i max(0, 1 − y_i w̄·x̄_i)
    LP-SVM (loss="hinge",   penalty="l1"):  ‖w̄‖₁  + Σ_i C_i max(0, 1 − y_i w̄·x̄_i)
    LS-SVM (loss="squared"):                ½‖w̄‖² + Σ_i C_i (1 − y_i w̄·x̄_i)²
    L2-SVM (loss="squared_hinge"):          ½‖w̄‖² + Σ_i C_i max(0, 1 − y_i w̄·x̄_i)²

``free_bias=True`` (C-SVM only): the paper's unregularized bias (Eq. 37, spec §1.4),
``½‖w‖² + Σ_i C_i max(0, 1 − y_i (w·x_i + bB))``: the regularizer and its gradient leave the
bias coordinate out (spec §1.4's ``dF/db = −C Σ y_i u_i``).

The squared hinge is smooth like the LS-SVM loss and shares its method: no smoothing stage,
the Lipschitz bound ``1 + 2 C_max Λ`` (``max(0, r)²`` curves at most as ``r²``), and the
dual point ``α_i = 2 C_i max(0, r_i) ≥ 0``, feasible for the L2-SVM's dual ``Σ α − Σ α²/(4C)
− ½‖Σ α y x̄‖²`` (the LS-SVM's, with ``α ≥ 0``), so the gap is as exact.

Smoothing (spec §2): the hinge becomes ``h_μ(r) = max_{0≤u≤1} u r − ½ μ s̄_i u²`` with
``s̄_i = max(‖x_i‖∞, B)`` (Eq. 5–10 with the corrected threshold ``1 − μ s̄_i``; within
``μ s̄_i/2`` of the hinge), the ℓ1 norm the Huber function ``l_μ₁`` (Eq. 23–28). The LS-SVM
loss is smooth already.

Method (spec §3.1, Algorithm 1): with ``g^k = ∇F_μ(w^k)``, ``y^k = w^k − g^k/L``, ``z^k =
w* − Σ_{i≤k} (i+1)/2 g^i / L``, ``w^{k+1} = 2/(k+3) z^k + (k+1)/(k+3) y^k``; ``w^0 = w*``
(the prox-centre, spec §7 item 12), and every change of ``L`` or ``μ`` restarts the sequence
there (``k = 0``, ``S = 0``, ``w* =`` the current point).

Lipschitz constant (spec §5): ``L = 1 + C_max Λ_S/μ`` (C-SVM), ``1/μ₁ + C_max Λ_S/μ``
(LP-SVM), ``1 + 2 C_max Λ`` (LS-SVM; the paper's Eq. 56 is not a Lipschitz constant and
diverges, spec §1.3), with ``Λ_S = λ_max(Σ x̄ x̄ᵀ/s̄)``, ``Λ = λ_max(Σ x̄ x̄ᵀ)``:

* ``lipschitz="power"``: block power iteration (8 vectors, Rayleigh–Ritz) at the start of a
  run, one pass per product, until the top Ritz pair's residual is below 1% of its value and
  the 8th Ritz value moves less than 1% (at most 30 passes; a9a: 12); ``Λ = θ + ‖residual‖``. The value is kept with the store by the scheduler, per bias value
  (``sched.keep_derived``, ``io/_derived.py``): a second run on the store pays no pass for it;
* ``"trace"``: ``Σ q̄/s̄`` (``Σ q̄``), one statistics pass (cached too);
* ``"paper"``: Eq. 48/52's ``n·max q̄/s̄`` (refused for LS-SVM).

and the lagged descent safeguard (spec §5 item 5a): the pass that evaluates ``w^{k+1}`` also
evaluates ``F_μ(y^k)`` (a second dot product per row, no extra I/O); if ``F_μ(y^k) > F_μ(w^k)
− ‖g^k‖²/(2L)``, ``L`` doubles and the sequence restarts at the current point. (The spec
restarts at the best point, which costs a pass for its gradient; the current point's
gradient is at hand, so no pass is wasted.)

Two additions not in the paper, each behind a flag, each leaving the certificate exact:

* ``precondition`` (default on, with ``lipschitz="power"``): the power iteration keeps its 8
  Ritz pairs ``(θ_j, v_j)``; steps are taken in the metric ``M = I + Σ_{j<8} β_j v_j v_jᵀ`` with
  ``β_j = a(θ_j − θ_8)/(L0 + a θ_8)`` (``L0`` the regularizer's curvature, ``a`` the data term's
  factor ``C/μ`` or ``2C``), so that ``L_M = L0 + a θ_8`` bounds the Hessian in that metric:
  ``y = w − M⁻¹g/L``, ``z = w* − M⁻¹S/L`` (Nesterov's scheme with the prox-function ``½‖z −
  w*‖²_M``; ``M⁻¹`` by Woodbury on the orthonormal ``v_j``). Uncentred data has one huge
  eigenvalue (the mean row's direction: a9a 236,862 against 8,228 for the 8th), which sets
  the paper's step size alone; a9a at C = 1: 876 → 256 passes (BENCHMARKS.md, "nesvm").
* ``shrink_l`` (default on): ``L`` follows the local curvature (spec §5 item 4: only rows in
  the quadratic zone curve the objective). When the largest secant ``‖Δg‖_{M⁻¹}/‖Δw‖_M``
  a sequence has met stays below a quarter of ``L`` for 30 rounds, or at an adaptive restart,
  the sequence restarts with ``L`` = twice that secant; the descent test doubles it back when
  too small. a9a at C = 1: 3,339 → 876 passes without preconditioning.

Adaptive restart (``restart``, O'Donoghue–Candès): a new sequence from the current point
whenever ``F_μ(y^k)`` increased.

Homotopy (spec §3.3, the fixed Algorithm 2): stages of decreasing ``μ`` (and ``μ₁`` with it),
each warm-started with its prox-centre at the warm start. A stage ends when its smoothed
duality gap ``(F_μ − D_μ)/F_μ`` is at most ``max(tol/2, ¼·(the part of the true gap the
smoothing adds))``; then

* ``homotopy="auto"`` (default): ``μ ← μ·clip(½ tol / smoothing part, 0.1, 0.5)``, until the
  true duality gap reaches ``tol`` (no ``μ*`` to choose);
* ``"geometric"``: ``μ ← max(ρμ, μ*)``; ``"harmonic"``: ``μ_t = max(μ₀/(t+1), μ*)`` (the
  paper's Eq. 44, its four bugs fixed); ``μ*`` from ``mu_min``, or by default the spec's
  accuracy recipe ``μ* = tol·P(w⁰)/(C Σ s̄)`` (the smoothing costs at most half the tol);
  the stage at ``μ*`` is solved, then the run stops;
* ``"none"``: one stage at ``mu`` (the paper's experiments: ``mu=5``), solved to ``tol`` on
  its smoothed gap; the true gap is reported, not reached.

A stage switch costs one pass (the gradient at the new ``μ``).

Certificate (spec §4.4, free from the round's pass): ``α_i = C_i u_i`` is dual feasible and
``Σ α_i y_i x̄_i = w̄ − g``, so ``D = Σ α_i − ½‖Σ α_i y_i x̄_i‖²`` (C-SVM); LS-SVM with ``α_i =
2 C_i r_i``: ``D = Σ α_i − Σ α_i²/(4C_i) − ½‖Σ α_i y_i x̄_i‖²``; LP-SVM: ``α`` scaled by
``t = 1/max(1, ‖Σ α_i y_i x̄_i‖∞)``, ``D = t Σ α_i``. A free bias adds the dual constraint
``Σ α_i y_i = 0`` (spec §1.4: the free gap of §4.4 no longer holds as printed): the pass
also sums the positive side (``Σ_{y=+1} α_i x̄_i`` and ``Σ_{y=+1} α_i``), the heavier side is
scaled down to balance the other (``α`` stays in its box), and ``D = Σ α − ½‖Σ α y x‖²``
without the bias coordinate — exact again, and the gap certifies as for every problem. The reported gap is ``(P_best −
D_best)/P_best`` over every point evaluated (``w^k`` and ``y^k``); the model returned is the
best point's. Exact, so the driver stops on it.

Passes: one per round (``kind="round"``), the power iteration's (``"lipschitz"``), one per
stage switch. Several models share each pass: one-vs-rest classes and a path of C values
(``C_path``), ``k`` dot products and ``k`` axpys per row (spec §4.3).
"""

from __future__ import annotations

import warnings

import numpy as np

from ..exceptions import InvalidParameterError
from ..kernels._nesvm import N_SUMS, nesvm_rows
from ..problem import Problem
from ..schedule import Accumulator, Need
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, Param, Solver, register)
from ._nesvm_cert import Certificate
from ._nesvm_homotopy import Homotopy
from ._nesvm_lipschitz import POWER_VECTORS, LipschitzPhase
from ._nesvm_metric import Metric
from ._nesvm_screen import Screening
from ._nesvm_sequence import Round, Sequences

__all__ = ["NesvmSolver"]


@register("nesvm")
class NesvmSolver(LipschitzPhase, Metric, Sequences, Homotopy, Certificate, Screening, Solver):
    """Nesterov smoothing + optimal gradient method (module doc): the plan of passes; the
    parts of the method are mixins over its state, one module each (``_nesvm_*.py``)."""

    warm_start = True
    summary = ("Nesterov's optimal gradient method (NESVM: Zhou, Tao & Wu, 2010) on the "
               "squared hinge, the smoothed hinge (C-SVM), the "
               "l1-norm SVM (--penalty l1) or the least-squares SVM (--loss squared): one "
               "pass per round, homotopy on the smoothing, a free duality gap; many C values "
               "(--C-path) or classes share each pass")
    state_version = 1
    params = (
        C_PARAM,
        Param("C_path", "floats", None, "train one model per C value in the same passes "
              "(e.g. 0.01,0.1,1,10); replaces C", low=0.0, low_open=True, flag="--C-path"),
        Param("loss", "choice", "squared_hinge", "squared_hinge = LIBLINEAR -s 1's problem, "
              "hinge (C-SVM, or LP-SVM with --penalty l1) = -s 3's, or squared: the squared "
              "residual (1 - y w.x)^2 of the least-squares SVM",
              choices=("squared_hinge", "hinge", "squared")),
        Param("penalty", "choice", "l2", "l2: 1/2||w||^2; l1: ||w||_1 (LP-SVM, hinge only)",
              choices=("l2", "l1")),
        BIAS_PARAM,
        Param("free_bias", "bool", False, "C-SVM: the bias unregularized, as the paper's Eq. "
              "37 (1/2||w||^2 + C sum hinge(y(w.x + b))); the duality gap stays exact: each "
              "round's dual point is rescaled per class side so that sum alpha y = 0"),
        Param("tol", "float", 1e-3, "stop when the relative duality gap is at most tol",
              low=0.0, low_open=True),
        Param("max_passes", "float", 3000.0, "stop after this many passes over the data, "
              "with a ConvergenceWarning", low=0.0, low_open=True),
        CLASS_WEIGHT_PARAM,
        Param("mu", "float", 1.0, "hinge smoothing mu of the first homotopy stage (the knee "
              "width is mu*||x_i||_inf); with homotopy='none' throughout (the paper: 5)",
              low=0.0, low_open=True),
        Param("mu_l1", "float", 0.1, "LP-SVM: smoothing of the l1 norm at the first stage, "
              "decreased with mu", low=0.0, low_open=True),
        Param("homotopy", "choice", "auto", "auto: decrease mu by a factor in [0.1, 0.5] "
              "chosen from the gap until the true gap reaches tol; geometric: mu <- rho*mu "
              "down to mu_min; harmonic: mu/(t+1) down to mu_min (the paper's Eq. 44); none: "
              "one stage at mu", choices=("auto", "geometric", "harmonic", "none")),
        Param("rho", "float", 0.2, "homotopy='geometric': mu's factor per stage", low=0.1,
              high=0.5),
        Param("mu_min", "float", 0.0, "geometric/harmonic: the last stage's mu (0: "
              "tol*P(w0)/(C*sum s_i), which costs at most half of tol)", low=0.0),
        Param("lipschitz", "choice", "power", "power: lambda_max by power iteration (cached "
              "in the store); trace: the trace bound; paper: Eq. 48's n*max q/s (hinge only)",
              choices=("power", "trace", "paper")),
        Param("restart", "bool", True, "adaptive restart: a new sequence from the current "
              "point whenever F_mu(y^k) increased (O'Donoghue and Candes; not in the paper: "
              "linear convergence on the strongly convex objective)"),
        Param("shrink_l", "bool", True, "follow the local curvature: when the sequence's "
              "largest secant curvature is below a quarter of L (after 30 rounds), and at "
              "adaptive restarts, restart with L = 2x that secant (the descent test doubles "
              "it back when too small); not in NESVM"),
        Param("precondition", "bool", True, "lipschitz='power': measure steps in the metric "
              "M = I + sum_j beta_j v_j v_j^T of the 7 largest eigenvectors found, so that L "
              "is set by the 8th eigenvalue instead of the largest (not in the paper)"),
        Param("screening", "bool", False, "safe screening (hinge): skip the blocks whose "
              "rows provably all have margin > 1 at both points of a round; the "
              "same iterates, fewer rows read"),
        Param("safeguard", "bool", True, "the lagged descent test: double L and restart "
              "when F(y^k) decreased less than the bound promises"),
    )

    not_distributed = None          # every pass is a map_reduce

    history_extras = ("mu", "lipschitz", "smoothed_gap")

    # -- the problem -----------------------------------------------------------------
    @property
    def Cs(self) -> list:
        return list(self.C_path) if self.C_path else [self.C]

    def problem(self, store) -> Problem:
        l1 = self.penalty == "l1"
        mode = "free" if self.free_bias else "regularized" if self.bias else "none"
        return Problem(loss=self.loss, C=self.Cs[0], class_weight=self.class_weight,
                       bias=self.bias, bias_mode=mode,
                       l1=1.0 if l1 else 0.0, l2=0.0 if l1 else 1.0,
                       layout="binary" if store.task == "binary" else "ovr")

    def check_store(self, store) -> None:
        if self.free_bias and (self.loss != "hinge" or self.penalty != "l2" or not self.bias):
            raise InvalidParameterError(
                "nesvm: free_bias=True is the C-SVM's (loss='hinge', penalty='l2') with a bias "
                f"feature (bias > 0); got loss={self.loss!r}, penalty={self.penalty!r}, "
                f"bias={self.bias!r}")
        if self.loss != "hinge" and self.screening:
            raise InvalidParameterError(f"nesvm: screening=True needs loss='hinge' (got "
                                        f"{self.loss!r}): the screening bound is the hinge's")
        if self.loss != "hinge" and self.penalty == "l1":
            raise InvalidParameterError(f"nesvm: penalty='l1' (LP-SVM) goes with loss='hinge' "
                                        f"(got {self.loss!r}); the other losses are l2")
        if self.loss != "hinge" and self.lipschitz == "paper":
            raise InvalidParameterError(
                f"nesvm: lipschitz='paper' is not available for loss={self.loss!r}: the "
                f"paper's LS-SVM constant 1 + 2C max||x_i||^2 (Eq. 56) is below the true one "
                f"and the method diverges; use 'power' or 'trace'")

    # -- setup -------------------------------------------------------------------------
    def start(self, sched) -> None:
        store = sched.store
        self.m = 1 if store.task == "binary" else len(store.classes)
        K = self.k = self.m * len(self.Cs)
        D1 = self.d1 = sched.n_features + 1
        sched.check_budget("nesvm", {"the models, their sequences and gradients":
                                     (Need((D1, K), count=8),
                                      Need((D1, POWER_VECTORS), count=3))})
        self.costs = self.kernel_costs(store)      # the models of each C of the path
        self.unit = store.binary_values
        self.sq = self.loss != "hinge"                  # a smooth loss (module doc)
        self.loss_code = ("hinge", "squared", "squared_hinge").index(self.loss)
        self.l1 = self.penalty == "l1"
        self.n_rows = sched.n_rows
        self._sides = None                          # a free bias: the positive side's sums
        self._start_lipschitz(sched)                # a cached value, or its passes to come
        self._start_sequences(D1, K)
        self._start_homotopy(K)
        self._start_certificate(D1, K)
        self.done = np.zeros(K, dtype=bool)         # certified at tol, or its last stage solved
        self.rounds = 0
        self._start_screening(sched, D1, K)
        self.n_sv = 0

    state_arrays = ("lam", "stats", "V", "theta", "W", "Z", "S", "Y", "kk", "mu_h", "mu1", "stage",
                    "lmult", "prev", "mu_star", "Wbest", "primal", "dual", "gap", "sgap",
                    "done", "best_v", "agg_v", "best_s", "best_q", "agg_s", "agg_q", "agg_w",
                    "Wp", "Gp", "sec", "delta", "Wref", "ref_age")
    state_values = ("power_passes", "power_theta", "rounds", "restarts", "n_sv", "screened")

    @property
    def n_iter(self) -> int:
        return self.rounds

    def coef(self):
        """The best point evaluated (the certificate's), one row per model: for a C path,
        the path's models one after the other, each with its classes."""
        return self.Wbest[:-1].T.copy(), self.Wbest[-1] * self.bias

    # -- the passes ----------------------------------------------------------------------
    def step(self, sched) -> dict:
        """The Lipschitz phase's passes, then one round per pass: each model's certificate,
        its sequence's tests, its homotopy stage, and its next point."""
        if not np.isfinite(self.lam[0]):
            return self._lipschitz_pass(sched)
        live = ~self.done
        two = bool((self.kk[live] > 0).any())
        sums, G = self._pass(sched, two, screen=True)
        self.rounds += 1
        L = self._L()
        for c in np.flatnonzero(live):
            rd = self._absorb(c, sums[c], G[:, c], two and self.kk[c] > 0, L[c])
            if self.done[c]:
                continue
            if self._stage_over(c, rd):
                if self._next_stage(c, rd):         # a new μ: a new sequence, new bounds
                    self._forget_bounds()
                    self._restart_stage(c)
                continue
            self._advance(c, self._L()[c], rd)     # (L doubled by a failed test)
        if self.done.all() and self.gap.max() > self.tol:
            warnings.warn(f"nesvm: the smoothed problem of the last stage is solved (mu="
                          f"{self.mu_h.max():.3g}), but the hinge problem's relative gap is "
                          f"{self.gap.max():.3g} > tol={self.tol:g}: the smoothing costs that "
                          f"much; use homotopy='auto' or a smaller mu / mu_min",
                          UserWarning, stacklevel=2)
        return self._entry("round")

    def final_check(self, sched) -> dict:
        if not np.isfinite(self.lam[0]) or not np.isfinite(self.gap).all():
            sums, G = self._pass(sched, False)
            for c in range(self.k):
                self._absorb(c, sums[c], G[:, c], False, np.inf)
        return self._entry("check")

    def _pass(self, sched, two: bool, screen: bool = False):
        """One pass of the rounds' kernel over the blocks to read: per model, the sums of
        ``nesvm_rows`` and ``G`` (``y`` evaluated too when ``two``)."""
        K = self.k
        mu = np.where(self.mu_h > 0, self.mu_h, 0.0)
        acc = {"G": Accumulator((self.d1, K)), "s": Accumulator((K, N_SUMS))}
        if self.free_bias:
            acc["P"] = Accumulator((self.d1 + 1, K))      # the positive side (module doc)
        active = None
        if screen and self.screening:
            active = self._screen(two)
            if active is None:                        # a full pass refreshes the bounds
                acc["slack"] = Accumulator((sched.n_blocks, K), op="min")
        res = sched.map_reduce(_round_block, args=(self.W, self.Y, two, self.costs, mu,
                                                   self.loss_code,
                                                   self.unit),
                               acc=acc, active=active)
        if "slack" in res:
            self._refresh_bounds(res["slack"])
        self._sides = res.get("P")
        return res["s"], res["G"]

    def _absorb(self, c, s, Gc, two, Lc) -> Round:
        """The round's numbers of model ``c``: the certificate at ``w`` (and ``y``), the
        homotopy's ``μ*`` from the first, the sequence's tests; the round's :class:`Round`
        for the steps that follow."""
        g, fmu, P, true_gap = self._certify(c, s, Gc, two)
        self._set_mu_star(c, P)
        return self._steer(c, s, g, fmu, true_gap, two, Lc)

    def _entry(self, kind) -> dict:
        return {"kind": kind, "primal": float(self.primal.sum()), "dual": float(self.dual.sum()),
                "gap": float(self.gap.max()), "exact": bool(np.isfinite(self.gap).all()),
                "active": self.n_sv, "mu": float(self.mu_h.max()),
                "lipschitz": float(self._L().max()) if np.isfinite(self.lam[0]) else 0.0,
                "smoothed_gap": float(self.sgap.max()),
                "stop": bool(self.done.all())}


def _round_block(block, views, args, acc) -> None:
    """One block of a round (``map_reduce`` kernel): :func:`nesvm_rows`, and the block's
    screening slack at ``W`` per model (``acc["slack"][block id]``)."""
    W, Y, two, costs, mu, least_squares, unit = args
    slack = np.full(W.shape[1], np.inf)
    sides = acc["P"] if "P" in acc else np.empty((0, W.shape[1]))
    nesvm_rows((block.indptr, block.indices, block.data), unit, block.y, costs, mu,
               least_squares, W, Y, two, np.empty((3, W.shape[1])), acc["G"], acc["s"], slack,
               sides)
    if "slack" in acc:
        np.minimum(acc["slack"][block.id], slack, out=acc["slack"][block.id])
