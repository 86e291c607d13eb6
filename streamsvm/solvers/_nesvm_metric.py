"""nesvm's step metric (``precondition``, not in the paper) and ``L`` in it.

The power iteration (``_nesvm_lipschitz.py``) leaves 8 Ritz pairs ``(θ_j, v_j)`` of the data
term's operator. Steps are taken in ``M = I + Σ_{j<8} β_j v_j v_jᵀ`` with ``β_j = a(θ_j −
θ_8)/(L0 + a θ_8)``, ``L0`` the regularizer's curvature (1, or ``1/μ₁`` for the ℓ1 norm's
Huber function) and ``a`` the data term's factor on the operator (``C/μ``, or ``2C`` for
the squared loss): on ``v_j`` the Hessian is at most ``L0 + a θ_j = L_M (1 + β_j)``, so
``L_M = L0 + a θ_8`` bounds it in that metric, against ``L0 + a Λ`` without it. ``M⁻¹`` is
Sherman–Morrison–Woodbury on the orthonormal ``v_j``: ``M⁻¹g = g − Σ_j β_j/(1 + β_j) v_j
(v_jᵀg)``. Without preconditioning ``M = I`` and ``L = L0 + a Λ``; both times the
safeguard's factor ``lmult`` (``_nesvm_sequence.py``) scales ``L``.
"""

from __future__ import annotations

import numpy as np

__all__ = ["Metric"]


class Metric:
    """``M`` and ``L`` per model for :class:`~streamsvm.solvers.nesvm.NesvmSolver` (a mixin;
    module doc). Owns no state: reads the Lipschitz phase's ``lam``, ``theta``, ``V`` and
    ``nv``, the kernels' ``costs``, the homotopy's ``mu_h``/``mu1``, the sequences'
    ``lmult`` and the solver's ``precondition``, ``lipschitz``, ``l1``, ``sq`` and ``k``."""

    def _curvatures(self):
        """``(L0, a)`` per model: the regularizer's curvature (1, or ``1/μ₁``) and the data
        term's factor on the operator (``C/μ``, or ``2C`` for the squared loss)."""
        Cmax = np.maximum(self.costs.Cp, self.costs.Cn)
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
