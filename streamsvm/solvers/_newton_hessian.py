"""newton's Hessians from its resident rows (module doc of :mod:`.newton`, "Passes"): when
every row of the store fits the RAM slab, a pass sums no Hessian; the rows stay in RAM,
and each model's Hessian is summed there once its step needs it, at its accepted point and
level only.

A fused pass evaluates each model at three points and two smoothing levels, and before it
knew which would be taken it summed all six Hessians (three with the squared hinge); a
step uses one of them. Summed after the pass from the rows in RAM, the Hessian is the
same sum (in another order) at a sixth of the work: usps (256 dense features, 10 models)
spent most of a pass on Hessians. The rows' visits here are not passes over the store,
as with cg's products (issue 12).
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.linalg.blas
import scipy.sparse

from ..kernels import csr_matvec
from ..kernels._newton import newton_hess_add, symmetrize_lower
from ..schedule import RowField

__all__ = ["resident_rows", "slab_hessian"]

log = logging.getLogger("streamsvm.solvers.newton")

_DENSE_SHARE = 0.25     # slabs with more nonzeros than this share: the Hessian by BLAS
_CHUNK_ENTRIES = 1 << 20  # dense rows converted at a time (8 MB of float64)
_SHARE = 0.4            # the store's rows may take this share of the RAM slab's room (the
                        # block cache keeps its own copy of the store in the rest)


def _fields(k, n_states):
    """What newton keeps per resident row besides its entries: the polish's and CG's work
    arrays (‖x̄_i‖², an order and an index; per model a dual and a margin) and, for the
    state not kept (the curvature or the polish's dual), a float32 per model all the
    same."""
    return (RowField("float64", 3), RowField("float64", 2 * k),
            RowField("float32", k * (3 - n_states)))


def resident_rows(solver, sched, k):
    """newton's resident rows (``None`` when it keeps none): for the polish the rows near
    the margin (state ``newton.near`` bit 1, with the last polish's duals ``newton.a``), for
    cg the rows with curvature (bit 2, with their curvatures ``newton.h``), and every row
    (bit 4) when the whole store fits ``_SHARE`` of the RAM slab's room and the Hessians
    are summed from them (``solver.lazy_h``: :func:`slab_hessian`)."""
    # the states' copies as fields: a uint8 and two float32 per model at most
    solver.lazy_h = not solver.cg and sched.store_fits_ram(
        _fields(k, 1) + (RowField("uint8", k), RowField("float32", 2 * k)), _SHARE)
    if not (solver.polishing or solver.cg or solver.lazy_h):
        return None
    if solver.lazy_h:
        log.info("newton: the store fits in RAM: each Hessian is summed from the rows kept "
                 "there, at the accepted point only")
    solver.near = sched.state("newton.near", np.uint8, width=k)
    states = (solver.near,)
    if solver.cg:                           # with each row's curvature per model
        solver.hrow = sched.state("newton.h", np.float32, width=k)
        states += (solver.hrow,)
    if solver.polishing:                    # the last polish's duals (NaN: not near)
        solver.apol = sched.state("newton.a", np.float32, width=k, fill=np.nan)
        states += (solver.apol,)
    solver.states = states
    return sched.resident_rows(solver.near, states, fields=_fields(k, len(states)),
                               ram=True, disk=False)


def slab_hessian(sl, unit, B, w, alpha, costs, cutoff, amap, dense_ok):
    """``Σ_i C_i j''_α(z_i) x̄_i x̄_iᵀ`` over the RAM slab's rows ``sl`` on the Hessian's
    columns ``amap`` (n_features + 1,) (−1: not in it), at the weights ``w`` (n_features +
    1,) and the level ``alpha`` (0 with the squared hinge: ``2 C_i`` where ``z_i > 0``),
    the rows whose curvature is below ``cutoff`` left out (as in a pass): a symmetric
    (a, a) array, ``a = amap.max() + 1``.

    ``costs``: ``(pos, Cp, Cn)``, the model's positive label and the costs of its positive
    and negative rows; ``unit``: the slab's values are all 1; ``dense_ok``: the Hessian
    covers every feature, so a dense slab may go through BLAS (in chunks of rows of at
    most ``_CHUNK_ENTRIES`` entries: no copy of the slab)."""
    pos, Cp, Cn = costs
    indptr, indices, data = sl.X
    n, d = sl.n_rows, len(w) - 1
    a = int(amap.max()) + 1
    m = np.empty(n)
    csr_matvec(sl.X, w[:d], m)
    m += B * w[d]
    yi = np.where(sl.y == pos, 1.0, -1.0)
    Ci = np.where(yi > 0, Cp, Cn)
    z = 1.0 - yi * m
    if alpha == 0.0:                        # the squared hinge's generalized Hessian
        h = np.where(z > 0.0, 2.0 * Ci, 0.0)
    else:
        r = np.hypot(alpha, z)
        h = Ci * (0.5 * (alpha / r) ** 2 / r)
    sel = np.flatnonzero((h > 0.0) & (h >= cutoff))
    H = np.zeros((a, a))
    if dense_ok and len(indices) > _DENSE_SHARE * n * d:
        vals = np.ones(len(indices)) if unit else data
        Xs = scipy.sparse.csr_matrix((vals, indices, indptr), shape=(n, d))
        step = max(1, _CHUNK_ENTRIES // (d + 1))
        for lo in range(0, len(sel), step):
            rows = sel[lo:lo + step]
            Xd = np.empty((len(rows), d + 1))
            Xd[:, :d] = Xs[rows].toarray()
            Xd[:, d] = B
            Xd *= np.sqrt(h[rows])[:, None]
            H += scipy.linalg.blas.dsyrk(1.0, Xd.T, lower=1)
    else:
        keep = np.zeros(n)
        keep[sel] = h[sel]
        longest = int(np.diff(indptr).max(initial=0)) + 1
        out = np.zeros((1, a, a, 1))
        newton_hess_add(sl.X, unit, B, keep[None, :, None], np.zeros((1, 1)), amap[:, None],
                        (np.empty(longest, np.int64), np.empty(longest), np.empty(1)), out)
        H = np.ascontiguousarray(out[0, :, :, 0])
    symmetrize_lower(H)
    return H
