"""nesvm's homotopy on the smoothing (spec §3.3, the fixed Algorithm 2): the stages of
decreasing ``μ`` (and ``μ₁`` with it), per model.

A stage ends when its smoothed gap is at most ``max(tol/2,`` :data:`STAGE_SHARE` ``· (the
part of the true gap the smoothing adds))``, or, at the last stage, at most ``tol``. The
next ``μ``: ``homotopy="auto"`` ``μ·clip(½ tol / smoothing part,`` :data:`RHO_AUTO` ``)``
(no last stage: the true gap ends the run); ``"geometric"`` ``max(ρμ, μ*)``; ``"harmonic"``
``max(μ₀/(t+1), μ*)``; ``"none"``: one stage. ``μ*`` is ``mu_min``, or the accuracy recipe
``tol·P(w⁰)/(C Σ s̄)`` from the first round's primal. The squared loss is smooth: no stages.
"""

from __future__ import annotations

import logging

import numpy as np

__all__ = ["Homotopy"]

log = logging.getLogger(__name__)

STAGE_SHARE = 0.25      # a stage ends once its smoothed gap is below this share of the
                        # smoothing's part of the true gap (or below tol/2)
RHO_AUTO = (0.1, 0.5)   # homotopy="auto": the range of μ's factor per stage


class Homotopy:
    """The smoothing's schedule of :class:`~streamsvm.solvers.nesvm.NesvmSolver` (a mixin;
    module doc). Owns ``mu_h``, ``mu1``, ``stage`` and ``mu_star``; reads the certificate's
    ``sgap``, the Lipschitz phase's ``stats``, the kernels' ``costs`` and the solver's
    parameters (``homotopy``, ``mu``, ``mu_l1``, ``mu_min``, ``rho``, ``tol``); sets
    ``done`` when a model's last stage is solved."""

    def _start_homotopy(self, K: int) -> None:
        self.mu_h = np.full(K, 0.0 if self.sq else self.mu)
        self.mu1 = np.full(K, self.mu_l1 if self.l1 else 0.0)
        self.stage = np.zeros(K, dtype=np.int64)
        self.mu_star = np.zeros(K)                  # geometric/harmonic: the last stage's μ

    def _set_mu_star(self, c, P0) -> None:
        """geometric/harmonic: the last stage's μ (module doc), from ``P(w⁰)`` (the first
        round's primal); once, and not for the squared loss."""
        if self.mu_star[c] != 0 or self.sq:
            return
        if self.mu_min > 0:
            self.mu_star[c] = self.mu_min
        else:
            Cmax = max(self.costs.Cp[c], self.costs.Cn[c])
            self.mu_star[c] = self.tol * P0 / (Cmax * max(self.stats[0], 1e-300))
        self.mu_star[c] = min(self.mu_star[c], self.mu)

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
        return self.sgap[c] <= max(0.5 * self.tol, STAGE_SHARE * smooth_part)

    def _next_stage(self, c, rd) -> bool:
        """μ (and μ₁) of the next stage, True; False when the last stage solved ends the
        model's run."""
        mode = self.homotopy
        mu = self.mu_h[c]
        if mode == "none":
            self.done[c] = True
            return False
        if mode == "auto":
            smooth_part = max(rd.true_gap - self.sgap[c], 1e-300)
            new = mu * float(np.clip(0.5 * self.tol / smooth_part, *RHO_AUTO))
        else:
            if mu <= self.mu_star[c] * (1 + 1e-12):
                self.done[c] = True
                return False
            t = self.stage[c] + 1
            new = self.rho * mu if mode == "geometric" else self.mu / (t + 1)
            new = max(new, self.mu_star[c])
        factor = new / mu
        self.mu_h[c] = new
        self.mu1[c] *= factor
        self.stage[c] += 1
        log.info("nesvm: model %d: stage %d, mu %.3g", c, self.stage[c], new)
        return True
