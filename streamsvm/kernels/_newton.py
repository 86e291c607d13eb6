"""Kernels of ``newton``: the smoothed hinge and one fused pass (spec_000 §2, §4.2, §4.4).

The smoothed hinge ``j_α(z) = ½(z + √(α² + z²))`` and its derivatives, evaluated without
cancellation for ``z ≪ 0`` (spec §2)::

    r = √(α² + z²)   (|z| past _BIG: |z|)
    z ≥ 0:  j = ½(z + r),         j' = ½(1 + z/r)
    z < 0:  j = ½α²/(r − z),      j' = ½α²/(r (r − z))
    j'' = ½ (α/r)² / r

A pass over one block (:func:`newton_rows`, then the CSR reductions of ``_csr.py`` and
:func:`newton_hess_add`) evaluates, for every model ``c`` still training,

* the smoothed loss ``Σ_i C_i j(1 − y_i (u_i + s_t v_i))`` at every trial step ``s_t`` of the
  line search (``u = x̄·w``, ``v = x̄·d``: one pass answers the whole Armijo loop);
* at each evaluation point ``e_p`` (the first trials, or ``w``) and at each smoothing level
  ``α_l`` asked for there (a *slot*): the smoothed loss, ``Σ C_i j'``, the per-row
  coefficients of the gradient ``−Σ C_i y_i j' x̄_i`` and the curvatures ``C_i j''`` of the
  Hessian, plus the true loss (hinge or squared hinge) at each point for the certificate.

``x̄_i = (x_i, B)``: the weights are ``W`` of shape (n_features + 1, k), the bias weight in
the last row (``_csr.py``'s orientation). Squared hinge: ``j = max(0, z)²`` (no smoothing),
``j' = 2 max(0, z)``, ``j'' = 2·[z > 0]`` (the generalized Hessian of LIBLINEAR ``-s 2``).
"""

from __future__ import annotations

import math

import numpy as np

from ._csr import is_unit, row_gather
from ._jit import kernel, kernel_inline

__all__ = ["smooth_hinge", "newton_rows", "newton_margins", "newton_scatter", "newton_hess_add",
           "symmetrize_lower"]


_BIG = 1e150            # |z| from which r = |z| (z² would overflow from 1.3e154)


@kernel_inline
def _jfun(z, alpha, sq):
    """``(j, j', j'')`` at ``z`` (squared hinge when ``sq``)."""
    if sq:
        if z > 0.0:
            return z * z, 2.0 * z, 2.0
        return 0.0, 0.0, 0.0
    # a square root, not math.hypot: its libm call (overflow-safe by scaling) made the
    # per-row terms twice as slow (tools/bench.py kernels, newton_rows: 8 trials and 3
    # points on 200,000 rows, 0.038-0.047 s against 0.019-0.029 s); past _BIG, α² is below
    # half an ulp of z² and r = |z|
    r = math.sqrt(alpha * alpha + z * z) if abs(z) < _BIG else abs(z)
    if z >= 0.0:
        j = 0.5 * (z + r)
        j1 = 0.5 * (1.0 + z / r)
    else:
        j = 0.5 * alpha * alpha / (r - z)
        j1 = 0.5 * alpha * alpha / (r * (r - z))
    q = alpha / r
    return j, j1, 0.5 * q * q / r


@kernel
def smooth_hinge(z, alpha, out):
    """``out[:, 0:3] = (j_α, j'_α, j''_α)`` at each ``z`` (module doc)."""
    for i in range(len(z)):
        out[i, 0], out[i, 1], out[i, 2] = _jfun(z[i], alpha, False)


@kernel
def newton_rows(y, margins, prob, plan, acc, out):
    """The per-row part of a pass over one block (module doc).

    Parameters
    ----------
    y : ndarray of shape (n_rows,)
        Labels (±1, or class ids for one-vs-rest).
    margins : tuple (U, V, E)
        ``x̄_i·w`` and ``x̄_i·d`` per model, shape (n_rows, k); ``E`` of shape (P, n_rows, k):
        ``x̄_i·e_p`` at each evaluation point ``p``.
    prob : Costs (pos, Cp, Cn, squared, B)
        Model ``c`` takes row ``i`` as positive when ``y[i] == pos[c]``; costs of its
        positive and negative rows; squared hinge.
    plan : tuple (live, trials, n_trials, alphas, n_points)
        ``live`` (k,) bool: the models computed; ``trials`` (k, K) the trial steps (the
        first ``n_trials[c]`` are used); ``alphas`` (k, L) the smoothing level of each
        evaluation slot, slot ``l`` at point ``l // (L // P)``; ``n_points`` (k,) the points
        evaluated per model (the slots of the other points are zero).
    acc : tuple (ftry, f, sb, sbpos, loss, csum)
        Added into: ``ftry`` (k, K) smoothed loss at each trial (level ``alphas[c, 0]``);
        ``f`` (k, L) smoothed loss per slot; ``sb`` (k, L) ``Σ C_i j'``; ``sbpos`` (k, L) the
        same over the positive rows; ``loss`` (k, P) the true loss at each point; ``csum``
        (k,) ``Σ C_i``.
    out : tuple (coef, h)
        Overwritten, shape (L, n_rows, k): ``C_i y_i j'`` (the gradient of the loss is
        ``−Σ_i coef_i x̄_i``) and ``C_i j''`` per slot.
    """
    U, V, E = margins
    pos, Cp, Cn, sq = prob.pos, prob.Cp, prob.Cn, prob.squared
    live, trials, n_trials, alphas, n_points = plan
    ftry, f, sb, sbpos, loss, csum = acc
    coef, h = out
    k = len(pos)
    L = alphas.shape[1]
    per = L // E.shape[0]
    for i in range(len(y)):
        for c in range(k):
            for lv in range(L):
                coef[lv, i, c] = 0.0
                h[lv, i, c] = 0.0
            if not live[c]:
                continue
            yi = 1.0 if y[i] == pos[c] else -1.0
            Ci = Cp[c] if yi > 0 else Cn[c]
            csum[c] += Ci
            a0 = alphas[c, 0]
            for t in range(n_trials[c]):
                jt, _, _ = _jfun(1.0 - yi * (U[i, c] + trials[c, t] * V[i, c]), a0, sq)
                ftry[c, t] += Ci * jt
            for p in range(n_points[c]):
                z = 1.0 - yi * E[p, i, c]
                xi = max(0.0, z)
                loss[c, p] += Ci * (xi * xi if sq else xi)
                for lv in range(p * per, (p + 1) * per):
                    j, j1, j2 = _jfun(z, alphas[c, lv], sq)
                    f[c, lv] += Ci * j
                    sb[c, lv] += Ci * j1
                    if yi > 0:
                        sbpos[c, lv] += Ci * j1
                    coef[lv, i, c] = Ci * j1 * yi
                    h[lv, i, c] = Ci * j2


@kernel
def newton_margins(X, WDE, out):
    """``out = (X W, X D, X E, X C)``, each (n_rows, k), without the bias, from ``WDE``
    (n_features + 1, 3k or 4k) = ``[W D E]`` or ``[W D E C]`` side by side (one cache line of
    a feature for all of them; ``C``, the polish's candidate, only when ``out[3]`` has rows):
    one read of each row (``csr_matmat``'s sums, in its order: the same bits). One model
    (``k == 1``) sums in registers, not through ``out`` (``tools/bench.py kernels`` on
    200,000 rows of the 3·10^6-row store: 0.023–0.035 s a call against 0.043–0.076 s, and
    with the candidate 0.026 s against 0.075–0.093 s for a separate ``csr_matmat``)."""
    indptr, indices, data = X
    unit = is_unit(X)
    U, V, F, M = out
    k = U.shape[1]
    has_m = M.shape[0] > 0
    if k == 1:
        _margins_one(X, unit, WDE, out, has_m)
        return
    for i in range(len(indptr) - 1):
        for c in range(k):
            U[i, c] = 0.0
            V[i, c] = 0.0
            F[i, c] = 0.0
            if has_m:
                M[i, c] = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = 1.0 if unit else np.float64(data[p])
            j = indices[p]
            for c in range(k):
                U[i, c] += x * WDE[j, c]
                V[i, c] += x * WDE[j, k + c]
                F[i, c] += x * WDE[j, 2 * k + c]
                if has_m:
                    M[i, c] += x * WDE[j, 3 * k + c]


@kernel
def _margins_one(X, unit, WDE, out, has_m):
    """:func:`newton_margins` for one model, its four sums in registers."""
    indptr, indices, data = X
    U, V, F, M = out
    for i in range(len(indptr) - 1):
        u = 0.0
        v = 0.0
        f = 0.0
        m = 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = 1.0 if unit else np.float64(data[p])
            j = indices[p]
            u += x * WDE[j, 0]
            v += x * WDE[j, 1]
            f += x * WDE[j, 2]
            if has_m:
                m += x * WDE[j, 3]
        U[i, 0] = u
        V[i, 0] = v
        F[i, 0] = f
        if has_m:
            M[i, 0] = m


@kernel
def newton_scatter(X, coef, h, cu, out):
    """A pass's sums over one block's rows into the columns of ``out`` (n_features + 1,
    S), one read of each row and one cache line of a feature for all of them
    (``csr_rmatmat_add``'s sums, each in its order: the same bits), without the bias:

    * columns ``l·k … l·k + k − 1``: ``Xᵀ coef[l]`` for every slot ``l`` (coef (L, n_rows, k));
    * the next ``k`` when ``h`` has rows: ``(X∘X)ᵀ h`` (the Hessian's diagonal, cg);
    * the next ``k`` when ``cu`` has rows: ``Xᵀ cu`` (the polish's sum past the band).

    A row whose ``h`` (or ``cu``) is zero for every model adds nothing to that sum and is
    skipped (adding +0.0 to a sum started at +0.0 changes no bit)."""
    indptr, indices, data = X
    unit = is_unit(X)
    L, k = coef.shape[0], coef.shape[2]
    has_h, has_u = h.shape[0] > 0, cu.shape[0] > 0
    oh = L * k
    ou = oh + k if has_h else oh
    if k == 1:
        _scatter_one(X, unit, coef, h, cu, has_h, has_u, out)
        return
    for i in range(len(indptr) - 1):
        use_h = False
        use_u = False
        for c in range(k):
            if has_h and h[i, c] != 0.0:
                use_h = True
            if has_u and cu[i, c] != 0.0:
                use_u = True
        for p in range(indptr[i], indptr[i + 1]):
            x = 1.0 if unit else np.float64(data[p])
            j = indices[p]
            for lv in range(L):
                for c in range(k):
                    out[j, lv * k + c] += x * coef[lv, i, c]
            if use_h:
                x2 = x * x
                for c in range(k):
                    out[j, oh + c] += x2 * h[i, c]
            if use_u:
                for c in range(k):
                    out[j, ou + c] += x * cu[i, c]


@kernel
def _scatter_one(X, unit, coef, h, cu, has_h, has_u, out):
    """:func:`newton_scatter` for one model: the row's coefficients of the first three slots,
    its curvature and its polish term in registers (the same additions in the same order:
    the same bits; ``tools/bench.py kernels``, 200,000 rows of the 3·10^6-row store, three
    slots, the diagonal and the polish's sum: 0.039–0.046 s a call against 0.107–0.176 s
    for the general loop)."""
    indptr, indices, data = X
    L = coef.shape[0]
    oh = L
    ou = oh + 1 if has_h else oh
    for i in range(len(indptr) - 1):
        a0 = coef[0, i, 0]
        a1 = coef[1, i, 0] if L > 1 else 0.0
        a2 = coef[2, i, 0] if L > 2 else 0.0
        hh = h[i, 0] if has_h else 0.0
        uu = cu[i, 0] if has_u else 0.0
        use_h = hh != 0.0
        use_u = uu != 0.0
        for p in range(indptr[i], indptr[i + 1]):
            x = 1.0 if unit else np.float64(data[p])
            j = indices[p]
            out[j, 0] += x * a0
            if L > 1:
                out[j, 1] += x * a1
            if L > 2:
                out[j, 2] += x * a2
            for lv in range(3, L):
                out[j, lv] += x * coef[lv, i, 0]
            if use_h:
                out[j, oh] += (x * x) * hh
            if use_u:
                out[j, ou] += x * uu


@kernel
def newton_hess_add(X, unit, B, h, cutoff, amap, scratch, out_H):
    """``out_H[c, :, :, l] += Σ_i h[l, i, c] x̄_iA x̄_iAᵀ`` (lower triangle) over the rows
    whose curvature ``h[l, i, c]`` is at least ``cutoff[c, l]``.

    ``out_H`` is (k, a, a, L): the slots innermost, so that each product of two entries of a
    row is formed once and added to every slot's Hessian in one contiguous run. ``amap``
    (n_features + 1, k) int64: the position of each feature (the bias last) in model ``c``'s
    Hessian, or −1 when it is not in it. ``scratch``: (positions int64, values float64), each
    at least the longest row + 1, and curvatures (L,) float64. Rows are added one by one
    into ``out_H``, so the sum does not depend on how the rows are cut into blocks.
    """
    posb, valb, hb = scratch
    d = amap.shape[0] - 1
    L = h.shape[0]
    for i in range(len(X[0]) - 1):
        for c in range(amap.shape[1]):
            any_h = False
            for lv in range(L):
                hv = h[lv, i, c]
                if hv <= 0.0 or hv < cutoff[c, lv]:
                    hb[lv] = 0.0
                else:
                    hb[lv] = hv
                    any_h = True
            if not any_h:
                continue
            m = row_gather(X, unit, i, amap, c, posb, valb)
            if B != 0.0 and amap[d, c] >= 0:
                posb[m] = amap[d, c]
                valb[m] = B
                m += 1
            H = out_H[c]
            for s in range(m):
                ps = posb[s]
                vs = valb[s]
                for t in range(m):
                    pt = posb[t]
                    if pt <= ps:
                        v = vs * valb[t]
                        for lv in range(L):
                            H[ps, pt, lv] += hb[lv] * v


@kernel
def symmetrize_lower(out_H):
    """Copy the lower triangle of the square ``out_H`` onto its upper one, in place (no
    ``a×a`` temporaries): ``out_H[i, j] = 0.0 + out_H[j, i]`` for ``i < j``, the others
    ``+ 0.0``. The same bits as ``low + tril(low, -1).T`` with ``low = tril(out_H)``, −0.0
    included (it becomes +0.0 there too)."""
    a = out_H.shape[0]
    for i in range(a):
        for j in range(i + 1):
            out_H[i, j] = out_H[i, j] + 0.0
        for j in range(i + 1, a):
            out_H[i, j] = 0.0 + out_H[j, i]
