"""alm's certificate (module doc of :mod:`.alm`, "Certificate"; spec_004 §1.1): the objective
at the iterate, the dual bound of two dual points from the same pass, the best of each, the
gap; no pass of its own.

Pass A (``kernels/_alm.py``'s ``alm_rows``) sums, per model and side of the labels, ``Σ α``,
``Σ ψ*(α)`` and ``Σ α x̄`` of the multipliers' point ``α = −y λ`` (clipped) and of a second
point from the primal (``α = p C ξ^{p−1}``, or for p = 1 the band rule of half-width
:data:`BAND`). Each is made dual feasible by one scale per side (a free bias: ``Σ α y = 0``)
and one common scale ``t`` that maximizes the dual, a 1-D concave problem
(:func:`concave_max`).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["AlmCertificate", "BAND", "concave_max"]

BAND = 0.1              # p = 1: the second dual point's margin band (module doc of .alm)


class AlmCertificate:
    """The certificate of :class:`~streamsvm.solvers.alm.AlmSolver` (a mixin over the
    solver's attributes: it reads ``W``, ``k``, ``p``, ``free``, ``paper`` and ``tol``, and
    keeps the best point ``Wcert``, ``primal``, ``dual``, ``gap``, the objective at the last
    evaluation ``last`` and ``n_sv``)."""

    def _absorb(self, s, V, gobj):
        """The iterate's objective, the multipliers' dual bound, the best point; returns
        (every model certified, ``‖∇_w obj‖`` per model (paper mode), the relative objective
        change per model)."""
        K = self.k
        gnorm = np.full(K, np.inf)
        change = np.full(K, np.inf)
        for c in range(K):
            w = self.W[:, c]
            P = 0.5 * float(w[:-1] @ w[:-1]) + s[c, 0]
            if not self.free:
                P += 0.5 * float(w[-1] * w[-1])
            if np.isfinite(self.last[c]):
                change[c] = abs(P - self.last[c]) / max(abs(self.last[c]), 1e-300)
            self.last[c] = P
            if self.paper:
                self.primal[c] = P                   # the last evaluated point (the paper's)
                self.Wcert[:, c] = w
                gnorm[c] = float(np.linalg.norm(w[:-1] - gobj[:-1, c]))
            elif P < self.primal[c]:
                self.primal[c] = P
                self.Wcert[:, c] = w
            self.dual[c] = max(self.dual[c], self._dual(s[c, 2:6], V[:, c], V[:, K + c]),
                               self._dual(s[c, 7:11], V[:, 2 * K + c], V[:, 3 * K + c]))
            self.gap[c] = (self.primal[c] - self.dual[c]) / max(abs(self.primal[c]), 1e-300)
        self.n_sv = int(s[:, 6].max())
        return bool((self.gap <= self.tol).all()), gnorm, change

    def _dual(self, sc, Vp, Vn) -> float:
        """The dual bound of the multipliers' point (module doc): the best scale ``t`` of
        the clipped ``α`` (free bias: ``t/Σα`` per side, so that ``Σ α y = 0``)."""
        p = self.p
        q = p / (p - 1.0) if p > 1.0 else 0.0
        Sp, Sn, Qp, Qn = sc
        if self.free:
            if Sp <= 0.0 or Sn <= 0.0:
                return 0.0
            u = Vp[:-1] / Sp - Vn[:-1] / Sn
            lin = 2.0
            a = Qp / Sp ** q + Qn / Sn ** q if p > 1.0 else 0.0
            tmax = min(Sp, Sn) if p == 1.0 else math.inf
        else:
            u = Vp - Vn
            lin = Sp + Sn
            a = Qp + Qn
            tmax = 1.0 if p == 1.0 else math.inf
        return concave_max(lin, a, q, float(u @ u), tmax)


def concave_max(lin, a, q, uu, tmax) -> float:
    """``max_{0 ≤ t ≤ tmax} lin·t − a·t^q − ½ uu t²`` (``a = 0`` when ``q = 0``, p = 1)."""
    if lin <= 0.0:
        return 0.0

    def f(t):
        return lin * t - (a * t ** q if a > 0.0 else 0.0) - 0.5 * uu * t * t

    if a <= 0.0 or not math.isfinite(a):
        if not math.isfinite(a):
            return 0.0
        t = lin / uu if uu > 0.0 else tmax
        return f(min(t, tmax)) if math.isfinite(min(t, tmax)) else 0.0
    if q == 2.0:
        return f(min(lin / (2.0 * a + uu), tmax))
    # f'(t) = lin − q a t^(q−1) − uu t decreases: bisect its root below the two bounds
    hi = min(tmax, (lin / (q * a)) ** (1.0 / (q - 1.0)), lin / uu if uu > 0.0 else math.inf)
    lo = 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if lin - q * a * mid ** (q - 1.0) - uu * mid > 0.0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-15 * hi:
            break
    return f(lo)
