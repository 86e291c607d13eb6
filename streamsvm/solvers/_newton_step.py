"""newton's Newton step (module doc of :mod:`.newton`, "Newton steps"): what each model asks
of the next pass, and what it takes from the pass.

:meth:`NewtonSteps._decide` runs a model's host-side loop until it needs a pass (spec
§3.3): an evaluation, or the Armijo trials of a step along the Newton direction on the
active features (Cholesky of ``H_AA`` or, Hessian-free, conjugate gradient over the resident
rows with curvature) cut by the exact ℓ1 line search (:func:`linesearch_l1`), with the
smoothing levels and activation rounds between. :meth:`NewtonSteps._absorb_trials` takes
the first accepted trial of the pass, :meth:`NewtonSteps._absorb` an evaluation as the
model's cache.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg

from ..exceptions import InvalidParameterError
from ._newton_certificate import NewtonCertificate, penalties
from ._newton_hessian import hessian_next_level
from ._newton_rows import SlabRows

__all__ = ["NewtonSteps", "TRIALS", "linesearch_l1"]

_C1 = 1e-4              # Armijo constant (spec §3.2)
TRIALS = 8              # Armijo trials per pass (s, s/2, …)
_MAX_HALVINGS = 30      # then the level is given up (spec §3.3)
_MAX_STEPS = 50         # Newton steps before an activation round (spec §3.2)
_ETA = 1e-3             # a smoothing level is solved once dec ≤ η·α·Σ C_i (spec §3.6) ...
_ETA_FIRST = 0.1        # ... η = this at alpha0, tightening with α down to _ETA
_CG_RTOL = 0.1          # cg: the Newton system solved to this relative residual
_CG_ITERS = 50          # ... in at most this many Hessian-vector products (resident rows)


class NewtonSteps(NewtonCertificate):
    """The Newton steps of :class:`~streamsvm.solvers.newton.NewtonSolver` (a mixin over
    the solver's attributes: it reads the problem and the Hessian path that :mod:`.newton`
    sets up in ``start``, ``reg``, ``pen``, ``l1``, ``sq``, ``cg``, ``full_h``, ``a`` and the
    resident ``rows``, and keeps each model's iterate ``W``, its active set ``A``,
    ``blocked`` and Hessian columns ``amap``, its level ``alpha``, its counters and the
    cache of its last evaluation: ``fs``, ``gl``, ``H``, ``hdiag``, ``valid``)."""

    def _decide(self, c):
        """What model ``c`` needs from the next pass: ``("eval",)``, ``("try", d, trials,
        e, D, F0)``, or None once its gap is certified (spec §3.3's loop until a pass is
        needed)."""
        while True:
            if not self.valid[c]:
                return ("eval",)
            if self.gap[c] <= self.tol:
                self.done[c] = True
                return None
            w = self.W[:, c]
            g = self.reg * w - self.gl[0, :, c]
            d, dec, gt = self._direction(c, w, g)
            scale = max(abs(self.primal[c]), 1.0)
            # a smoothing level is solved (spec §3.6, in C units); the squared hinge has one
            threshold = 0.1 * self.tol * scale if self.sq else \
                self._eta(c) * self.alpha[c] * self.csum[c]
            solved = dec < threshold
            self.dec_ratio[c] = dec / threshold if threshold > 0 else np.inf
            if self.l1 > 0 and (solved or self.level_steps[c] >= _MAX_STEPS):
                new = (w == 0) & ~self.A[:, c] & ~self.blocked[:, c] & (np.abs(g) > self.pen)
                new[-1] = False
                self.level_steps[c] = 0
                if new.any():                  # activation round (spec §3.5)
                    self.A[:, c] |= new
                    if not self.full_h:
                        self.valid[c] = False
                    continue
            if not self.sq and (solved or self.level_steps[c] >= _MAX_STEPS) and \
                    self.alpha[c] > self.alpha_floor:
                # the next level: α ← α/β (spec §3.6), evaluated at the same w — by the
                # last pass already when it speculated that level
                self.alpha[c] = max(self.alpha[c] / self.alpha_factor, self.alpha_floor)
                self.level_steps[c] = self.halvings[c] = 0
                if self.alpha_next[c] == self.alpha[c]:
                    if self.lazy_h:                # (summed from the rows only now)
                        hessian_next_level(self, (c,))
                    self.fs[c, 0] = self.fs[c, 1]
                    self.gl[0, :, c] = self.gl[1, :, c]
                    self.H[c, 0] = self.H[c, 1]
                    self.alpha_next[c] = 0.0
                    continue
                self.valid[c] = False
                return ("eval",)
            if dec <= 1e-14 * scale:           # no progress left at this precision:
                return ("eval",)               # max_passes ends the run
            A = self.A[:, c]
            b = float(g[A] @ d[A])
            a = 0.5 * float(d[A] @ self._hess_vec(c, A)(d[A]))
            s, Z = linesearch_l1(w, d, b, a, self.pen)
            if s <= 0.0:                       # cannot happen after the orientation check
                return ("eval",)
            s_list = s * 0.5 ** (self.halvings[c] + np.arange(TRIALS))
            e = w + s_list[0] * d
            if self.halvings[c] == 0:
                e[Z] = 0.0
            sgn0 = np.where(w != 0, np.sign(w), np.sign(d))
            D = b + float(self.pen @ (sgn0 * d))
            F0 = self.fs[c, 0] + penalties(w, self.reg, self.pen)
            return ("try", d, s_list, e, D, F0)

    def _direction(self, c, w, g):
        """Newton direction on the active features (with the orientation check):
        ``(d, decrement, pseudo-gradient)``."""
        d = np.zeros_like(w)
        while True:
            A = self.A[:, c]
            gt = g.copy()
            if self.l1 > 0:
                nz = w != 0
                gt += np.where(nz, self.pen * np.sign(w), -self.pen * np.sign(g))
            if self.cg:
                dA = _pcg(self._hess_vec(c, A), -gt[A], self.reg[A] + self.hdiag[A, c])
            else:
                HAA = self._dense_hessian(c, A)
                HAA[np.diag_indices_from(HAA)] += self.reg[A]
                dA = _solve(HAA, -gt[A])
            d[:] = 0.0
            d[A] = dA
            if self.l1 == 0:
                break
            bad = A & (w == 0) & (d * g >= 0) & (self.pen > 0)
            if not bad.any():
                break
            self.A[:, c] &= ~bad
            self.blocked[:, c] |= bad
        return d, float(-gt[self.A[:, c]] @ d[self.A[:, c]]), gt

    def _set_amap(self, c) -> None:
        """Model ``c``'s Hessian columns: every feature when they fit, else ``A``."""
        cols = np.arange(self.d + 1) if self.full_h else np.flatnonzero(self.A[:, c])
        if len(cols) > self.a:
            raise InvalidParameterError(
                f"newton: {len(cols)} active features exceed max_dense={self.max_dense}; raise "
                f"max_dense or l1")
        self.amap[:, c] = -1
        self.amap[cols, c] = np.arange(len(cols))

    def _dense_hessian(self, c, A):
        """Model ``c``'s Hessian of the loss on the features ``A`` (a copy)."""
        idx = self.amap[A, c]
        return self.H[c, 0][np.ix_(idx, idx)]

    def _hess_vec(self, c, A):
        """``v ↦ (reg + H)_AA v`` for model ``c`` at its cached evaluation: the dense
        Hessian, or (cg) ``Σ h_i x̄_i x̄_iᵀ`` over the resident rows with curvature, or, when
        they did not fit the memory budget, its diagonal (a Jacobi step)."""
        reg = self.reg[A]
        if not self.cg:
            HAA = self._dense_hessian(c, A)
            return lambda v: reg * v + HAA @ v
        hc = self._curvature_rows(c)
        if hc is None:
            diag = reg + self.hdiag[A, c]
            return lambda v: diag * v
        # Σ h_i x̄_i x̄_iᵀ = X̄ᵀ diag(h) X̄, in place on the slab's CSR (no copies)
        S = SlabRows(self.rows.ram.X, None, 1.0, float(self.bias), self.d, copy_nnz=-1)
        cols = np.flatnonzero(A)

        def hv(v):
            full = np.zeros(self.d + 1)
            full[cols] = v
            return reg * v + S.tdot(hc * S.dot(full))[cols]
        return hv

    def _curvature_rows(self, c):
        """Model ``c``'s curvature on each row of the RAM slab (cg; 0 on the rows kept
        for other reasons), or None when the pass could not keep them (memory budget)."""
        sl = self.rows.ram
        if sl is None:
            return None
        version, cache = self._cg_rows
        if version != self.rows.ram_version:
            cache = {}
            self._cg_rows = (self.rows.ram_version, cache)
        if c not in cache:
            local = sl.local
            cache[c] = np.where(local["newton.near"][:, c] & 2, local["newton.h"][:, c], 0.0)
        return cache[c]


    def _eta(self, c) -> float:
        """The level's η: loose at the first levels (their smoothing is far above the
        answer's accuracy), ``_ETA`` at the last ones."""
        return max(_ETA, _ETA_FIRST * self.alpha[c] / self.alpha0)

    def _absorb_trials(self, c, request, res, E) -> None:
        """Armijo on the trials of model ``c``'s step: the first accepted one is the new
        iterate (its evaluation is in the pass when it is the first trial)."""
        _, d, s_list, e, D, F0 = request
        w = self.W[:, c]
        npts = int(res["n_points"][c])
        for p in range(npts):                  # every point evaluated bounds the gap
            self._bound_point(c, res, e if p == 0 else w + s_list[p] * d, p)
        accepted = -1
        for t in range(TRIALS):
            wt = e if t == 0 else w + s_list[t] * d
            Ft = res["ftry"][c, t] + penalties(wt, self.reg, self.pen)
            if Ft <= F0 + _C1 * s_list[t] * D + 10 * np.finfo(float).eps * abs(F0):
                accepted = t
                break
        if accepted < 0:
            self.halvings[c] += TRIALS
            if self.halvings[c] >= _MAX_HALVINGS:       # no descent left at this precision
                self.halvings[c] = 0
                self.level_steps[c] = _MAX_STEPS        # an activation round next
            return
        self.W[:, c] = e if accepted == 0 else w + s_list[accepted] * d
        self.steps += 1
        self.level_steps[c] += 1
        self.halvings[c] = 0
        self.blocked[:, c] = False
        if self.l1 > 0:
            self.A[:, c] = self.W[:, c] != 0
            self.A[-1, c] = True
        if accepted < npts:                    # evaluated in this pass (fused)
            self._absorb(c, res, self.W[:, c], accepted)
        else:                                  # the next pass evaluates the new iterate
            self.valid[c] = False


    def _absorb(self, c, res, w, p=0) -> None:
        """The evaluation at point ``p`` of the pass (``w``) becomes model ``c``'s cache."""
        slots = slice(p * self.L, (p + 1) * self.L)
        self.fs[c] = res["f"][c, slots]
        self.gl[:, :, c] = res["g"][slots, :, c]
        if self.lazy_h:                        # summed from the rows after the pass
            self.h_want[c] = p
        else:
            self.H[c] = res["H"][c, slots]
        self.loss_true[c] = res["loss"][c, p]
        self.csum[c] = res["csum"][c]
        if self.cg:
            self.hdiag[:, c] = res["hdiag"][:, c]
        self.valid[c] = True
        nxt = res["alphas"][c, slots.stop - 1]
        self.alpha_next[c] = nxt if nxt != self.alpha[c] else 0.0
        self._bound_point(c, res, w, p)


def _pcg(hv, r, diag, rtol=_CG_RTOL, maxiter=_CG_ITERS):
    """``x ≈ H⁻¹ r`` by conjugate gradient preconditioned with ``diag`` (≈ diag H), to a
    residual of ``rtol·‖r‖`` or ``maxiter`` products ``hv`` (Newton-CG: an inexact
    direction is still one of descent, and Armijo takes care of its length)."""
    x = np.zeros_like(r)
    res = r.copy()
    z = res / diag
    p = z.copy()
    rz = float(res @ z)
    stop = rtol * float(np.linalg.norm(r))
    for _ in range(maxiter):
        if float(np.linalg.norm(res)) <= stop:
            break
        q = hv(p)
        pq = float(p @ q)
        if pq <= 0.0:
            break
        step = rz / pq
        x += step * p
        res -= step * q
        z = res / diag
        rz, rz_old = float(res @ z), rz
        p = z + (rz / rz_old) * p
    return x if x.any() else r / diag



def _solve(H, r):
    """``H⁻¹ r`` by Cholesky, with a growing ridge if ``H`` is not numerically positive
    definite."""
    if len(r) == 0:
        return r.copy()
    ridge = 0.0
    scale = max(float(np.trace(H)) / len(r), 1e-300)
    for _ in range(12):
        try:
            f = scipy.linalg.cho_factor(H + ridge * np.eye(len(r)), lower=True,
                                        check_finite=False)
            return scipy.linalg.cho_solve(f, r, check_finite=False)
        except np.linalg.LinAlgError:
            ridge = scale * (1e-10 if ridge == 0 else ridge / scale * 100)
    return np.linalg.lstsq(H, r, rcond=None)[0]


def linesearch_l1(w, d, b, a, pen):
    """``argmin_{s ≥ 0} a s² + b s + Σ_j pen_j |w_j + s d_j|`` (spec §3.4, ``a > 0``):
    ``(s, Z)`` with ``Z`` the coordinates whose breakpoint is the minimizer (set them to 0
    exactly)."""
    empty = np.zeros(0, dtype=np.int64)
    sgn0 = np.where(w != 0, np.sign(w), np.sign(d))
    slope0 = b + float(pen @ (sgn0 * d))
    if slope0 >= 0:
        return 0.0, empty
    K = np.flatnonzero((w != 0) & (d != 0) & (np.sign(w) != np.sign(d)) & (pen > 0))
    if len(K) == 0:
        return -slope0 / (2 * a), empty
    sig = -w[K] / d[K]
    order = np.argsort(sig, kind="stable")
    sig, K = sig[order], K[order]
    jump_i = pen[K] * np.abs(d[K])
    values, first = np.unique(sig, return_index=True)
    jumps = np.add.reduceat(jump_i, first)
    jp = 2 * a * values + slope0 + 2 * np.cumsum(jumps)
    jm = jp - 2 * jumps
    k = int(np.searchsorted(jp >= 0, True))     # first group with j'(σ⁺) ≥ 0
    if k < len(values) and jm[k] <= 0:
        stop = first[k + 1] if k + 1 < len(first) else len(K)
        return float(values[k]), K[first[k]:stop]
    sl, sp = (0.0, slope0) if k == 0 else (float(values[k - 1]), float(jp[k - 1]))
    return sl - sp / (2 * a), empty
