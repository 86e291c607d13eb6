"""newton's polish (hinge, module doc of :mod:`.newton`, "Certificate"): the hinge dual
restricted to the resident rows near the margin, every other row's dual at its bound,
solved exactly on the host.

With ℓ2 alone the restricted dual is dcd's with ``w`` offset by ``u`` (the sum over the rows
past the band), a box-constrained QP. On dense rows (a dense copy:
:class:`._newton_rows.SlabRows`) past ``C·R² = 100``, where dual coordinate descent crawls
(dcd's hard regime in the solvers' measured matrix), a primal-dual interior point solves it
exactly (:mod:`._newton_qp`): pendigits 12 passes against 41 when coordinate descent and
L-BFGS-B spent every polish's budget, usps the same 19 passes at a fraction of the
polish's time (BENCHMARKS, "newton's polish by an interior point"). Elsewhere dcd's
in-memory epochs (``dcd_classes_epochs``, class by class, shrinking; at most 300, fewer on
long rows: :func:`_epochs`) run first, and where they hit their limit the interior point
takes over on rows that fit a dense copy when its cost fits the budget left, else L-BFGS-B
with box constraints, which is also the ℓ1 case's solver (its products by BLAS on a dense
copy of dense rows). Any point of the box is dual feasible; :func:`polish` returns each model's duals
(kept in the rows' state ``newton.a`` as the next polish's warm start) and the primal
candidate ``soft(u + Σ a_i y_i x̄_i, ρ)``, whose value the next pass evaluates.

Bounded work: one polish does at most ``polish_work`` times a pass's work per model
(counted in operations on the rows' entries, so that a resumed run repeats it bit for
bit; the next polish goes on from its duals); an interior-point solve at most 40
iterations (its visits counted as iterations × rows). Under a memory budget: the band is the
widest ``band·2^(−j/2)`` whose rows, by the last pass's histogram of ``|z|``, fill at most
70% of the RAM slab's room (30% with cg), the full band whenever its rows fit the room;
every band gives an exact bound, a narrower one a weaker bound far from the optimum and
the same near it (the rows past it are at their bounds there). Before, the full band's
rows did not fit at small budgets and no polish ran: a9a at ``--memory 6MB`` certified
1e-3 by the smoothed duals alone after 44 passes, 6 with the fitted band. The history's
``polish_band`` is the band of the last pass (−1: no rows kept for the polish).
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from ..kernels._csr import row_sq_norms
from ..kernels._dcd import dcd_classes_epochs
from ..kernels._newton import smooth_hinge
from ._blas import single_blas
from ._newton_qp import ipm_fits, solve_box_qp
from ._newton_rows import SlabRows

__all__ = ["near_margin", "polish", "soft"]

_POLISH_ITERS = 500     # most L-BFGS-B iterations of one polish (with l1)
_POLISH_EPOCHS = 300    # most dual coordinate descent epochs of one polish (l2), then L-BFGS-B,
_POLISH_ENTRIES = 8000  # ... fewer on long rows: this many entries a row over the epochs,
_MIN_EPOCHS = 30        # ... and at least this many epochs
_POLISH_EPS = 1e-4      # ... which stop at this projected-gradient spread
_CRAWL_CR2 = 100.0      # dense rows past this C·R²: the interior point, no coordinate descent


def soft(v, pen):
    """``sign(v)·max(|v| − pen, 0)``: the weights of the dual point ``v`` (ℓ1: soft
    thresholding)."""
    return np.sign(v) * np.maximum(np.abs(v) - pen, 0.0)


def near_margin(sl):
    """Which resident rows ``sl`` the pass kept near each model's margin: bool (n, k)."""
    return (sl.local["newton.near"] & 1).astype(bool)


def polish(sl, rows, E, alpha, u, pen, prob, B, unit, rng, budget):
    """The restricted hinge duals of the models in ``rows`` over the resident rows ``sl``.

    Parameters
    ----------
    sl : the RAM slab of the resident rows (``X``, ``y``, ``local`` states)
    rows : dict
        ``{c: the rows of sl near model c's margin}`` (int arrays), the models to polish.
    E : ndarray of shape (n_features + 1, k)
        The point the pass kept those rows at; ``alpha`` (k,) its smoothing levels.
    u : ndarray of shape (n_features + 1, k)
        ``Σ C_i y_i x̄_i`` over the rows past the band (their duals at the bound).
    pen : ndarray of shape (n_features + 1,)
        The ℓ1 weights (0 on the bias; all 0: ℓ2 alone, dual coordinate descent first).
    prob : kernels.Costs
        The problem's costs (``pos``, ``Cp``, ``Cn``); ``B`` the bias feature, ``unit``
        the store's values all 1.
    rng : callable
        ``rng(round)``: the generator of the epochs' seeds of each round.
    budget : int
        The most row visits per model (the polish's work per pass is bounded; the next
        polish goes on from these duals).

    Returns
    -------
    ``({c: (a, w)}, visits)``: each model's duals on its rows and its primal candidate
    ``w``, and the row visits they took (the history's ``polish_passes``). The duals are
    written into the rows' state ``newton.a`` (the next polish's warm start).
    """
    d = E.shape[0] - 1
    pos, Cp, Cn = prob.pos, prob.Cp, prob.Cn
    subs = {}
    for c, r in rows.items():
        yc = np.where(sl.y[r] == pos[c], 1.0, -1.0)
        Cc = np.where(yc > 0, Cp[c], Cn[c])
        Z = SlabRows(sl.X, r, yc, B, d)                  # rows y_i x̄_i, no copy
        jz = np.empty((len(r), 3))
        smooth_hinge(1.0 - Z.dot(E[:, c]), float(alpha[c]), jz)
        # warm start: the last polish's duals of the rows that were near then, the
        # smoothed duals at E of the others
        last = sl.local["newton.a"][r, c].astype(np.float64)
        a0 = np.where(np.isnan(last), Cc * jz[:, 1], np.clip(last, 0.0, Cc))
        subs[c] = (r, Z, Cc, a0)
    # ℓ2: the interior point on dense rows (coordinate descent crawls there); dual
    # coordinate descent on sparse ones (the restricted dual is dcd's, offset by u), then
    # the interior point or L-BFGS-B where it crawls, from where it stopped; ℓ1: L-BFGS-B
    visits = 0
    found, left = {}, {}
    l2 = not pen.any()
    direct = {c: v for c, v in subs.items() if l2 and _crawls(v[1], v[2])}
    rest_cd = {c: v for c, v in subs.items() if c not in direct}
    if l2 and rest_cd:
        found, left, visits = _polish_cd(sl, rest_cd, u, prob, B, unit, rng, budget)
    elif rest_cd:
        found, left = {c: v[3] for c, v in rest_cd.items()}, {c: budget for c in rest_cd}
    ipm = [(c, subs[c][3]) for c in direct]
    for c, rest in left.items():
        r, Z, Cc, _ = subs[c]
        if l2 and ipm_fits(len(r), d + 1, rest) and Z.dense() is not None:
            ipm.append((c, found[c]))
        elif rest >= 2 * len(r):
            found[c], nfev = _polish_dual(Z, u[:, c], pen, found[c], Cc, rest // len(r))
            visits += nfev * len(r)
    with single_blas():
        for c, a0 in ipm:
            r, Z, Cc, _ = subs[c]
            found[c], iters = solve_box_qp(Z.Zd, u[:, c], Cc, a0)
            visits += iters * len(r)
    out = {}
    for c, a in found.items():
        sl.local["newton.a"][subs[c][0], c] = a
        out[c] = a, soft(u[:, c] + subs[c][1].tdot(a), pen)
    return out, visits


def _polish_cd(sl, subs, u, prob, B, unit, rng, budget):
    """The restricted hinge duals of the models in ``subs`` (ℓ2 only) by dual
    coordinate descent (dcd's in-memory epochs, class by class, with shrinking) over
    the resident rows, from the smoothed duals, with ``w`` started at ``u + Zᵀa``, at most
    ``budget`` row visits per model: ``({c: a}, {c: the visits left to L-BFGS-B, for
    the models whose epochs stopped at their limit}, visits)``. Any ``a`` in the box is
    dual feasible: the epochs only sharpen it."""
    (D1, k), n = u.shape, sl.n_rows
    d = D1 - 1
    classes = np.array(sorted(subs), dtype=np.int64)
    alpha, active = np.zeros((k, n)), np.zeros((k, n), np.uint8)
    W = np.zeros((k, D1))                  # class-major, the bias weight last
    limit = np.zeros(k, dtype=np.int64)
    for c in classes:
        r, Z, _, a0 = subs[c]
        alpha[c, r], active[c, r] = a0, 1
        v = u[:, c] + Z.tdot(a0)
        W[c] = v
    left = np.full(k, int(budget), dtype=np.int64)
    qd = np.empty(n, np.float32)
    row_sq_norms(sl.X, B * B, qd)
    eps = np.full(k, _POLISH_EPS)
    visits = 0
    run = classes
    for rnd in range(2):                   # then once more with every row un-shrunk
        if rnd:                            # (the models with visits left)
            run = classes[left[classes] > 0]
            if len(run) == 0:
                break
            for c in run:
                active[c, subs[c][0]] = 1
        limit[:] = 0
        for c in run:
            limit[c] = min(_epochs(sl.X, subs[c][0]) * len(subs[c][0]), left[c])
        pg, info, cert = np.zeros((k, 3)), np.zeros((k, 6)), np.zeros((k, 2))
        seeds = rng(rnd).integers(2**63, size=k, dtype=np.uint64)
        shrink = (np.full(k, np.inf), np.full(k, -np.inf))
        plan = np.zeros((k, 3), dtype=np.int64)
        plan[:, 1] = limit              # no stop on the (unused) gap estimate
        dcd_classes_epochs(sl.X, unit, sl.y, qd,
                           (alpha, active, np.zeros((k, n), np.float32)),
                           (W, np.zeros((k, d)), np.zeros((k, 2))),
                           prob._replace(squared=False), shrink,   # the hinge's duals
                           (run, True, limit, -np.inf, 1, eps, plan, False), seeds,
                           (np.empty(n, np.int64), np.empty((1, 3)), np.empty((1, 4)),
                            np.empty(5)), (pg, cert, info))
        visits += int(info[run, 1].sum())
        left -= info[:, 1].astype(np.int64)
    crawled = {int(c): int(left[c]) for c in classes
               if c not in run or info[c, 1] >= limit[c]}
    return {c: alpha[c, subs[c][0]] for c in subs}, crawled, visits


def _crawls(Z, Cc):
    """Whether coordinate descent would crawl on the dense rows ``Z`` (a copy, else
    False) at the costs ``Cc``: ``C·R² > _CRAWL_CR2``, ``R²`` the largest squared row norm,
    the bias included — dcd's hard regime in the solvers' measured matrix
    (:mod:`streamsvm._auto`). There the interior point solves the restricted dual exactly,
    at once: pendigits (R² ≈ 10^5) 12 passes against 41 with coordinate descent and
    L-BFGS-B, usps (R² ≈ 200) the same 19 passes at a third of the polish's time."""
    if Z.Zd is None or not len(Cc):
        return False
    return float(Cc.max()) * float(np.einsum("ij,ij->i", Z.Zd, Z.Zd).max()) > _CRAWL_CR2


def _epochs(X, r):
    """The most coordinate descent epochs over the rows ``r`` of the slab's CSR ``X``:
    ``_POLISH_EPOCHS``, fewer on long rows, whose epochs cost more while L-BFGS-B's products
    go through BLAS (usps, 256 dense columns: 30 epochs, then L-BFGS-B, 6.5 s against 9.8 s
    at 300, the same 19 passes; pendigits, 16 columns: 300, 6.1 s against 8.7 s at 30)."""
    per_row = float((X[0][r + 1] - X[0][r]).mean()) + 1.0 if len(r) else 1.0
    return int(np.clip(_POLISH_ENTRIES / per_row, _MIN_EPOCHS, _POLISH_EPOCHS))


def _polish_dual(Z, u, pen, a0, Cc, evals):
    """``max_a D(a) = Σ a_i − ½‖soft(u + Zᵀa, pen)‖²`` over ``0 ≤ a ≤ Cc`` by L-BFGS-B from
    ``a0`` (rows of ``Z``: ``y_i x̄_i``), at most about ``evals`` function evaluations:
    ``(a, function evaluations)``."""
    def fg(a):                                 # −D and its gradient
        w = soft(u + Z.tdot(a), pen)
        return 0.5 * float(w @ w) - float(a.sum()), Z.dot(w) - 1.0

    opt = scipy.optimize.minimize(
        fg, a0, jac=True, method="L-BFGS-B", bounds=scipy.optimize.Bounds(np.zeros(len(a0)), Cc),
        options={"maxiter": min(_POLISH_ITERS, evals), "maxfun": evals, "ftol": 1e-15,
                 "gtol": 1e-12})
    return np.clip(opt.x, 0.0, Cc), int(opt.nfev)
