"""alm's rules between two iterations (module doc of :mod:`.alm`, "Defaults"; spec_004
§4.3): whether the iteration ends the run — the certified gap, the paper's rules (paper mode)
or ``stop_rule="residuals"`` — and the penalty μ of the next one (the paper's geometric
growth by ρ, capped at ``mu_max``, or residual balancing).
"""

from __future__ import annotations

import math
import warnings

__all__ = ["AlmRules"]

_BALANCE_RATIO = 10.0    # residual balancing: change μ when one residual is 10× the other
_BALANCE_CHANGES = 50    # ... at most this many times (ADMM converges for eventually fixed μ)
_PAPER_OBJ_CHANGE = 1e-4  # the paper's objective-change rule (relative)
_CALM_ITERATIONS = 3     # stop_rule="residuals": the objective's change small this many times


class AlmRules:
    """The stopping rules and μ's schedule of :class:`~streamsvm.solvers.alm.AlmSolver` (a
    mixin over the solver's attributes: it reads ``iters``, ``gap``, ``dq``, ``paper`` and
    the parameters ``tol``, ``gtol``, ``max_iter``, ``stop_rule``, ``rtol``, ``rho``,
    ``mu_max`` and ``balance``, and keeps ``mus`` (μ_old, μ_new), ``calm`` and
    ``changes``)."""

    def _stopped(self, entry, certified, gnorm, change) -> bool:
        """Whether the iteration of ``entry`` ends the run, with no (w, b) step: every model
        ``certified`` (practical mode), or a rule of the paper / of ``stop_rule="residuals"``
        (``entry["stop"]`` set, and a warning when the gap is still above ``tol``)."""
        if self.paper:
            why = self._paper_rule(gnorm, change)
        elif certified:
            return True
        elif self.stop_rule == "residuals":
            why = self._residual_rule(entry, change)
        else:
            return False
        if why is None:
            return False
        if self.gap.max() > self.tol:
            warnings.warn(f"alm {why} with relative duality gap {self.gap.max():.3g} > tol="
                          f"{self.tol:g}", UserWarning, stacklevel=3)
        entry["stop"] = True
        return True

    def _paper_rule(self, gnorm, change) -> str | None:
        """The paper's stop (module doc): ``‖∇_w obj‖ ≤ gtol``, a small objective change or
        ``max_iter`` iterations; ``None`` while none holds."""
        rule = None
        if (gnorm <= self.gtol).all():
            rule = f"||grad_w obj|| = {gnorm.max():.3g} <= gtol={self.gtol:g}"
        elif self.iters > 1 and (change <= _PAPER_OBJ_CHANGE).all():
            rule = f"objective change {change.max():.3g} <= {_PAPER_OBJ_CHANGE:g}"
        elif self.iters >= self.max_iter:
            rule = f"max_iter={self.max_iter} iterations"
        return None if rule is None else f"(paper mode) stopped by the paper's rule ({rule})"

    def _residual_rule(self, entry, change) -> str | None:
        """``stop_rule="residuals"``: both residuals at most ``rtol`` and the objective calm
        :data:`_CALM_ITERATIONS` iterations running; ``None`` while not."""
        calm = self.iters > 1 and (change <= _PAPER_OBJ_CHANGE).all()
        self.calm = self.calm + 1 if calm else 0
        if self.calm >= _CALM_ITERATIONS and entry["primal_residual"] <= self.rtol and \
                entry["dual_residual"] <= self.rtol:
            return (f"stopped by stop_rule='residuals' (residuals <= rtol={self.rtol:g}, "
                    f"objective change <= 1e-4 for {_CALM_ITERATIONS} iterations)")
        return None

    def _next_mu(self, s) -> None:
        """μ of the next iteration: the paper's geometric growth (ρ, capped), or residual
        balancing on this iteration's residuals (module doc)."""
        mu = self.mus[1]
        new = min(mu * (self.rho if self.rho is not None else 1.0), self.mu_max)
        if self.balance and self.iters > 1 and self.changes < _BALANCE_CHANGES:
            r = math.sqrt(float(s[:, 1].sum()))
            d = self.mus[0] * math.sqrt(float(self.dq.sum()))
            if r > _BALANCE_RATIO * d:
                new, self.changes = min(2.0 * mu, self.mu_max), self.changes + 1
            elif d > _BALANCE_RATIO * r:
                new, self.changes = 0.5 * mu, self.changes + 1
        self.mus[0], self.mus[1] = mu, new
