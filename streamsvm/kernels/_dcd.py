"""Dual coordinate descent kernels (LIBLINEAR's ``solve_l2r_l1l2_svc``, spec_003 §1.4–1.8).

One call sweeps a given order of rows taken from up to two resident blocks (the shuffle
buffer: rows of both blocks interleaved at random) or from the in-memory slab, for all
one-vs-rest models at once (one read of a row serves every model). Models are indexed
by ``c``; row ``i`` is positive for model ``c`` when ``ycls[i] == pos[c]``.

Per model: ``U = C_i`` and ``D = 0`` for the hinge loss, ``U = inf`` and ``D = 1/(2 C_i)``
for the squared hinge. The bias is a regularized constant feature of value ``B`` kept as
the scalar ``wb[c]`` (never stored in the CSR). Shrinking follows LIBLINEAR 1.92 exactly
(spec §1.5) with the thresholds ``pgmax_old``/``pgmin_old`` of the previous pass.
"""

from __future__ import annotations

import numpy as np
from ._jit import kernel, kernel_inline

__all__ = ["dcd_sweep", "dcd_slab_epochs", "dcd_check", "dcd_terms_add", "row_sq_norms_bias"]


@kernel_inline
def _row_dot(indptr, indices, data, i, W, c):
    s = 0.0
    for p in range(indptr[i], indptr[i + 1]):
        s += np.float64(data[p]) * W[c, indices[p]]
    return s


@kernel_inline
def _row_axpy(indptr, indices, data, i, a, out_W, c):
    for p in range(indptr[i], indptr[i + 1]):
        out_W[c, indices[p]] += a * np.float64(data[p])


@kernel_inline
def _cost(yi, c, Cp, Cn):
    return Cp[c] if yi > 0 else Cn[c]


@kernel_inline
def _step(G, a, qd, U):
    """Projected Newton step of one coordinate; returns the new alpha."""
    if qd <= 0.0:                       # empty row, hinge, no bias: f is linear in alpha
        return U if G < 0 else 0.0
    return min(max(a - G / qd, 0.0), U)


@kernel_inline
def _visit(indptr, indices, data, ycls, i, pos, Cp, Cn, l2, B, out_W, out_wb, out_alpha,
           out_active, out_margin, qd, pgmax_old, pgmin_old, out_pg):
    """One visit of row ``i``: a coordinate step for every model still active on it."""
    steps = 0
    for c in range(len(pos)):
        if out_active[i, c] == 0:
            continue
        steps += 1
        yi = 1.0 if ycls[i] == pos[c] else -1.0
        Ci = _cost(yi, c, Cp, Cn)
        U = np.inf if l2 else Ci
        D = 0.5 / Ci if l2 else 0.0
        m = yi * (_row_dot(indptr, indices, data, i, out_W, c) + out_wb[c] * B)
        out_margin[i, c] = m
        a = out_alpha[i, c]
        G = m - 1.0 + D * a
        PG = 0.0
        if a == 0.0:
            if G > pgmax_old[c]:            # shrink (spec_003 §1.5)
                out_active[i, c] = 0
                out_pg[c, 2] += 1
                continue
            if G < 0.0:
                PG = G
        elif a == U:
            if G < pgmin_old[c]:
                out_active[i, c] = 0
                out_pg[c, 2] += 1
                continue
            if G > 0.0:
                PG = G
        else:
            PG = G
        out_pg[c, 0] = max(out_pg[c, 0], PG)
        out_pg[c, 1] = min(out_pg[c, 1], PG)
        if abs(PG) > 1e-12:
            a_new = _step(G, a, qd[i] + D, U)
            out_alpha[i, c] = a_new
            d = (a_new - a) * yi
            _row_axpy(indptr, indices, data, i, d, out_W, c)
            out_wb[c] += d * B
    return steps


@kernel
def dcd_sweep(indptrs, indicess, datas, yclss, slots, rows, pos, Cp, Cn, l2, B,
              out_W, out_wb, out_alphas, out_actives, out_margins, qds, pgmax_old, pgmin_old,
              out_pg):
    """Dual CD steps over ``rows`` of two resident blocks (the shuffle buffer).

    Parameters
    ----------
    indptrs, indicess, datas, yclss : tuples of 2 arrays
        CSR arrays and class ids (int32) of the resident blocks (slot 0 and 1).
    slots, rows : ndarray of shape (n_steps,)
        Visit order: block slot and local row of each step.
    pos : ndarray of shape (k,), int32
        Positive class id of each model.
    Cp, Cn : ndarray of shape (k,)
        Cost of positive / negative rows per model.
    l2 : bool
        Squared hinge (True) or hinge (False).
    B : float
        Bias feature value (0: no bias).
    out_W : ndarray of shape (k, n_features)
    out_wb : ndarray of shape (k,)
    out_alphas, out_actives, out_margins : tuples of 2 arrays of shape (n_rows_slot, k)
        Dual variables, active flags (uint8) and visit-time margins ``y_i (w·x_i + b)``.
    qds : tuple of 2 arrays of shape (n_rows_slot,)
        ``‖x_i‖² + B²``.
    pgmax_old, pgmin_old : ndarray of shape (k,)
        Shrinking thresholds from the previous pass.
    out_pg : ndarray of shape (k, 3)
        Running ``[max PG, min PG, rows shrunk]``; updated in place.

    Returns
    -------
    int
        Number of coordinate steps made.
    """
    steps = 0
    for j in range(len(rows)):
        s = slots[j]
        steps += _visit(indptrs[s], indicess[s], datas[s], yclss[s], rows[j], pos, Cp, Cn, l2,
                        B, out_W, out_wb, out_alphas[s], out_actives[s], out_margins[s],
                        qds[s], pgmax_old, pgmin_old, out_pg)
    return steps


@kernel
def dcd_slab_epochs(indptr, indices, data, ycls, pos, Cp, Cn, l2, B, shrinking, seed,
                    max_visits, eps_pg, out_W, out_wb, out_alpha, out_active, out_margin, qd,
                    pgmax_old_inout, pgmin_old_inout, work, out_pg, out_info):
    """LIBLINEAR's in-memory epochs over the RAM slab, several per call.

    Each epoch visits the active rows in a fresh random order (Fisher–Yates with numba's
    generator seeded by ``seed``, so a call is reproducible) and then updates the
    shrinking thresholds (spec_003 §1.5). Returns to the caller after the epoch in which
    the visits reach ``max_visits`` or the projected-gradient spread falls to ``eps_pg``.

    Parameters
    ----------
    indptr, indices, data, ycls, qd : the slab's CSR arrays, class ids and ``‖x_i‖² + B²``
    pos, Cp, Cn, l2, B : as in :func:`dcd_sweep`
    shrinking : bool
    seed : int
    max_visits : int
    eps_pg : float
    out_W, out_wb, out_alpha, out_active, out_margin : as in :func:`dcd_sweep`
    pgmax_old_inout, pgmin_old_inout : ndarray of shape (k,)
        Thresholds, updated after every epoch.
    work : ndarray of shape (n_rows,), int64
        Scratch for the visit order.
    out_pg : ndarray of shape (k, 3)
        ``[max PG, min PG, rows shrunk]`` of the last epoch.
    out_info : ndarray of shape (4,)
        ``[epochs, visits, PG spread of the last epoch, 1 if no row was active]``.
    """
    np.random.seed(seed)
    k = len(pos)
    epochs = 0
    visits = 0
    out_info[3] = 0.0
    while True:
        m = 0
        for i in range(len(ycls)):
            for c in range(k):
                if out_active[i, c]:
                    work[m] = i
                    m += 1
                    break
        if m == 0:
            out_info[3] = 1.0
            break
        for t in range(m - 1):
            j = np.random.randint(t, m)
            tmp = work[t]
            work[t] = work[j]
            work[j] = tmp
        for c in range(k):
            out_pg[c, 0], out_pg[c, 1], out_pg[c, 2] = -np.inf, np.inf, 0.0
        for t in range(m):
            _visit(indptr, indices, data, ycls, work[t], pos, Cp, Cn, l2, B, out_W, out_wb,
                   out_alpha, out_active, out_margin, qd, pgmax_old_inout, pgmin_old_inout,
                   out_pg)
        epochs += 1
        visits += m
        spread = -np.inf
        for c in range(k):
            spread = max(spread, out_pg[c, 0] - out_pg[c, 1])
            if shrinking:
                pgmax_old_inout[c] = out_pg[c, 0] if out_pg[c, 0] > 0.0 else np.inf
                pgmin_old_inout[c] = out_pg[c, 1] if out_pg[c, 1] < 0.0 else -np.inf
        out_info[2] = spread
        if spread <= eps_pg or visits >= max_visits:
            break
    out_info[0] = epochs
    out_info[1] = visits


@kernel
def dcd_check(indptr, indices, data, ycls, pos, Cp, Cn, l2, B, W, wb, alpha, out_margins,
              out_stats):
    """Exact optimality measures at fixed ``W`` (read-only on the data and ``alpha``).

    Parameters
    ----------
    indptr, indices, data : CSR arrays of one block
    ycls : ndarray of shape (n_rows,), int32
    pos, Cp, Cn, l2, B, W, wb : as in :func:`dcd_sweep`
    alpha : ndarray of shape (n_rows, k)
    out_margins : ndarray of shape (n_rows, k)
        Overwritten with the exact margins ``y_i (w·x_i + b)``.
    out_stats : ndarray of shape (k, 3)
        Overwritten with ``[max PG, min PG, Σ C_i loss_i]`` over the block.
    """
    k = len(pos)
    for c in range(k):
        out_stats[c, 0] = -np.inf
        out_stats[c, 1] = np.inf
        out_stats[c, 2] = 0.0
    for i in range(len(ycls)):
        for c in range(k):
            yi = 1.0 if ycls[i] == pos[c] else -1.0
            Ci = _cost(yi, c, Cp, Cn)
            U = np.inf if l2 else Ci
            m = yi * (_row_dot(indptr, indices, data, i, W, c) + wb[c] * B)
            out_margins[i, c] = m
            xi = max(0.0, 1.0 - m)
            out_stats[c, 2] += Ci * (xi * xi if l2 else xi)
            a = alpha[i, c]
            G = m - 1.0 + (0.5 / Ci if l2 else 0.0) * a
            PG = G
            if a == 0.0:
                PG = min(G, 0.0)
            elif a == U:
                PG = max(G, 0.0)
            out_stats[c, 0] = max(out_stats[c, 0], PG)
            out_stats[c, 1] = min(out_stats[c, 1], PG)


@kernel
def row_sq_norms_bias(indptr, data, B, out):
    """``out[i] = ‖x_i‖² + B²`` (float64).

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
    data : ndarray of shape (nnz,)
    B : float
    out : ndarray of shape (n_rows,)
    """
    for i in range(len(indptr) - 1):
        s = B * B
        for p in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[p])
            s += v * v
        out[i] = s


@kernel
def dcd_terms_add(ycls, alpha, margin, pos, Cp, Cn, l2, out):
    """Add the per-model sums behind the certificate, without temporaries.

    Parameters
    ----------
    ycls : ndarray of shape (n_rows,)
    alpha, margin : ndarray of shape (n_rows, k)
    pos, Cp, Cn, l2 : as in :func:`dcd_sweep`
    out : ndarray of shape (k, 3)
        ``out[c] += [Σ C_i ξ(margin_ic), Σ α_ic, ½ Σ D_ic α_ic²]`` (D = 1/(2C_i) for the
        squared hinge, 0 for the hinge).
    """
    for i in range(len(ycls)):
        for c in range(len(pos)):
            Ci = Cp[c] if ycls[i] == pos[c] else Cn[c]
            xi = max(0.0, 1.0 - margin[i, c])
            a = alpha[i, c]
            if l2:
                out[c, 0] += Ci * xi * xi
                out[c, 2] += 0.25 / Ci * a * a          # ½ D α², D = 1/(2C)
            else:
                out[c, 0] += Ci * xi
            out[c, 1] += a
