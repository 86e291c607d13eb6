"""nesvm's certificate (spec §4.4): the objective values, the gradient and a dual point from
each round's sums, the best dual bound, the gap; no pass of its own.

A round's pass (``kernels/_nesvm.py``'s ``nesvm_rows``) sums, per model, ``G = Σ α_i y_i
x̄_i`` with ``α_i = C_i u_i`` (``u_i`` the smoothed hinge's multiplier; LS-SVM: ``α_i = 2C_i
r_i``), the losses and ``Σ α_i``; then ``∇F_μ(w) = w̄ − G`` (plus the regularizer's own
gradient) and ``α`` is dual feasible, so the same sums give the dual value:

* C-SVM: ``D = Σ α_i − ½‖G‖²``; LS-SVM: ``D = Σ α_i − Σ α_i²/(4C_i) − ½‖G‖²``;
* LP-SVM: ``α`` scaled by ``t = 1/max(1, ‖G‖∞)``, ``D = t Σ α_i``;
* a free bias (C-SVM): ``Σ α_i y_i = 0`` is a dual constraint, so the heavier class side is
  scaled down to balance the other (the pass also sums the positive side), and ``D = Σ α −
  ½‖v‖²`` with ``v`` the balanced ``Σ α y x`` without the bias coordinate.

The dual bound is the best of the round's point, the sequence's average of its points
(weights ``(k+1)/2``, Nesterov's aggregated dual, which converges where single points stall)
and the best point so far, combined by an exact line search (``D`` is a concave quadratic in
``α``). The primal side is the best point evaluated (``w^k`` and ``y^k``): the model
returned. The reported gap ``(P_best − D_best)/P_best`` is exact; the smoothed gap ``(F_μ −
D_μ)/F_μ`` at the round's point steers the homotopy (``_nesvm_homotopy.py``).
"""

from __future__ import annotations

import numpy as np

__all__ = ["Certificate"]


class Certificate:
    """The certificate of :class:`~streamsvm.solvers.nesvm.NesvmSolver` (a mixin; module
    doc). Owns ``Wbest``, ``primal``, ``dual``, ``gap``, ``sgap`` and the dual points
    (``best_v``/``_s``/``_q``, the sequence's average ``agg_v``/``_s``/``_q`` with its
    weight ``agg_w``); reads the sequences' ``W``, ``Y`` and ``kk``, the homotopy's
    ``mu_h``/``mu1``, the round's ``_sides`` and the solver's problem flags (``sq``, ``l1``,
    ``free_bias``, ``bias``); sets ``n_sv``."""

    def _start_certificate(self, D1: int, K: int) -> None:
        # the certificate: the best point evaluated, the best dual bound
        self.Wbest = np.zeros((D1, K))
        self.primal = np.full(K, np.inf)
        self.dual = np.full(K, -np.inf)
        self.gap = np.full(K, np.inf)
        self.sgap = np.full(K, np.inf)              # the smoothed gap at the last point
        # dual points (v = Σ α y x̄, Σ α, Σ α²/4C): the best, the sequence's average
        self.best_v, self.agg_v = np.zeros((D1, K)), np.zeros((D1, K))
        self.best_s, self.best_q, self.agg_s, self.agg_q, self.agg_w = np.zeros((5, K))

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

    def _certify(self, c, s, Gc, two) -> tuple[np.ndarray, float, float, float]:
        """The round's numbers of model ``c`` from its sums ``s`` and ``Gc`` (module doc):
        ``(g, F_μ(w), P(w), the true relative gap at w)``; the best point and the dual
        bound, the gaps updated (``y`` evaluated too when ``two``)."""
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
        return g, fmu, P, (P - D) / max(abs(P), 1e-300)

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

    def _restart_average(self, c) -> None:
        """A new sequence: its average of dual points starts over."""
        self.agg_w[c] = 0.0
