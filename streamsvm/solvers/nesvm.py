"""``nesvm``: Nesterov smoothing and the optimal gradient method, one pass per round
(paper 001, Zhou, Tao, Wu; spec_001, which corrects the printed algorithms).

Problems (the library's convention, spec §1; ``x̄ = (x, B)``, ``w̄ = (w, b)``, the bias a
regularized constant feature of value ``B``, ``C_i`` the row's cost with class weights)::

    C-SVM  (loss="hinge",   penalty="l2"):  ½‖w̄‖² + Σ_i C_i max(0, 1 − y_i w̄·x̄_i)
    LP-SVM (loss="hinge",   penalty="l1"):  ‖w̄‖₁  + Σ_i C_i max(0, 1 − y_i w̄·x̄_i)
    LS-SVM (loss="squared"):                ½‖w̄‖² + Σ_i C_i (1 − y_i w̄·x̄_i)²

``free_bias=True`` (C-SVM only): the paper's unregularized bias (Eq. 37, spec §1.4),
``½‖w‖² + Σ_i C_i max(0, 1 − y_i (w·x_i + bB))``: the regularizer and its gradient leave the
bias coordinate out (spec §1.4's ``dF/db = −C Σ y_i u_i``).

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
  the 8th Ritz value moves less than 1% (at most 30 passes; a9a: 12); ``Λ = θ + ‖residual‖``. The value is cached in the store's attributes per bias value
  (``io/_derived.py``): a second run on the store pays no pass for it;
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

import dataclasses
import logging
import warnings

import numpy as np

from ..exceptions import InvalidParameterError
from ..io import read_derived, write_derived
from ..kernels._nesvm import N_SUMS, nesvm_power, nesvm_rows
from ..problem import Problem
from ..schedule import Accumulator, Need
from ._base import (BIAS_PARAM, C_PARAM, CLASS_WEIGHT_PARAM, Param, Solver, register)

__all__ = ["NesvmSolver"]

log = logging.getLogger(__name__)

_POWER_VECTORS = 8       # block power iteration: vectors per pass (the top 7 precondition)
_POWER_RTOL = 1e-2       # ... until the top Ritz pair's residual is below this share and
                         # the last Ritz value (the bulk bound) changed less than it
_POWER_PASSES = 30       # ... or this many passes (then θ + ‖r‖ is still an upper bound
                         # of an eigenvalue, and the safeguard guards the rest)
_STAGE_SHARE = 0.25      # a stage ends once its smoothed gap is below this share of the
                         # smoothing's part of the true gap (or below tol/2)
_RHO_AUTO = (0.1, 0.5)
_SCREEN_EVERY = 10       # screening: a full pass refreshes the blocks' bounds this often
_SHRINK_AFTER = 30       # shrink_l: after this many rounds of a sequence, a restart at
_SHRINK_SHARE = 4        # 2× the largest secant when L exceeds this many times it   # homotopy="auto": the range of μ's factor per stage


@register("nesvm")
class NesvmSolver(Solver):
    """Nesterov smoothing + optimal gradient method (module doc)."""

    summary = ("Nesterov's optimal gradient method on the smoothed hinge (C-SVM), the "
               "l1-norm SVM (--penalty l1) or the least-squares SVM (--loss squared): one "
               "pass per round, homotopy on the smoothing, a free duality gap; many C values "
               "(--C-path) or classes share each pass")
    state_version = 1
    params = (
        C_PARAM,
        Param("C_path", "floats", None, "train one model per C value in the same passes "
              "(e.g. 0.01,0.1,1,10); replaces C", low=0.0, low_open=True, flag="--C-path"),
        Param("loss", "choice", "hinge", "hinge (C-SVM, or LP-SVM with --penalty l1) or "
              "squared: the squared residual (1 - y w.x)^2 of the least-squares SVM",
              choices=("hinge", "squared")),
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
              "it back when too small); not in the paper (spec 5.4)"),
        Param("precondition", "bool", True, "lipschitz='power': measure steps in the metric "
              "M = I + sum_j beta_j v_j v_j^T of the 7 largest eigenvectors found, so that L "
              "is set by the 8th eigenvalue instead of the largest (not in the paper)"),
        Param("screening", "bool", False, "safe screening (hinge): skip the blocks whose "
              "rows provably all have margin > 1 at both points of a round (spec 4.5); the "
              "same iterates, fewer rows read"),
        Param("safeguard", "bool", True, "the lagged descent test: double L and restart "
              "when F(y^k) decreased less than the bound promises (spec 5.5a)"),
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

    def problems(self, store) -> list:
        """One problem per C of the path."""
        p = self.problem(store)
        return [dataclasses.replace(p, C=C) for C in self.Cs]

    def check_store(self, store) -> None:
        if self.free_bias and (self.loss != "hinge" or self.penalty != "l2" or not self.bias):
            raise InvalidParameterError(
                "nesvm: free_bias=True is the C-SVM's (loss='hinge', penalty='l2') with a bias "
                f"feature (bias > 0); got loss={self.loss!r}, penalty={self.penalty!r}, "
                f"bias={self.bias!r}")
        if self.loss == "squared" and self.screening:
            raise InvalidParameterError("nesvm: screening=True needs loss='hinge': every row "
                                        "of the squared loss contributes to the gradient")
        if self.loss == "squared" and self.penalty == "l1":
            raise InvalidParameterError("nesvm: penalty='l1' (LP-SVM) goes with loss='hinge'; "
                                        "the least-squares SVM (loss='squared') is l2")
        if self.loss == "squared" and self.lipschitz == "paper":
            raise InvalidParameterError(
                "nesvm: lipschitz='paper' is not available for loss='squared': the paper's "
                "LS-SVM constant 1 + 2C max||x_i||^2 (Eq. 56) is below the true one and the "
                "method diverges (spec_001 §1.3); use 'power' or 'trace'")

    # -- setup -------------------------------------------------------------------------
    def start(self, sched) -> None:
        store = sched.store
        self.m = 1 if store.task == "binary" else len(store.classes)
        K = self.k = self.m * len(self.Cs)
        D1 = self.d1 = sched.n_features + 1
        sched.check_budget("nesvm", {"the models, their sequences and gradients":
                                     (Need((D1, K), count=8),
                                      Need((D1, _POWER_VECTORS), count=3))})
        Cp, Cn = [], []
        for p in self.problems(store):
            cp, cn = p.resolved(store.classes, store.label_counts).costs(
                store.classes, store.label_counts)
            Cp.append(cp)
            Cn.append(cn)
        self.Cp, self.Cn = np.concatenate(Cp), np.concatenate(Cn)
        self.pos = np.ones(K) if self.m == 1 else np.tile(np.arange(self.m, dtype=np.float64),
                                                          len(self.Cs))
        self.unit = store.binary_values
        self.sq = self.loss == "squared"
        self.l1 = self.penalty == "l1"
        self.n_rows = sched.n_rows
        self._sides = None                          # a free bias: the positive side's sums
        # cached per operator (Σ x̄x̄ᵀ/s̄ or Σ x̄x̄ᵀ) and bias value
        self.lip_key = f"nesvm.lipschitz.{'gram' if self.sq else 'gram_over_inf'}.B={self.bias!r}"
        # the Lipschitz phase: a cached value, or the power iteration's (or stats) passes
        self.lam = np.full(1, np.nan)               # Λ_S (hinge) or Λ (squared)
        self.stats = np.zeros(4)                    # Σ s̄, Σ q̄, Σ q̄/s̄, max q̄/s̄
        # (a space of D1 < _POWER_VECTORS dimensions holds D1 vectors: all of it)
        self.nv = min(_POWER_VECTORS, D1)
        self.theta = np.zeros(self.nv)              # Ritz values, largest first
        rng = sched.rng(0x4E45)                     # the power iteration's start
        V = rng.standard_normal((D1, _POWER_VECTORS))[:, :self.nv]
        V[:, 0] = 1.0
        if not self.bias:
            V[-1] = 0.0
        self.V = np.linalg.qr(V)[0]
        cached, vecs = read_derived(store, self.lip_key, with_array=True)
        if isinstance(cached, dict) and len(cached.get("stats", ())) == 4:
            self.stats[:] = cached["stats"]
            if self.lipschitz == "power" and cached.get("lambda") is not None and \
                    vecs is not None and vecs.shape == self.V.shape and \
                    len(cached.get("theta", ())) == self.nv:
                self.lam[0] = cached["lambda"]
                self.theta[:] = cached["theta"]
                self.V[...] = vecs
            elif self.lipschitz != "power":
                self.lam[0] = self._bound_from_stats()
        self.power_passes = 0
        self.power_theta = 0.0
        # the sequences, per model (columns)
        self.W = np.zeros((D1, K))                  # w^k
        self.Z = np.zeros((D1, K))                  # the prox-centre w*
        self.S = np.zeros((D1, K))                  # Σ (i+1)/2 g^i
        self.Y = np.zeros((D1, K))                  # y^{k-1}, evaluated with w^k
        self.kk = np.zeros(K, dtype=np.int64)       # k in the current sequence
        self.mu_h = np.full(K, 0.0 if self.sq else self.mu)
        self.mu1 = np.full(K, self.mu_l1 if self.l1 else 0.0)
        self.stage = np.zeros(K, dtype=np.int64)
        self.lmult = np.ones(K)                     # the safeguard's doublings
        self.Wp, self.Gp = np.zeros((D1, K)), np.zeros((D1, K))   # the last round's w, g
        self.sec = np.zeros(K)                      # the sequence's largest secant
        self.prev = np.full((K, 3), np.nan)         # F_μ(w^k), ‖g^k‖², F_μ(y^{k-1}) of the last round
        self.mu_star = np.zeros(K)                  # geometric/harmonic: the last stage's μ
        # the certificate: the best point evaluated, the best dual bound
        self.Wbest = np.zeros((D1, K))
        self.primal = np.full(K, np.inf)
        self.dual = np.full(K, -np.inf)
        self.gap = np.full(K, np.inf)
        self.sgap = np.full(K, np.inf)              # the smoothed gap at the last point
        # dual points (v = Σ α y x̄, Σ α, Σ α²/4C): the best, the sequence's average
        self.best_v, self.agg_v = np.zeros((D1, K)), np.zeros((D1, K))
        self.best_s, self.best_q, self.agg_s, self.agg_q, self.agg_w = np.zeros((5, K))
        self.done = np.zeros(K, dtype=bool)         # certified at tol, or its last stage solved
        self.rounds = self.restarts = self.screened = 0
        # safe screening (spec §4.5): per block and model, min (m_i − 1)/‖x̄_i‖ at Wref
        nb = sched.n_blocks if self.screening else 0
        self.delta = np.full((nb, K), -np.inf)
        self.Wref = np.zeros((D1, K)) if self.screening else np.zeros((0, K))
        self.ref_age = np.zeros(1, dtype=np.int64)
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

    # -- the Lipschitz constant ------------------------------------------------------------
    def _bound_from_stats(self) -> float:
        s_sum, q_sum, qs_sum, qs_max = self.stats
        if self.lipschitz == "trace":
            return q_sum if self.sq else qs_sum
        return self.n_rows * qs_max                # the paper's Eq. 21/48

    def _lipschitz_pass(self, sched) -> dict:
        """One pass of the block power iteration (spec §5 item 3), the rows' statistics
        with it."""
        b = self.V.shape[1] if self.lipschitz == "power" else 1
        acc = {"M": Accumulator((self.d1, b)), "stats": Accumulator(3),
               "qs_max": Accumulator(1, op="max")}
        res = sched.map_reduce(_power_block, args=(np.ascontiguousarray(self.V[:, :b]),
                                                   self.unit, float(self.bias), not self.sq),
                               acc=acc)
        self.stats[:3] = res["stats"]
        self.stats[3] = max(0.0, float(res["qs_max"][0]))
        self.power_passes += 1
        if self.lipschitz != "power":
            self.lam[0] = self._bound_from_stats()
        else:
            MV = res["M"]
            H = self.V.T @ MV
            H = 0.5 * (H + H.T)
            theta, vecs = np.linalg.eigh(H)
            theta, vecs = theta[::-1], vecs[:, ::-1]
            top = vecs[:, 0]
            resid = float(np.linalg.norm(MV @ top - theta[0] * (self.V @ top)))
            bulk_moved = abs(theta[-1] - self.theta[-1]) > _POWER_RTOL * theta[-1]
            self.power_theta = float(theta[0])
            log.info("nesvm: power iteration pass %d: theta %.6g residual %.3g, bulk %.6g",
                     self.power_passes, theta[0], resid, theta[-1])
            if (resid <= _POWER_RTOL * theta[0] and not bulk_moved) or \
                    self.power_passes >= _POWER_PASSES:
                self.lam[0] = theta[0] + resid
                self.V = self.V @ vecs               # the Ritz vectors
                self.theta[:] = np.maximum(theta, 0.0)
            else:
                self.theta[:] = theta
                self.V = np.linalg.qr(MV @ vecs)[0]
        if np.isfinite(self.lam[0]):
            old = read_derived(sched.store, self.lip_key) or {}
            power = self.lipschitz == "power"
            write_derived(sched.store, self.lip_key, {
                "stats": [float(v) for v in self.stats],
                "lambda": float(self.lam[0]) if power else old.get("lambda"),
                "theta": [float(t) for t in self.theta] if power else old.get("theta"),
                "passes": self.power_passes}, array=self.V if power else None)
        return {"kind": "lipschitz", "primal": np.nan, "dual": np.nan, "gap": np.inf,
                "exact": False, "active": 0, "mu": float(self.mu_h.max()),
                "lipschitz": float(self.lam[0]) if np.isfinite(self.lam[0]) else 0.0,
                "smoothed_gap": np.inf}

    def _set_mu_star(self, c, P0) -> None:
        """geometric/harmonic: the last stage's μ (module doc), from ``P(w⁰)`` (the first
        round's primal)."""
        if self.mu_min > 0:
            self.mu_star[c] = self.mu_min
        else:
            Cmax = max(self.Cp[c], self.Cn[c])
            self.mu_star[c] = self.tol * P0 / (Cmax * max(self.stats[0], 1e-300))
        self.mu_star[c] = min(self.mu_star[c], self.mu)

    def _curvatures(self):
        """``(L0, a)`` per model: the regularizer's curvature (1, or ``1/μ₁``) and the data
        term's factor on the operator (``C/μ``, or ``2C`` for the squared loss)."""
        Cmax = np.maximum(self.Cp, self.Cn)
        L0 = 1.0 / self.mu1 if self.l1 else np.ones(self.k)
        a = 2.0 * Cmax if self.sq else Cmax / self.mu_h
        return L0, a

    @property
    def preconditioned(self) -> bool:
        return self.precondition and self.lipschitz == "power" and self.theta[-1] > 0

    def _L(self) -> np.ndarray:
        """``L`` per model: in the metric ``M`` when preconditioned (module doc)."""
        L0, a = self._curvatures()
        lam = self.theta[-1] if self.preconditioned else float(self.lam[0])
        return (L0 + a * lam) * self.lmult

    def _beta(self, c) -> np.ndarray:
        """``β`` of ``M = I + Σ_j β_j v_j v_jᵀ`` for model ``c`` (0 when not preconditioned)."""
        if not self.preconditioned:
            return np.zeros(self.nv - 1)
        L0, a = self._curvatures()      # L_M (1 + β_j) = L0 + a θ_j on v_j, L_M = L0 + a θ_b
        return a[c] * (self.theta[:-1] - self.theta[-1]) / (L0[c] + a[c] * self.theta[-1])

    def _minv(self, c, g) -> np.ndarray:
        """``M⁻¹ g`` (Sherman–Morrison–Woodbury on the orthonormal Ritz vectors)."""
        if not self.preconditioned:
            return g
        V = self.V[:, :-1]
        b = self._beta(c)
        return g - V @ ((b / (1.0 + b)) * (V.T @ g))

    def _mnorm2(self, c, w) -> float:
        """``‖w‖²_M``."""
        if not self.preconditioned:
            return float(w @ w)
        t = self.V[:, :-1].T @ w
        return float(w @ w + self._beta(c) @ (t * t))

    # -- one round -----------------------------------------------------------------------
    def step(self, sched) -> dict:
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
                self._next_stage(c, rd)
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
        K = self.k
        mu = np.where(self.mu_h > 0, self.mu_h, 0.0)
        model = (self.pos, self.Cp, self.Cn, mu, float(self.bias), self.sq)
        acc = {"G": Accumulator((self.d1, K)), "s": Accumulator((K, N_SUMS))}
        if self.free_bias:
            acc["P"] = Accumulator((self.d1 + 1, K))      # the positive side (module doc)
        active = None
        if screen and self.screening:
            active = self._screen(two)
            if active is None:                        # a full pass refreshes the bounds
                acc["slack"] = Accumulator((sched.n_blocks, K), op="min")
        res = sched.map_reduce(_round_block, args=(self.W, self.Y, two, model, self.unit),
                               acc=acc, active=active)
        if "slack" in res:
            self.delta[...] = res["slack"]
            self.Wref[...] = self.W
            self.ref_age[0] = 0
        self._sides = res.get("P")
        return res["s"], res["G"]

    def _screen(self, two: bool):
        """The blocks this round must read (spec §4.5), or None for a full pass that
        refreshes the per-block bounds at the current point (the first, and every
        ``_SCREEN_EVERY``-th round, and whenever a stage changed ``μ``): a block is
        skipped when, for every model still training, both points of the round (``w`` and
        ``y``) lie within its bound ``min_i (m_i − 1)/‖x̄_i‖`` of the reference point —
        then every row has ``m_i > 1``: ``u_i = 0``, nothing to add."""
        self.ref_age[0] += 1
        if self.ref_age[0] > _SCREEN_EVERY or not np.isfinite(self.delta).any():
            return None
        live = ~self.done
        dist = np.sqrt(((self.W - self.Wref) ** 2).sum(axis=0))
        if two:
            moved = np.sqrt(((self.Y - self.Wref) ** 2).sum(axis=0))
            dist = np.where(self.kk > 0, np.maximum(dist, moved), dist)
        skip = (self.delta[:, live] > dist[live][None, :]).all(axis=1)
        self.screened += int(skip.sum())
        return ~skip

    def _reg(self, w: np.ndarray, smooth: bool, c: int) -> float:
        if not self.l1:
            if self.free_bias:
                return 0.5 * float(w[:-1] @ w[:-1])
            return 0.5 * float(w @ w)
        if not smooth:
            return float(np.abs(w).sum())
        m = self.mu1[c]                               # Σ_j l_μ₁(w_j), the Huber function
        a = np.abs(w)
        return float(np.where(a > m, a - 0.5 * m, a * a / (2 * m)).sum())

    def _absorb(self, c, s, Gc, two, Lc):
        """The round's numbers of model ``c``: the certificate at ``w`` (and ``y``), the
        safeguard's test; returns the round's :class:`_Round` for the steps that follow."""
        w = self.W[:, c]
        fmu = self._reg(w, True, c) + s[0]
        P = self._reg(w, False, c) + s[1]
        if self.sq:
            g = w - 2.0 * Gc
            D = 2.0 * s[2] - s[1] - 2.0 * float(Gc @ Gc)
            Dmu = D
        elif self.l1:
            g = np.clip(w / self.mu1[c], -1.0, 1.0) - Gc
            t = 1.0 / max(1.0, float(np.abs(Gc).max(initial=0.0)))
            D = t * s[2]
            Dmu = D - t * t * (0.5 * self.mu_h[c] * s[3] + 0.5 * self.mu1[c] * float(Gc @ Gc))
        elif self.free_bias:
            g = w - Gc
            g[-1] = -Gc[-1]                 # the bias is not regularized
            v, sa = self._balanced(c, Gc, s[2])
            D = sa - 0.5 * float(v @ v)
            Dmu = D - 0.5 * self.mu_h[c] * s[3]
        else:
            g = w - Gc
            D = s[2] - 0.5 * float(Gc @ Gc)
            Dmu = D - 0.5 * self.mu_h[c] * s[3]
        if not self.bias:
            g[-1] = 0.0
        self.n_sv = int(s[5])
        if self.mu_star[c] == 0 and not self.sq:
            self._set_mu_star(c, P)
        if P < self.primal[c]:
            self.primal[c] = P
            self.Wbest[:, c] = w
        if two:
            Py = self._reg(self.Y[:, c], False, c) + s[7]
            if Py < self.primal[c]:
                self.primal[c] = Py
                self.Wbest[:, c] = self.Y[:, c]
        # the dual point of this round, as (v = Σ α_i y_i x̄_i, Σ α_i, Σ α_i²/(4C_i))
        if self.sq:
            point = (2.0 * Gc, 2.0 * s[2], s[1])
        elif self.free_bias:
            point = (v, sa, 0.0)
        else:
            point = (Gc, s[2], 0.0)
        self.dual[c] = self._dual_points(c, point, float(self.kk[c] + 1) / 2.0)
        self.gap[c] = (self.primal[c] - self.dual[c]) / max(abs(self.primal[c]), 1e-300)
        self.sgap[c] = (fmu - Dmu) / max(abs(fmu), 1e-300)
        gsq = float(g @ self._minv(c, g))          # ‖g‖² in M's dual norm
        fy = np.inf
        # the curvature seen along the sequence (secants between its rounds), and the
        # gradient restart test ⟨g(w^k), w^k − w^{k−1}⟩ > 0 (O'Donoghue and Candès)
        uphill = False
        if self.kk[c] > 0:
            dw = w - self.Wp[:, c]
            nd = np.sqrt(self._mnorm2(c, dw))
            if nd > 0:
                dg = g - self.Gp[:, c]
                self.sec[c] = max(self.sec[c], float(np.sqrt(dg @ self._minv(c, dg))) / nd)
            uphill = float(g @ dw) > 0
        self.Wp[:, c] = w
        self.Gp[:, c] = g
        if self.gap[c] <= self.tol:
            self.done[c] = True
        elif self.shrink_l and self.kk[c] >= _SHRINK_AFTER and \
                _SHRINK_SHARE * self.sec[c] < Lc:
            self.restarts += 1          # L far above the curvature met: a new run below
            self._restart(c, shrink=True)
        elif self.restart and uphill and self.shrink_l:
            self.restarts += 1
            self._restart(c, shrink=True)
        elif two:
            fy = self._reg(self.Y[:, c], True, c) + s[6]
            f0, g0, fy0 = self.prev[c]
            if self.safeguard and fy > f0 - g0 / (2.0 * Lc) + 1e-12 * abs(f0):
                self.lmult[c] *= 2.0
                self.restarts += 1
                self._restart(c)
                log.info("nesvm: model %d: the descent test failed (F(y) %.9g > %.9g): L "
                         "doubled, the sequence restarted", c, fy, f0 - g0 / (2.0 * Lc))
            elif self.restart and fy > fy0:
                self.restarts += 1
                self._restart(c, shrink=self.shrink_l)
        return _Round(g, fmu, gsq, fy, (P - D) / max(abs(P), 1e-300))

    def _balanced(self, c, Gc, total) -> tuple[np.ndarray, float]:
        """A free bias (C-SVM): the round's dual point ``α_i = C_i u_i`` made feasible for
        the constraint ``Σ α_i y_i = 0`` by scaling the heavier side down (``α`` stays in its
        box), as ``(v = Σ α_i y_i x_i`` with the bias coordinate 0, ``Σ α_i)``; then ``D =
        Σ α − ½‖v‖²`` is a lower bound of the optimum (the dual of the problem with a free
        bias)."""
        P = self._sides[:, c]
        Gp, Ap = P[:-1], float(P[-1])
        An = float(total) - Ap
        Gn = Gp - Gc                        # Gc = G₊ − G₋
        sp = min(1.0, An / Ap) if Ap > 0 else 1.0
        sn = min(1.0, Ap / An) if An > 0 else 1.0
        v = sp * Gp - sn * Gn
        v[-1] = 0.0
        return v, sp * Ap + sn * max(An, 0.0)

    def _dual_value(self, v, sa, q) -> float:
        if self.l1:
            return sa / max(1.0, float(np.abs(v).max(initial=0.0)))
        return sa - q - 0.5 * float(v @ v)

    def _dual_points(self, c, point, weight) -> float:
        """The best dual bound: the round's point, the sequence's weighted average of its
        points (Nesterov's aggregated dual, which converges where single points stall) and
        the best point so far, combined by an exact line search on the segment (``D`` is a
        concave quadratic in ``α``, every convex combination is feasible; the LS-SVM's
        ``Σ α²/(4C)`` taken at its convex upper bound, the weighted mean). No pass."""
        v, sa, q = point
        w0 = self.agg_w[c]
        t = weight / (w0 + weight)
        self.agg_v[:, c] += t * (v - self.agg_v[:, c])
        self.agg_s[c] = (1 - t) * self.agg_s[c] + t * sa
        self.agg_q[c] = (1 - t) * self.agg_q[c] + t * q
        self.agg_w[c] = w0 + weight
        for cand in (point, (self.agg_v[:, c], self.agg_s[c], self.agg_q[c])):
            bv, bs, bq = self.best_v[:, c], self.best_s[c], self.best_q[c]
            if not np.isfinite(self.dual[c]):
                theta = 1.0
            elif self.l1:
                theta = 1.0 if self._dual_value(*cand) > self.dual[c] else 0.0
            else:
                dv = cand[0] - bv
                lin = (cand[1] - bs) - (cand[2] - bq) - float(bv @ dv)
                dd = float(dv @ dv)
                theta = float(np.clip(lin / dd, 0.0, 1.0)) if dd > 0 else float(lin > 0)
            if theta > 0.0:
                self.best_v[:, c] = bv + theta * (cand[0] - bv)
                self.best_s[c] = bs + theta * (cand[1] - bs)
                self.best_q[c] = bq + theta * (cand[2] - bq)
                self.dual[c] = max(self.dual[c], self._dual_value(
                    self.best_v[:, c], self.best_s[c], self.best_q[c]))
        return self.dual[c]

    def _lmult_floor(self, c) -> float:
        """The smallest share of ``L`` worth trying: its regularizer part alone (1, or
        ``1/μ₁`` for LP-SVM) is a lower bound of the curvature."""
        L = self._L()[c] / self.lmult[c]
        return (1.0 / self.mu1[c] if self.l1 else 1.0) / L

    def _restart(self, c, shrink=False) -> None:
        """A new sequence from the current point (``w* = w``, ``k = 0``, ``S = 0``); with
        ``shrink`` (an adaptive restart under ``shrink_l``), ``L`` set to twice the largest
        secant curvature the last sequence met, within [its regularizer's, the global
        bound]."""
        if shrink:
            if self.sec[c] > 0:
                base = self._L()[c] / self.lmult[c]
                self.lmult[c] = min(1.0, max(2.0 * self.sec[c] / base, self._lmult_floor(c)))
        self.sec[c] = 0.0
        self.Z[:, c] = self.W[:, c]
        self.S[:, c] = 0.0
        self.kk[c] = 0
        self.agg_w[c] = 0.0

    def _stage_over(self, c, rd) -> bool:
        """Whether the stage's smoothed problem is solved well enough: to ``tol`` at the last
        stage (``homotopy="none"``, or ``μ*`` reached), loosely before (module doc)."""
        if self.sq:
            return False
        last = self.homotopy == "none" or (self.homotopy != "auto" and
                                           self.mu_h[c] <= self.mu_star[c] * (1 + 1e-12))
        if last:
            return self.sgap[c] <= self.tol
        smooth_part = max(rd.true_gap - self.sgap[c], 0.0)
        return self.sgap[c] <= max(0.5 * self.tol, _STAGE_SHARE * smooth_part)

    def _next_stage(self, c, rd) -> None:
        """μ (and μ₁) of the next stage; the last stage solved ends the model's run."""
        mode = self.homotopy
        mu = self.mu_h[c]
        if mode == "none":
            self.done[c] = True
            return
        if mode == "auto":
            smooth_part = max(rd.true_gap - self.sgap[c], 1e-300)
            new = mu * float(np.clip(0.5 * self.tol / smooth_part, *_RHO_AUTO))
        else:
            if mu <= self.mu_star[c] * (1 + 1e-12):
                self.done[c] = True
                return
            t = self.stage[c] + 1
            new = self.rho * mu if mode == "geometric" else self.mu / (t + 1)
            new = max(new, self.mu_star[c])
        factor = new / mu
        self.mu_h[c] = new
        self.mu1[c] *= factor
        self.stage[c] += 1
        self.delta[:] = -np.inf              # the bounds were for the last stage's points
        if not self.shrink_l:
            self.lmult[c] = 1.0
        self._restart(c)
        log.info("nesvm: model %d: stage %d, mu %.3g", c, self.stage[c], new)

    def _advance(self, c, Lc, rd) -> None:
        """Steps 3–4 of Algorithm 1 (spec §3.1) from the round's gradient."""
        g = rd.g
        k = self.kk[c]
        w = self.W[:, c]
        y = w - self._minv(c, g) / Lc
        self.S[:, c] += 0.5 * (k + 1) * g
        z = self.Z[:, c] - self._minv(c, self.S[:, c]) / Lc
        self.Y[:, c] = y
        self.W[:, c] = (2.0 / (k + 3)) * z + ((k + 1.0) / (k + 3)) * y
        self.kk[c] = k + 1
        self.prev[c] = (rd.fmu, rd.gsq, rd.fy)

    def _entry(self, kind) -> dict:
        return {"kind": kind, "primal": float(self.primal.sum()), "dual": float(self.dual.sum()),
                "gap": float(self.gap.max()), "exact": bool(np.isfinite(self.gap).all()),
                "active": self.n_sv, "mu": float(self.mu_h.max()),
                "lipschitz": float(self._L().max()) if np.isfinite(self.lam[0]) else 0.0,
                "smoothed_gap": float(self.sgap.max()),
                "stop": bool(self.done.all())}


@dataclasses.dataclass(frozen=True)
class _Round:
    """What a round measured for one model: the gradient at ``w``, ``F_μ(w)``, ``‖g‖²`` (in
    ``M``'s dual norm), ``F_μ(y)`` (inf when ``y`` was not evaluated) and the true relative
    gap at ``w``."""

    g: np.ndarray
    fmu: float
    gsq: float
    fy: float
    true_gap: float


def _round_block(block, views, args, acc) -> None:
    """One block of a round (``map_reduce`` kernel): :func:`nesvm_rows`, and the block's
    screening slack at ``W`` per model (``acc["slack"][block id]``)."""
    W, Y, two, model, unit = args
    slack = np.full(W.shape[1], np.inf)
    sides = acc["P"] if "P" in acc else np.empty((0, W.shape[1]))
    nesvm_rows((block.indptr, block.indices, block.data), unit, block.y, model, W, Y, two,
               np.empty((3, W.shape[1])), acc["G"], acc["s"], slack, sides)
    if "slack" in acc:
        np.minimum(acc["slack"][block.id], slack, out=acc["slack"][block.id])


def _power_block(block, views, args, acc) -> None:
    """One block of the power iteration (``map_reduce`` kernel): :func:`nesvm_power`."""
    V, unit, B, scaled = args
    st = np.zeros(4)
    nesvm_power((block.indptr, block.indices, block.data), unit, B, scaled, V,
                np.empty(V.shape[1]), acc["M"], st)
    acc["stats"] += st[:3]
    acc["qs_max"][0] = max(acc["qs_max"][0], st[3])
