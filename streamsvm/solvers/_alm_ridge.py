"""alm's ridge subproblem (module doc of :mod:`.alm`; spec_004 §3.3–3.4): the new ``w̄``
minimizing ``μ⁻¹ w̄ᵀ D w̄ + ‖Ā w̄ − z‖²`` from pass A's right-hand side, and ``‖Ā Δw̄‖²`` of
the step (the dual residual's data).

* ``inner="gram"``: exactly, by Cholesky on ``ĀᵀĀ + D/μ`` (the Gram matrix ``H0`` summed by
  the first pass A; the factor kept while μ stays);
* ``inner="cg"``: ``steps`` conjugate-gradient steps (Jacobi-preconditioned when ``jacobi``)
  from the current point, one ``map_reduce`` pass each (``kernels/_alm.py``'s ``alm_cg``).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..exceptions import InvalidParameterError
from ..kernels._alm import alm_cg
from ..schedule import Accumulator

__all__ = ["AlmRidge"]


class AlmRidge:
    """The ridge subproblem of :class:`~streamsvm.solvers.alm.AlmSolver` (a mixin over the
    solver's attributes: it reads ``W``, ``H0``, ``colsq``, ``reg``, ``d1``, ``k``,
    ``bias``, ``steps``, ``jacobi`` and ``unit``, keeps the Cholesky factor ``_factor`` (not
    saved) and sets ``dq``, ``‖Ā Δw̄‖²`` per model)."""

    def _solve_gram(self, G, mu) -> np.ndarray:
        """``(ĀᵀĀ + D/μ)⁻¹ Āᵀz`` by Cholesky (the factor kept while μ stays)."""
        if self._factor is None or self._factor[0] != mu:
            self._factor = None                   # (its memory back before the next one)
            # H0 + diag(reg/μ) with no D1×D1 temporary, in Fortran order: factored in place
            A = np.array(self.H0, order="F")
            A += 0.0                              # (−0.0 → +0.0, as the sum with diag gave)
            A.flat[::self.d1 + 1] = np.diagonal(self.H0) + self.reg / mu
            if not self.bias:
                A[-1, -1] = 1.0                   # no bias column: b stays 0
            try:
                self._factor = (mu, scipy.linalg.cho_factor(A, lower=False, overwrite_a=True,
                                                            check_finite=False))
            except np.linalg.LinAlgError as exc:
                raise InvalidParameterError(
                    f"alm: the Gram matrix + I/mu is not numerically positive definite at "
                    f"mu={mu:g} ({exc}); use inner='cg' or a smaller mu") from None
        Wn = scipy.linalg.cho_solve(self._factor[1], G, check_finite=False)
        dv = Wn - self.W
        self.dq[:] = np.maximum(np.einsum("ik,ij,jk->k", dv, self.H0, dv), 0.0)
        return Wn

    def _cg(self, sched, G, mu) -> np.ndarray:
        """``cg_steps`` (preconditioned) conjugate-gradient steps on the normal equations,
        from the current point (spec §3.3), one pass each."""
        reg = self.reg[:, None]
        W = self.W.copy()
        r = -(G + reg * W / mu)                      # minus the half-gradient (Eq. 16)
        if not self.bias:
            r[-1] = 0.0
        if self.jacobi:
            diag = self.colsq + self.reg / mu
            diag[diag <= 0.0] = 1.0
            minv = (1.0 / diag)[:, None]
        else:
            minv = np.ones((self.d1, 1))
        z = minv * r
        P = z.copy()
        rz = (r * z).sum(axis=0)
        dq = np.zeros(self.k)
        for j in range(self.steps):
            more = j + 1 < self.steps
            acc = {"Q": Accumulator(self.k)}
            if more:
                acc["Hp"] = Accumulator((self.d1, self.k))
            res = sched.map_reduce(_cg_block, args=(P, float(self.bias), more, self.unit),
                                   acc=acc)
            curv = res["Q"] + (reg * P * P).sum(axis=0) / mu
            ok = (rz > 0.0) & (curv > 0.0)
            alpha = np.where(ok, rz / np.where(ok, curv, 1.0), 0.0)
            W += alpha * P
            dq += alpha * alpha * curv
            if not more:
                break
            r -= alpha * (res["Hp"] + reg * P / mu)
            z = minv * r
            rz_new = (r * z).sum(axis=0)
            beta = np.where(rz > 0.0, rz_new / np.where(rz > 0.0, rz, 1.0), 0.0)
            P = z + beta * P
            rz = rz_new
        dv = W - self.W
        # ‖Ā Δv‖² from the conjugate directions: Σ α_j² p_jᵀHp_j − Δvᵀ D Δv/μ
        self.dq[:] = np.maximum(dq - (reg * dv * dv).sum(axis=0) / mu, 0.0)
        return W


def _cg_block(block, views, args, acc) -> None:
    """One block of a conjugate-gradient pass (``map_reduce`` kernel): :func:`alm_cg`."""
    P, B, more, unit = args
    alm_cg((block.indptr, block.indices, block.data), unit, P, B, more,
           np.empty(P.shape[1]), acc.get("Hp", _NO_HP), acc["Q"])


_NO_HP = np.zeros((0, 0))
