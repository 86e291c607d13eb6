"""newton's certificate (module doc of :mod:`.newton`, "Certificate"): the best primal value
evaluated and the best dual bound of each model, both exact, and their relative gap.

Dual bounds come from each evaluation slot of a pass (``β_i = C_i ℓ'(z_i)``, made feasible,
:meth:`NewtonCertificate._dual`) and from the polish over the resident rows
(:mod:`._newton_polish`); primal values from every point a pass evaluated and from the
polish's candidates, evaluated by the pass after it.
"""

from __future__ import annotations

import functools

import numpy as np

from ._newton_hessian import NearRows
from ._newton_polish import near_margin, polish, soft

__all__ = ["NewtonCertificate", "penalties"]


def penalties(w, reg, pen) -> float:
    """``½ Σ reg_j w_j² + Σ pen_j |w_j|``: the objective's terms besides the loss."""
    return 0.5 * float(reg @ (w * w)) + float(pen @ np.abs(w))


class NewtonCertificate:
    """The bounds of :class:`~streamsvm.solvers.newton.NewtonSolver` (a mixin: it reads the
    solver's problem ``prob``, ``bias``, ``unit``, ``l1``, ``pen``, ``reg``, ``sq``,
    ``free_bias``, its models' ``alpha``, ``valid`` and ``done``, and keeps ``primal``,
    ``dual``, ``gap``, ``Wbest``, the polish's ``cand``/``cand_live`` and its counters)."""

    def _bound(self, c, primal=None, w=None, dual=None) -> None:
        """A primal value at ``w`` and/or a dual bound for model ``c``: keep the best of
        each, the certified gap is theirs."""
        if primal is not None and primal < self.primal[c]:
            self.primal[c] = primal
            self.Wbest[:, c] = w
        if dual is not None:
            self.dual[c] = max(self.dual[c], dual)
        self.gap[c] = (self.primal[c] - self.dual[c]) / max(abs(self.primal[c]), 1e-300)

    def _bound_point(self, c, res, w, p) -> None:
        """The primal value at point ``p`` (``w``) and the dual bounds of its slots."""
        self._bound(c, penalties(w, self.reg, self.pen) + res["loss"][c, p], w,
                    max(self._dual(c, lv, res, p) for lv in range(p * self.L,
                                                                 (p + 1) * self.L)))

    def _dual(self, c, lv, res, p) -> float:
        """``D(β)`` at ``β_i = C_i j'(z_i)`` of slot ``lv`` (at point ``p``; module doc)."""
        v = res["g"][lv, :, c].copy()
        sb = res["sb"][c, lv]
        if self.free_bias:                     # scale the heavier side: Σ β_i y_i = 0
            vpos = res["gpos"][lv, :, c]
            sp = res["sbpos"][c, lv]
            sn = sb - sp
            if sp > sn:
                v = (sn / sp) * vpos + (v - vpos) if sp > 0 else v - vpos
                sb = 2.0 * sn
            else:
                v = vpos + (sp / sn) * (v - vpos) if sn > 0 else vpos
                sb = 2.0 * sp
            v[-1] = 0.0
        w = soft(v[:-1], self.l1)
        dual = sb - 0.5 * float(w @ w) - 0.5 * self.reg[-1] * v[-1] ** 2
        # squared hinge: Σ β_i²/(4C_i) = Σ C_i max(0, z_i)², the loss at E
        return dual - res["loss"][c, p] if self.sq else dual

    def _absorb_candidates(self, res) -> None:
        """The primal values of the last polish's candidates (evaluated by this pass)."""
        if not self.polishing:
            return
        for c in np.flatnonzero(self.cand_live):
            w = self.cand[:, c]
            self._bound(c, penalties(w, self.reg, self.pen) + res["closs"][c], w)
        self.cand_live[:] = False

    def polish_budget(self) -> int:
        """The most row visits of one polish per model: ``polish_work`` times the work of
        a pass (0: up to the epochs' own limits), counted in operations on a row's entries,
        a deterministic count (a budget in seconds would not resume bit for bit). A polish
        visit takes about 2 per entry (a dot product and an update); a pass, per model
        and row, 2 for each of its 3 margins (w, d, the first trial), 2 for each point's
        gradient, and its Hessian's: with cg 2 for the diagonal, dense ½·(entries per
        row) for each slot's rank-one update of the rows' columns."""
        if self.polish_work <= 0:
            return np.iinfo(np.int64).max // 4
        per_row = self.nnz_per_row
        slots = self.P * self.L
        hess = 2.0 if self.cg else 0.5 * min(per_row, self.a) * slots
        ops = per_row * (6.0 + 2.0 * self.P + hess)
        return max(1, int(self.polish_work * self.n_rows * ops / (2.0 * per_row)))

    def _polish_on(self, sl, sched, res, E, final) -> int:
        """The polish over the resident rows ``sl`` (:func:`._newton_polish.polish`): a dual
        bound now, and a primal candidate for the next pass. Only at a model's iterate once
        its level is solved (not at a rejected first trial: the partition of a poor iterate
        makes a poor bound)."""
        whole = sl
        if self.lazy_h:                     # every row is kept: the polish sees its own
            sl = NearRows(whole)
        near = near_margin(sl)
        rows = {c: np.flatnonzero(near[:, c]) for c in np.flatnonzero(near.any(axis=0))
                if final or (self.valid[c] and not self.done[c])}
        found, visits = polish(sl, rows, E, self.alpha, res["u"], self.pen, self.prob,
                               float(self.bias), self.unit,
                               functools.partial(sched.rng, self.polishes),
                               self.polish_budget())
        if sl is not whole:
            sl.write_back()
        self.polish_visits += visits
        for c, (a, w) in found.items():
            self._bound(c, dual=res["usum"][c] + float(a.sum()) - 0.5 * float(w @ w))
            self.cand[:, c] = w
            self.cand_live[c] = True
        return 0
