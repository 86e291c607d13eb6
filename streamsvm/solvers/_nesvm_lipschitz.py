"""nesvm's Lipschitz phase (spec §5): the passes that bound the data term's curvature before
the first round, and the value kept with the store.

The operator is ``Σ x̄ x̄ᵀ/s̄`` (hinge: ``Λ_S``) or ``Σ x̄ x̄ᵀ`` (squared loss: ``Λ``), with
``s̄_i = max(‖x_i‖∞, B)``. With ``lipschitz="power"`` each pass multiplies a block of
:data:`POWER_VECTORS` orthonormal vectors by it (``kernels/_nesvm.py``'s ``nesvm_power``)
and takes the Rayleigh–Ritz pairs of the block; the iteration ends when the top pair's
residual is below :data:`POWER_RTOL` of its value and the last Ritz value moved less than
that share (or after :data:`POWER_PASSES` passes), with ``Λ = θ₁ + ‖residual‖`` and the Ritz
pairs kept for the preconditioner (``_nesvm_metric.py``). Every pass also sums the rows'
statistics (``Σ s̄``, ``Σ q̄``, ``Σ q̄/s̄``, ``max q̄/s̄``), from which ``"trace"`` and
``"paper"`` take their bounds after one pass.

The value, the statistics and the Ritz vectors are kept by the scheduler with the store, per
operator and bias value (``sched.derived`` / ``sched.keep_derived``): a second run on the
store starts from them and pays no pass.
"""

from __future__ import annotations

import logging

import numpy as np

from ..kernels._nesvm import nesvm_power
from ..schedule import Accumulator

__all__ = ["POWER_PASSES", "POWER_VECTORS", "LipschitzPhase"]

log = logging.getLogger(__name__)

POWER_VECTORS = 8       # block power iteration: vectors per pass (the top 7 precondition)
POWER_RTOL = 1e-2       # ... until the top Ritz pair's residual is below this share and
                        # the last Ritz value (the bulk bound) changed less than it
POWER_PASSES = 30       # ... or this many passes (then θ + ‖r‖ is still an upper bound
                        # of an eigenvalue, and the safeguard guards the rest)


class LipschitzPhase:
    """The Lipschitz phase of :class:`~streamsvm.solvers.nesvm.NesvmSolver` (a mixin; module
    doc). Owns ``lam`` (``Λ_S`` or ``Λ``; NaN until known), ``stats``, ``V`` and ``theta``
    (the Ritz pairs, largest first), ``nv``, ``power_passes``, ``power_theta`` and
    ``lip_key``; reads the solver's ``lipschitz``, ``bias``, ``sq``, ``unit``, ``d1``,
    ``n_rows`` and (for the history) ``mu_h``."""

    def _start_lipschitz(self, sched) -> None:
        """The phase's state: the power iteration's start, or what the store's cache holds."""
        D1 = self.d1
        # cached per operator (Σ x̄x̄ᵀ/s̄ or Σ x̄x̄ᵀ) and bias value
        self.lip_key = f"nesvm.lipschitz.{'gram' if self.sq else 'gram_over_inf'}.B={self.bias!r}"
        # the Lipschitz phase: a cached value, or the power iteration's (or stats) passes
        self.lam = np.full(1, np.nan)               # Λ_S (hinge) or Λ (squared)
        self.stats = np.zeros(4)                    # Σ s̄, Σ q̄, Σ q̄/s̄, max q̄/s̄
        # (a space of D1 < POWER_VECTORS dimensions holds D1 vectors: all of it)
        self.nv = min(POWER_VECTORS, D1)
        self.theta = np.zeros(self.nv)              # Ritz values, largest first
        rng = sched.rng(0x4E45)                     # the power iteration's start
        V = rng.standard_normal((D1, POWER_VECTORS))[:, :self.nv]
        V[:, 0] = 1.0
        if not self.bias:
            V[-1] = 0.0
        self.V = np.linalg.qr(V)[0]
        cached, vecs = sched.derived(self.lip_key, with_array=True)
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

    def _bound_from_stats(self) -> float:
        s_sum, q_sum, qs_sum, qs_max = self.stats
        if self.lipschitz == "trace":
            return q_sum if self.sq else qs_sum
        return self.n_rows * qs_max                # the paper's Eq. 21/48

    def _lipschitz_pass(self, sched) -> dict:
        """One pass of the block power iteration (spec §5 item 3), the rows' statistics
        with it; its history entry."""
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
            self._rayleigh_ritz(res["M"])
        if np.isfinite(self.lam[0]):
            self._keep_lipschitz(sched)
        return {"kind": "lipschitz", "primal": np.nan, "dual": np.nan, "gap": np.inf,
                "exact": False, "active": 0, "mu": float(self.mu_h.max()),
                "lipschitz": float(self.lam[0]) if np.isfinite(self.lam[0]) else 0.0,
                "smoothed_gap": np.inf}

    def _rayleigh_ritz(self, MV: np.ndarray) -> None:
        """The Ritz pairs of the block ``V`` from its product ``MV``: the next block, or, once
        converged (module doc), ``Λ`` and the Ritz vectors."""
        H = self.V.T @ MV
        H = 0.5 * (H + H.T)
        theta, vecs = np.linalg.eigh(H)
        theta, vecs = theta[::-1], vecs[:, ::-1]
        top = vecs[:, 0]
        resid = float(np.linalg.norm(MV @ top - theta[0] * (self.V @ top)))
        bulk_moved = abs(theta[-1] - self.theta[-1]) > POWER_RTOL * theta[-1]
        self.power_theta = float(theta[0])
        log.info("nesvm: power iteration pass %d: theta %.6g residual %.3g, bulk %.6g",
                 self.power_passes, theta[0], resid, theta[-1])
        if (resid <= POWER_RTOL * theta[0] and not bulk_moved) or \
                self.power_passes >= POWER_PASSES:
            self.lam[0] = theta[0] + resid
            self.V = self.V @ vecs               # the Ritz vectors
            self.theta[:] = np.maximum(theta, 0.0)
        else:
            self.theta[:] = theta
            self.V = np.linalg.qr(MV @ vecs)[0]

    def _keep_lipschitz(self, sched) -> None:
        """The value found, kept with the store by the scheduler (a bound from the statistics
        keeps the power iteration's value cached before, if any)."""
        old = sched.derived(self.lip_key) or {}
        power = self.lipschitz == "power"
        sched.keep_derived(self.lip_key, {
            "stats": [float(v) for v in self.stats],
            "lambda": float(self.lam[0]) if power else old.get("lambda"),
            "theta": [float(t) for t in self.theta] if power else old.get("theta"),
            "passes": self.power_passes}, array=self.V if power else None)


def _power_block(block, views, args, acc) -> None:
    """One block of the power iteration (``map_reduce`` kernel): :func:`nesvm_power`."""
    V, unit, B, scaled = args
    st = np.zeros(4)
    nesvm_power((block.indptr, block.indices, block.data), unit, B, scaled, V,
                np.empty(V.shape[1]), acc["M"], st)
    acc["stats"] += st[:3]
    acc["qs_max"][0] = max(acc["qs_max"][0], st[3])
