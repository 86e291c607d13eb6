"""newton's pass (module doc of :mod:`.newton`, "Passes"): what one pass over the store sums
for the models still training, and how much of it the memory budget holds.

:func:`fit_hessians` sizes the pass's Hessian sums (dense or cg, their columns, the points
and smoothing levels per pass) to the budget; :func:`slots` gives each evaluation slot
(point × level) its level and curvature cutoff, :func:`accumulators` the pass's sums;
:func:`newton_block` is the ``map_reduce`` kernel of one block (margins, the per-row terms
of ``kernels/_newton.py``, the gradient and the Hessian by one of three modes: dense BLAS,
the active columns' ``newton_hess_add``, or none with cg, whose rows with curvature it
marks for the resident rows; and the polish's marks and sums); :func:`square_hessians`
turns the reduced sums into symmetric Hessians. A block more than ``_BLAS_SHARE`` non-zero
is copied dense (:func:`dense_rows`) and its margins and sums are BLAS products (the steps
that run it keep BLAS on one thread: ``_blas.small_blas``).


Hessian-free (cg): when the rows with curvature do not all fit the RAM slab (70% of its
room, besides the polish's rows), the pass keeps row ``i`` with probability ``min(1,
h_i/τ)``, drawn by row id, its curvature weighted ``max(h_i, τ)`` (an unbiased Hessian
estimate that keeps every row near the margin, the ones that weigh: a uniform share of all
rows, before, left newton on the 3·10^6-row store at ``--memory 200MB`` uncertified after
200 passes), ``τ`` the smallest that the last pass's histogram of the curvatures expects to
fit; with no rows at all (the first pass of a store too big for the room, or no room), the
step is a Jacobi step ``−g / (1 + diag H)`` that Armijo scales. The next smoothing level is
not speculated in this mode (one level's rows only), but the first three trials are
evaluated as with dense Hessians: a step accepted at ``s/2`` or ``s/4`` goes on with its
exact gradient and the curvature rows of the first trial (an inexact Newton-CG Hessian;
Armijo guards the step), which halves the passes per step (the 3·10^6-row store: 11 passes
instead of 19).
"""

from __future__ import annotations

import logging

import numpy as np
import scipy.linalg.blas
import scipy.sparse

from ..exceptions import InvalidParameterError
from ..kernels import csr_matmat, csr_rmatmat_add
from ..kernels._newton import (newton_hess_add, newton_margins, newton_rows, newton_scatter,
                               symmetrize_lower)
from ..schedule import Accumulator, Need

__all__ = ["accumulators", "band_that_fits", "fit_hessians", "hessian_block", "hessian_sums",
           "newton_block", "slots",
           "split_sums", "square_hessians", "threshold_that_fits", "curvature_sample"]

log = logging.getLogger("streamsvm.solvers.newton")     # newton's messages, under its name

_CUTOFF = 1e-6          # Hessian rows with curvature below this share of the peak C/(2α)
_DENSE_SHARE = 0.25     # blocks with more nonzeros than this share: the Hessian by BLAS,
_SYRK_COLS = 64         # ... its lower triangle alone (dsyrk) from this many columns; below
                        # it every slot's at once (_add_narrow)
_PAIR_ROWS = 1024       # ... there, the pairwise products of this many rows at a time (at most
                        # 2,016 pairs: three temporaries of up to 16 MB)
_BLAS_SHARE = 0.5       # blocks past this share: also their margins and sums by BLAS (usps,
                        # 257 columns, 10 models: a pass's 0.128 s → 0.093 s; dna's 26 %: 2×
                        # slower)
_BLAS_ENTRIES = 4_000_000   # ... for blocks of at most this many entries (a 32 MB copy, which
                            # no budget counts, kept small next to the blocks in flight)
HIST_BINS = 24          # the polish's histogram of |z|: edges band·2^(-j/2), j < this
H_BINS = 100            # cg's histogram of curvatures: bin j holds h in (2^(H_TOP-j-1), 2^(H_TOP-j)]
H_TOP = 40


def fit_hessians(sched, k, d, cg, *, max_dense, fused, sq, auto, points):
    """The Hessian path (dense or cg), its columns ``a``, the smoothing levels ``L`` and
    the points ``P`` per pass whose Hessians the budget holds: ``(cg, full_h, a, P, L)``
    (``full_h``: the dense Hessian covers every feature).

    A pass sums ``P·L`` Hessians of ``a²`` entries per model into run accumulators
    (one array per level of the reduction tree, which the scheduler counts), reorders them
    into one copy, keeps ``L`` between passes, and the Newton system takes two ``a×a``
    copies. Fewer points, then one level, when they do not fit; with ``hessian="auto"``
    (``auto``) the Hessian-free path when not even one fits (a dense Hessian of
    ``n_features + 1`` columns over a small budget), on a cluster the budget is refused.
    ``points``: the Armijo trials a fused trying pass evaluates at.
    """
    D1 = d + 1
    while True:
        full_h = D1 <= max_dense and not cg
        a = 1 if cg else D1 if full_h else max_dense
        # smoothing levels per evaluation point (kernels/_newton.py): the hinge can
        # speculate the next level α/β (cg works from the rows of one level); points per
        # trying pass: the first `points` Armijo trials (one when unfused, or with cg)
        top = (1 if not fused else points, 1 if sq or cg else 2)
        P, L, refused = _shrink_to_budget(sched, k, D1, a, *top)
        if refused is None:
            break
        if cg or not auto or sched.remote:
            raise refused
        log.info("newton: dense Hessians of %d columns do not fit the memory budget: "
                 "the Hessian-free (cg) path (%s)", a, refused)
        cg = True
    if (P, L) != top:
        log.info("newton: the budget leaves room for Hessians at %d point(s) and %d "
                 "level(s) per pass", P, L)
    return cg, full_h, a, P, L


def _shrink_to_budget(sched, k, D1, a, P, L):
    """Fewer points, then one level, until :func:`_needs` fits the budget: ``(P, L, the
    refusal when not even one point at one level fits, else None)``."""
    while True:
        try:
            sched.check_budget("newton", _needs(k, D1, a, P, L))
            return P, L, None
        except InvalidParameterError as exc:
            if P == 1 and L == 1:
                return P, L, exc
            if P > 1:
                P -= 1
            else:
                L = 1


def _needs(k, D1, a, P, L) -> dict:
    """What must stay in memory for ``k`` models of ``D1`` weights with Hessians of ``a``
    columns at ``P`` points and ``L`` levels per pass."""
    sums = (Need((L * P, D1, k), per_pass=True), Need((k, a, a, L * P), per_pass=True))
    return {"the models and their gradients": Need((D1, k), count=7 + L),
            "the Hessians kept between passes": Need((k, L, a, a)),
            "the pass's gradient and Hessian sums": sums,
            "their reordered copy and the Newton system":
                (Need((L * P, D1, k)), Need((k, a, a, L * P)), Need((a, a), count=2))}


def slots(alpha, nxt, levels, n_points, prob, sq):
    """The evaluation slots of a pass, point ``p`` (trial ``p``, or ``w``) × level (``α``,
    and ``nxt = α/β`` when ``levels`` is 2, speculated): ``(alphas, cutoff)``, each (k,
    P·levels), the slot's smoothing level and the curvature below which a row adds nothing
    to its Hessian (inf: no Hessian at that slot). ``n_points`` (k,): the points of each
    model; ``prob``: the :class:`~streamsvm.kernels.Costs` record."""
    k, Lv = len(alpha), levels
    P = max(1, int(n_points.max()))
    alphas = np.repeat(alpha[:, None], Lv, axis=1)
    if sq:                                  # every row with z_i > 0 has curvature 2C_i
        cutoff = np.zeros((k, Lv))
    else:                                   # the rows far from the margin add ~nothing
        if Lv > 1:                          # the next level, speculated
            alphas[:, 1] = nxt
        peak = np.maximum(prob.Cp, prob.Cn)[:, None] / (2 * alphas)
        cutoff = _CUTOFF * peak
        cutoff[:, 1:][alphas[:, 1:] == alphas[:, :1]] = np.inf    # no level left: no H
    alphas, cutoff = np.tile(alphas, (1, P)), np.tile(cutoff, (1, P))
    for p in range(1, P):                   # no Hessian at the points a model skips
        cutoff[n_points <= p, p * Lv:] = np.inf
    return alphas, cutoff


def accumulators(k, D1, a, P, L, trials, *, free_bias, polish, cg) -> dict:
    """The sums of a pass at ``P`` points over ``L`` slots in all (module doc): the values
    at the ``trials`` Armijo trials, per slot the objective, the dual's sums, the gradient
    and the Hessian on ``a`` columns; with a free bias the gradient of the positive rows,
    for the polish its sums past the band and its candidates' losses, with cg the
    Hessian's diagonal and the size of the rows to keep."""
    # the sums over the features side by side (kernels/_newton.py's newton_scatter): the
    # gradient of each slot, with cg the Hessian's diagonal, for the polish its sum past
    # the band (split by split_sums)
    acc = {"ftry": Accumulator((k, trials)), "f": Accumulator((k, L)),
           "sb": Accumulator((k, L)), "sbpos": Accumulator((k, L)),
           "loss": Accumulator((k, P)), "csum": Accumulator(k),
           "sums": Accumulator((D1, (L + int(cg) + int(polish)) * k)),
           "H": Accumulator((k, a, a, L))}
    if free_bias:
        acc["gpos"] = Accumulator((L, D1, k))
    if polish:
        acc.update(usum=Accumulator(k), closs=Accumulator(k),
                   zhist=Accumulator((k, HIST_BINS, 2)))
    if cg:
        # [rows with curvature, their entries, rows near the margin, their entries]
        # per model, the rows with curvature by log2 of it (curv_hist), and the rows near
        # the margin kept with them: [rows, their entries]
        acc.update(hhist=Accumulator((k, H_BINS, 4)), nearsize=Accumulator(2))
    return acc


def hessian_sums(k, D1, a, P, L, trials, levels, m=None) -> dict:
    """The sums of :func:`hessian_block`: the per-row terms' (unused) and the Hessians' at
    ``levels`` slots of each of ``m`` models (all ``k`` when None)."""
    acc = accumulators(k, D1, 1, P, L, trials, free_bias=False, polish=False, cg=False)
    acc = {key: acc[key] for key in ("ftry", "f", "sb", "sbpos", "loss", "csum")}
    acc["H"] = Accumulator((k if m is None else m, a, a, levels))
    return acc


def split_sums(res, k, L, cg, polish) -> None:
    """The reduced ``sums`` (n_features + 1, S) of a pass as ``res["g"]`` (L, n_features + 1,
    k), with cg ``res["hdiag"]`` and for the polish ``res["u"]`` (n_features + 1, k)."""
    sums = res.pop("sums")
    D1 = sums.shape[0]
    res["g"] = np.ascontiguousarray(sums[:, :L * k].reshape(D1, L, k).transpose(1, 0, 2))
    if cg:
        res["hdiag"] = np.ascontiguousarray(sums[:, L * k:(L + 1) * k])
    if polish:
        res["u"] = np.ascontiguousarray(sums[:, (L + int(cg)) * k:])


def square_hessians(H):
    """The reduced Hessian sums (k, a, a, L), lower triangles, as symmetric (k, L, a, a)."""
    H = np.ascontiguousarray(H.transpose(0, 3, 1, 2))
    for c in range(H.shape[0]):
        for lv in range(H.shape[1]):
            symmetrize_lower(H[c, lv])
    return H


def dense_rows(block, unit, B, d, share=_DENSE_SHARE, most=None):
    """The block's rows as a dense (n_rows, n_features + 1) array, the bias ``B`` in the
    last column, when more than ``share`` of its entries are non-zero and it has at most
    ``most`` entries (else None): its Hessians (``_DENSE_SHARE``), and past ``_BLAS_SHARE``
    its margins and sums (``_BLAS_ENTRIES`` at most), are then BLAS products."""
    n = block.n_rows
    if len(block.indices) <= share * n * d or (most is not None and n * (d + 1) > most):
        return None
    Xd = np.empty((n, d + 1))
    Xd[:, :d] = scipy.sparse.csr_matrix((np.ones(len(block.indices)) if unit else block.data,
                                         block.indices, block.indptr), shape=(n, d)).toarray()
    Xd[:, d] = B
    return Xd


def _rows_of(block, args, acc):
    """A block's margins and per-row terms (``newton_rows``) for ``args`` of a pass:
    ``(X, Xd, Ev, coef, h, M)``, ``Xd`` the dense rows (:func:`dense_rows`, or None),
    ``Ev`` the margins at each point, ``coef`` and ``h`` per slot, ``M`` the polish
    candidate's margins (without the bias) when ``WDE`` carries it (no rows otherwise)."""
    W, (Dir, E, WDE), trying, prob, B, unit, plan = args[:7]
    X = (block.indptr, block.indices, block.data)
    n, k = block.n_rows, W.shape[1]
    d = W.shape[0] - 1
    L = plan[3].shape[1]
    P = max(1, int(plan[4].max()))
    Xd = dense_rows(block, unit, B, d, _BLAS_SHARE, _BLAS_ENTRIES)
    U = np.empty((n, k))
    Ev = np.empty((P, n, k))
    M = np.empty((n if trying and WDE.shape[1] == 4 * k else 0, k))
    if trying:                       # point 0 at E (the first trials), point p at trial p
        if Xd is not None:           # (with the bias: the last column)
            R = Xd @ np.vstack([WDE[:d], np.concatenate(
                [W[d], Dir[d], E[d], np.zeros(WDE.shape[1] - 3 * k)])[None, :]])
            U[:], V, Ev[0] = R[:, :k], R[:, k:2 * k], R[:, 2 * k:3 * k]
            if len(M):
                M[:] = R[:, 3 * k:]
        else:
            V = np.empty((n, k))
            newton_margins(X, WDE, (U, V, Ev[0], M))
            U += B * W[d]
            V += B * Dir[d]
            Ev[0] += B * E[d]
        for p in range(1, P):
            Ev[p] = U + plan[1][:, p] * V
    else:
        if Xd is not None:
            np.matmul(Xd, W, out=U)
        else:
            csr_matmat(X, W, U)
            U += B * W[d]
        V = U
        Ev[0] = U
    coef, h = np.empty((L, n, k)), np.empty((L, n, k))
    newton_rows(block.y, (U, V, Ev), prob, plan,
                (acc["ftry"], acc["f"], acc["sb"], acc["sbpos"], acc["loss"], acc["csum"]),
                (coef, h))
    return X, Xd, Ev, coef, h, M


def _add_hessians(block, X, Xd, h, args, out_H):
    """Add the block's rows to the Hessian of every slot whose cutoff is finite (``dense``:
    the Hessian covers every feature): by BLAS on dense rows ``Xd``, else row by row."""
    W, unit, amap, cutoff, dense = args[0], args[5], args[7], args[8], args[-1]
    B = args[4]
    k, L = W.shape[1], h.shape[0]
    if dense and Xd is None:
        Xd = dense_rows(block, unit, B, W.shape[0] - 1)
    if dense and Xd is not None and Xd.shape[1] < _SYRK_COLS:
        _add_narrow(Xd, h, cutoff, out_H)
    elif dense and Xd is not None:
        # dense rows and a Hessian over every feature: BLAS on the rows with curvature
        for c in range(k):
            for lv in range(L):
                sel = (h[lv, :, c] > 0.0) & (h[lv, :, c] >= cutoff[c, lv])
                if not sel.any():
                    continue
                # the lower triangle only (square_hessians mirrors it): BLAS's rank-k
                # update of the rows scaled by √h_i, half a product's work
                Xs = Xd[sel] * np.sqrt(h[lv, sel, c])[:, None]
                out_H[c, :, :, lv] += scipy.linalg.blas.dsyrk(1.0, Xs.T, lower=1)
    elif np.isfinite(cutoff).any():
        longest = int(np.diff(block.indptr).max(initial=0)) + 1
        newton_hess_add(X, unit, B, h, cutoff, amap,
                        (np.empty(longest, np.int64), np.empty(longest), np.empty(L)), out_H)


def _add_narrow(Xd, h, cutoff, out_H):
    """Every slot's Hessian of narrow dense rows ``Xd`` in one product: the rows' pairwise
    products ``x_ir x_is`` (``r ≥ s``: the lower triangle) against each slot's curvatures,
    a row below its slot's cutoff weighing 0, ``_PAIR_ROWS`` rows at a time. One call for
    all ``k·L`` slots: letter (17 columns, 26 models, 6 slots a pass) spent 42 % of its
    time in a product per slot and block."""
    n, a = Xd.shape
    k, L = out_H.shape[0], out_H.shape[3]
    w = np.where((h > 0.0) & (h >= cutoff.T[:, None, :]), h, 0.0)      # (L, n, k)
    if not w.any():
        return
    w = w.transpose(1, 2, 0).reshape(n, k * L)                          # column c·L + lv
    r, s = np.tril_indices(a)
    sums = np.zeros((len(r), k * L))
    for lo in range(0, n, _PAIR_ROWS):
        rows = Xd[lo:lo + _PAIR_ROWS]
        sums += (rows[:, r] * rows[:, s]).T @ w[lo:lo + _PAIR_ROWS]
    full = np.zeros((a, a, k, L))
    full[r, s] = sums.reshape(len(r), k, L)
    out_H += full.transpose(2, 0, 1, 3)


def hessian_block(block, views, args, acc):
    """The Hessians a pass with ``args[:10]`` would have summed on this block at the
    slots ``args[10]`` ((k, levels): model ``c``'s slots, its point's levels) of the models
    ``args[11]`` into ``acc["H"]`` (models, a, a, levels), those whose cutoff is finite only
    (``sched.map_reduce_rows`` over the rows kept in RAM: :mod:`._newton_hessian`; the
    other models not computed): the same operations per slot, so the same bits."""
    X, Xd, _, _, h, _ = _rows_of(block, args, acc)
    pick, models = args[10][args[11]], args[11]
    h = np.ascontiguousarray(h[pick.T, :, models].transpose(0, 2, 1))   # (levels, n, m)
    cut = args[8][models[:, None], pick]
    W, amap = args[0][:, models], args[7][:, models]
    _add_hessians(block, X, Xd, h, (W, *args[1:7], amap, cut, args[9]), acc["H"])


def newton_block(block, views, args, acc):
    """One block of a pass (module doc): margins, the per-row terms, the gradient sums and
    the Hessian's rows; for the polish, the rows near the margin at ``E`` marked (they are
    collected), the sums over the rows past the band, and the candidates' losses."""
    W, (Dir, E, WDE), trying, prob, B, unit, plan, amap, cutoff, free, polish, (hess, sample) = args
    n, k = block.n_rows, W.shape[1]
    d = W.shape[0] - 1
    L = plan[3].shape[1]
    X, Xd, Ev, coef, h, M = _rows_of(block, args, acc)
    positive = block.y[:, None] == prob.pos[None, :]
    lens = np.diff(block.indptr)
    none = np.empty((0, k))
    hd, cu = none, none              # the rows of the diagonal's and the polish's sums
    if hess == "cg":
        # no Hessian: its diagonal (cg's preconditioner), and the rows with curvature kept
        # (resident rows, with their curvatures), the polish's marks added below
        hd = h[0]
        # the rows with curvature h_i kept: each with probability min(1, h_i/τ) drawn by
        # row id, weighted h_i/min(1, h_i/τ) = max(h_i, τ) (an unbiased Hessian estimate
        # whose rows near the margin, the ones that weigh, are all kept), τ = 0 keeping
        # every one: τ is sized by the last pass's curvature histogram to the RAM slab
        curv = (h[0] > 0.0) & (h[0] >= cutoff[None, :, 0])
        keep, weight = curvature_sample(h[0], curv, sample, block.row_start)
        views[0][:] = 2 * keep
        views[1][:] = weight
        _curvature_histogram(h[0], curv, lens, acc["hhist"])
    elif hess == "lazy":
        # no Hessian: every row is kept in RAM, where the Hessians at the accepted points
        # are summed after the pass (_newton_hessian.py), the polish's marks added below
        views[0][:] = 4
    else:
        _add_hessians(block, X, Xd, h, (W, None, None, None, B, unit, None, amap, cutoff,
                                        hess == "full"), acc["H"])
    if polish is not None:
        band, cand, cand_live, hband = polish
        yk = np.where(positive, 1.0, -1.0)
        Ck = np.where(positive, prob.Cp[None, :], prob.Cn[None, :])
        z = 1.0 - yk * Ev[0]
        _margin_histogram(np.abs(z), lens, plan[0], hband, acc["zhist"])
        on = band[None, :] >= 0
        near = on & (np.abs(z) <= band[None, :])
        views[0][:] = views[0] | near if hess in ("cg", "lazy") else near
        views[-1][:] = np.where(near, views[-1], np.float32(np.nan))   # a warm start if near
        if hess == "cg":
            kept = near.any(axis=1)
            acc["nearsize"][0] += float(np.count_nonzero(kept))
            acc["nearsize"][1] += float(lens[kept].sum())
        past = np.where(on & (z > band[None, :]), Ck, 0.0)
        cu = past * yk
        acc["usum"] += past.sum(axis=0)
        if cand_live.any():
            if M.shape[0] == 0:          # (a trying pass has them from newton_margins)
                M = np.empty((n, k))
                csr_matmat(X, cand, M)
            M += B * cand[d]
            acc["closs"] += np.where(cand_live[None, :],
                                     Ck * np.maximum(0.0, 1.0 - yk * M), 0.0).sum(axis=0)
    # the gradients of every slot, the diagonal and the polish's sum: one read of the rows
    sums = acc["sums"]
    if Xd is not None and hess != "cg":     # (with the bias: the last column)
        sums += Xd.T @ np.hstack([*coef, *([cu] if len(cu) else [])])
    else:
        newton_scatter(X, coef, hd, cu, sums)
        for lv in range(L):
            sums[d, lv * k:(lv + 1) * k] += B * coef[lv].sum(axis=0)
        if polish is not None:
            sums[d, (L + int(hess == "cg")) * k:] += B * cu.sum(axis=0)
    for lv in range(L):
        if free:
            cp = np.where(positive, coef[lv], 0.0)
            csr_rmatmat_add(X, cp, acc["gpos"][lv])
            acc["gpos"][lv, d] += B * cp.sum(axis=0)
    if hess == "cg":
        sums[d, L * k:(L + 1) * k] += B * B * h[0].sum(axis=0)


def _margin_histogram(az, lens, live, hband, out):
    """Add each live model's rows with ``|z| ≤ hband`` (and their entries) to ``out`` (k,
    HIST_BINS, 2) at the finest bin ``j`` whose edge ``hband·2^(−j/2)`` still holds them:
    the next pass sizes the polish's band from it (:func:`band_that_fits`)."""
    for c in np.flatnonzero(live):
        a = az[:, c]
        m = a <= hband
        if not m.any():
            continue
        with np.errstate(divide="ignore"):
            j = np.floor(2.0 * np.log2(hband / a[m]))
        j = np.minimum(j, HIST_BINS - 1).astype(np.int64)
        out[c, :, 0] += np.bincount(j, minlength=HIST_BINS)
        out[c, :, 1] += np.bincount(j, weights=lens[m], minlength=HIST_BINS)


def curvature_sample(h, curv, tau, start):
    """cg's rows kept, of those with curvature ``curv`` (n, k): row ``i`` with probability
    ``min(1, h_i/τ_c)`` (all when ``τ_c = 0``) drawn by its id (``start`` the block's first
    row), and their weights ``max(h_i, τ_c)``, so that ``Σ_kept weight_i x̄_i x̄_iᵀ`` is an
    unbiased estimate of the Hessian ``Σ h_i x̄_i x̄_iᵀ``: ``(keep, weight)``."""
    tau = np.asarray(tau)[None, :]
    keep = curv
    if (tau > 0).any():
        keep = curv & (row_uniform(start, h.shape[0])[:, None] * tau < h)
    return keep, np.where(keep, np.maximum(h, tau), 0.0)


def _curvature_histogram(h, curv, lens, out):
    """Add each model's rows with curvature (``curv``) to ``out`` (k, H_BINS, 4) by the bin
    of ``log2 h``: rows, entries, and their curvatures' sums ``Σ h``, ``Σ h·entries`` (what
    :func:`threshold_that_fits` weighs the sampled rows by)."""
    for c in range(h.shape[1]):
        m = curv[:, c]
        if not m.any():
            continue
        hc, ln = h[m, c], lens[m].astype(np.float64)
        j = np.clip(np.ceil(H_TOP - np.log2(hc)) - 1, 0, H_BINS - 1).astype(np.int64)
        for col, wts in enumerate((None, ln, hc, hc * ln)):
            out[c, :, col] += np.bincount(j, weights=wts, minlength=H_BINS)


def threshold_that_fits(hhist, cost, room):
    """cg's sampling threshold ``τ`` per model (0: every row with curvature kept) such that
    the rows kept with probability ``min(1, h_i/τ)`` are expected to cost at most ``room``
    bytes (shared evenly between the models), from the last pass's :func:`_curvature_histogram`
    (τ on its bin edges ``2^(H_TOP−j)``); ``cost(rows, entries)``: their bytes in the RAM
    slab (the scheduler's ``ResidentRows.ram_bytes``)."""
    k = hhist.shape[0]
    tau = np.zeros(k)
    for c in range(k):
        rows, nnz, hs, hnnz = (hhist[c, :, col] for col in range(4))
        if cost(rows.sum(), nnz.sum()) <= room / k:
            continue
        edges = 2.0 ** (H_TOP - np.arange(H_BINS + 1))
        for j in range(H_BINS, -1, -1):        # from the smallest threshold up
            t = edges[j]                       # bins < j: h > t, kept; the others h/t
            e_rows = rows[:j].sum() + hs[j:].sum() / t
            e_nnz = nnz[:j].sum() + hnnz[j:].sum() / t
            if cost(e_rows, e_nnz) <= room / k:
                tau[c] = t
                break
        else:
            tau[c] = edges[0]
    return tau


def band_that_fits(zhist, hband, cost, room, shares):
    """The polish's band from the last pass's histogram ``zhist`` (:func:`_margin_histogram`):
    ``hband`` when its rows near the margin cost at most ``shares[0]·room`` bytes in the
    RAM slab (or no histogram yet), else the widest edge ``hband·2^(−j/2)`` whose rows
    cost at most ``shares[1]·room`` (a margin: the iterate moves between passes), or −1
    when not even the finest does (no polish this pass). Every band gives an exact dual
    bound: the rows past it are held at their bounds. ``cost(rows, entries)``: their bytes
    in the RAM slab (the scheduler's ``ResidentRows.ram_bytes``)."""
    whole, share = shares
    below = zhist[:, ::-1].cumsum(axis=1)[:, ::-1].sum(axis=0)   # rows with |z| ≤ edge j
    need = cost(below[:, 0], below[:, 1])
    if need[0] <= whole * room:
        return hband
    fits = np.flatnonzero(need <= share * room)
    return hband * 2.0 ** (-fits[0] / 2.0) if len(fits) else -1.0


def row_uniform(start, n):
    """Uniform numbers in [0, 1) for the global rows ``start … start + n − 1``, a
    function of the row id alone (SplitMix64's finalizer): the same rows are drawn for
    any chunking, and after a resume."""
    z = np.arange(start, start + n, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z ^= z >> np.uint64(31)
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)
