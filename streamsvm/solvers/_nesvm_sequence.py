"""nesvm's Nesterov sequences (spec §3.1, Algorithm 1), one per model, and what restarts them.

With ``g^k = ∇F_μ(w^k)``: ``y^k = w^k − M⁻¹g^k/L``, ``S^k = Σ_{i≤k} (i+1)/2 g^i``, ``z^k = w* −
M⁻¹S^k/L``, ``w^{k+1} = 2/(k+3) z^k + (k+1)/(k+3) y^k`` (``M`` the step metric,
``_nesvm_metric.py``; ``w*`` the prox-centre). A restart begins a new sequence at the current
point (``w* = w``, ``k = 0``, ``S = 0``); it follows

* the lagged descent test (``safeguard``, spec §5 item 5a): the round that evaluates
  ``w^{k+1}`` also evaluates ``F_μ(y^k)``; if ``F_μ(y^k) > F_μ(w^k) − ‖g^k‖²/(2L)``, ``L``
  doubles;
* ``shrink_l``: the largest secant ``‖Δg‖_{M⁻¹}/‖Δw‖_M`` the sequence met stayed below
  ``L/``:data:`SHRINK_SHARE` for :data:`SHRINK_AFTER` rounds, or an adaptive restart:
  ``L`` becomes twice that secant, within [the regularizer's curvature, the global bound];
* ``restart`` (O'Donoghue–Candès): ``F_μ(y^k)`` increased, or (with ``shrink_l``) the
  gradient points uphill along the last step;
* a new homotopy stage (``_nesvm_homotopy.py``).

``L``'s factor on its bound, ``lmult``, carries the doublings and the shrinking.
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np

__all__ = ["Round", "Sequences"]

log = logging.getLogger(__name__)

SHRINK_AFTER = 30       # shrink_l: after this many rounds of a sequence, a restart at
SHRINK_SHARE = 4        # 2× the largest secant when L exceeds this many times it


@dataclasses.dataclass(frozen=True)
class Round:
    """What a round measured for one model: the gradient at ``w``, ``F_μ(w)``, ``‖g‖²`` (in
    ``M``'s dual norm), ``F_μ(y)`` (inf when ``y`` was not evaluated) and the true relative
    gap at ``w``."""

    g: np.ndarray
    fmu: float
    gsq: float
    fy: float
    true_gap: float


class Sequences:
    """The Nesterov sequences of :class:`~streamsvm.solvers.nesvm.NesvmSolver` (a mixin;
    module doc). Owns ``W`` (``w^k``), ``Z`` (``w*``), ``S``, ``Y`` (``y^{k−1}``), ``kk``,
    ``lmult``, ``Wp``/``Gp`` (the last round's ``w``, ``g``), ``sec``, ``prev`` and
    ``restarts``; uses the metric (``_L``, ``_minv``, ``_mnorm2``), the certificate's
    ``gap``, ``_reg`` and ``_restart_average``, and the solver's ``done``, ``tol`` and
    flags (``restart``, ``shrink_l``, ``safeguard``, ``l1``)."""

    def _start_sequences(self, D1: int, K: int) -> None:
        self.W = self.initial_W(D1, K)              # w^k (w^0: a warm start's, or 0)
        self.Z = self.W.copy()                      # the prox-centre w*
        self.S = np.zeros((D1, K))                  # Σ (i+1)/2 g^i
        self.Y = np.zeros((D1, K))                  # y^{k-1}, evaluated with w^k
        self.kk = np.zeros(K, dtype=np.int64)       # k in the current sequence
        self.lmult = np.ones(K)                     # the safeguard's doublings
        self.Wp, self.Gp = np.zeros((D1, K)), np.zeros((D1, K))   # the last round's w, g
        self.sec = np.zeros(K)                      # the sequence's largest secant
        self.prev = np.full((K, 3), np.nan)         # the last round's F_μ(w^k), ‖g^k‖²,
                                                    # F_μ(y^{k-1})
        self.restarts = 0

    def _steer(self, c, s, g, fmu, true_gap, two, Lc) -> Round:
        """After the certificate, model ``c``'s sequence: the curvature seen along it, and
        the tests that end the model (its gap at ``tol``) or restart the sequence (module
        doc); the round's :class:`Round` for the steps that follow."""
        w = self.W[:, c]
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
        elif self.shrink_l and self.kk[c] >= SHRINK_AFTER and \
                SHRINK_SHARE * self.sec[c] < Lc:
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
        return Round(g, fmu, gsq, fy, true_gap)

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
        self._restart_average(c)

    def _restart_stage(self, c) -> None:
        """A new homotopy stage's sequence: ``L`` back at its bound unless ``shrink_l``
        follows the curvature."""
        if not self.shrink_l:
            self.lmult[c] = 1.0
        self._restart(c)

    def _advance(self, c, Lc, rd: Round) -> None:
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
