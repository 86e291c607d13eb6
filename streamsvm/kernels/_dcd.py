"""Dual coordinate descent kernels (LIBLINEAR's ``solve_l2r_l1l2_svc``, spec_003 §1.4–1.8).

One call sweeps a given order of rows taken from up to two resident blocks (the shuffle
buffer: rows of both blocks interleaved at random) or runs epochs over the in-memory slab,
for all one-vs-rest models at once (one read of a row serves every model). Models are
indexed by ``c``; row ``i`` is positive for model ``c`` when ``ycls[i] == pos[c]``.

Per model: ``U = C_i`` and ``D = 0`` for the hinge loss, ``U = inf`` and ``D = 1/(2 C_i)``
for the squared hinge. The bias is a regularized constant feature of value ``B`` kept as
the scalar ``wb[c]`` (never stored in the CSR). Shrinking follows LIBLINEAR 1.92 exactly
(spec §1.5) with the thresholds ``pgmax_old``/``pgmin_old`` of the previous pass.

``unit`` is True when every stored value is 1 (the store omits ``data``): the row loops
then read only the indices, and ``data`` may be empty.

Certificate of shrunk rows (not in LIBLINEAR). A row is shrunk only at a bound and is not
visited again until un-shrinking, so its terms are known without its margin except for
the loss: at ``α = 0`` it was shrunk with margin > 1, and its loss is taken as 0; at
``α = U = C_i`` (hinge only) its loss ``C_i (1 − m_i)`` is linear in ``w``, and the sum over
all such rows is ``Σ C_i − w·zu − wb·zs[0]`` with ``zu = Σ C_i y_i x_i`` and
``zs = [Σ C_i y_i B, Σ C_i]`` accumulated when rows are shrunk. The approximate primal
(used only to decide when to run the exact check) therefore tracks the current ``w``
instead of margins recorded many epochs ago.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel, kernel_inline
from ._prefetch import prefetch, prefetch2
from ._rng import shuffle_prefix

__all__ = ["dcd_sweep", "dcd_slab_epochs", "dcd_check", "dcd_terms_add", "row_sq_norms_bias",
           "dcd_estimate"]

# Visits ahead at which the row's state and its CSR slice are prefetched.
_AHEAD_STATE = 12
_AHEAD_ROW = 6


@kernel_inline
def _row_dot(indptr, indices, data, unit, i, W, c):
    s = 0.0
    if unit:
        for p in range(indptr[i], indptr[i + 1]):
            s += W[c, indices[p]]
    else:
        for p in range(indptr[i], indptr[i + 1]):
            s += np.float64(data[p]) * W[c, indices[p]]
    return s


@kernel_inline
def _row_axpy(indptr, indices, data, unit, i, a, out_W, c):
    if unit:
        for p in range(indptr[i], indptr[i + 1]):
            out_W[c, indices[p]] += a
    else:
        for p in range(indptr[i], indptr[i + 1]):
            out_W[c, indices[p]] += a * np.float64(data[p])


@kernel_inline
def _prefetch_state(indptr, ycls, alpha, i):
    prefetch(indptr, i)
    prefetch(ycls, i)
    prefetch2(alpha, i, 0)


@kernel_inline
def _prefetch_lines(arr, p0, p1):
    """Prefetch every cache line of ``arr[p0:p1]`` (64-byte lines)."""
    if p1 > p0:
        step = max(1, 64 // arr.itemsize)
        for p in range(p0, p1, step):
            prefetch(arr, p)
        prefetch(arr, p1 - 1)


@kernel_inline
def _prefetch_row(indptr, indices, data, unit, i):
    """The whole CSR slice of row ``i`` (a row spans several cache lines; prefetching only
    the first one left the others to miss in a random visit order)."""
    p0 = indptr[i]
    p1 = indptr[i + 1]
    _prefetch_lines(indices, p0, p1)
    if not unit:
        _prefetch_lines(data, p0, p1)


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
def _row_qd(indptr, data, unit, i, B):
    """``‖x_i‖² + B²``."""
    if unit:
        return B * B + (indptr[i + 1] - indptr[i])
    s = B * B
    for p in range(indptr[i], indptr[i + 1]):
        v = np.float64(data[p])
        s += v * v
    return s


@kernel_inline
def _visit(indptr, indices, data, unit, ycls, i, qd_i, pos, Cp, Cn, l2, B, out_W, out_wb,
           out_alpha, out_active, out_margin, record, pgmax_old, pgmin_old, out_pg, out_zu,
           out_zs, out_terms, add_terms):
    """One visit of row ``i``: a coordinate step for every model still active on it.

    ``qd_i``: ``‖x_i‖² + B²``, or a negative value to have it computed from the row only
    when a step is taken (a streamed sweep, where most early visits take none).

    ``record``: store the visit-time margin in ``out_margin``; ``add_terms``: add the
    certificate terms of the pairs still active after the visit to ``out_terms`` (as
    :func:`dcd_terms_add`, with the visit-time margin).
    """
    steps = 0
    for c in range(len(pos)):
        if out_active[i, c] == 0:
            continue
        steps += 1
        yi = 1.0 if ycls[i] == pos[c] else -1.0
        Ci = _cost(yi, c, Cp, Cn)
        U = np.inf if l2 else Ci
        D = 0.5 / Ci if l2 else 0.0
        m = yi * (_row_dot(indptr, indices, data, unit, i, out_W, c) + out_wb[c] * B)
        if record:
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
                # its loss C_i (1 - m_i) is now tracked linearly in w (module doc)
                _row_axpy(indptr, indices, data, unit, i, Ci * yi, out_zu, c)
                out_zs[c, 0] += Ci * yi * B
                out_zs[c, 1] += Ci
                continue
            if G > 0.0:
                PG = G
        else:
            PG = G
        out_pg[c, 0] = max(out_pg[c, 0], PG)
        out_pg[c, 1] = min(out_pg[c, 1], PG)
        if abs(PG) > 1e-12:
            if qd_i < 0.0:              # computed on the first step the visit takes
                qd_i = _row_qd(indptr, data, unit, i, B)
            a_new = _step(G, a, qd_i + D, U)
            out_alpha[i, c] = a_new
            d = (a_new - a) * yi
            _row_axpy(indptr, indices, data, unit, i, d, out_W, c)
            out_wb[c] += d * B
            a = a_new
        if add_terms:
            _add_terms(out_terms, c, Ci, m, a, l2)
    return steps


@kernel
def dcd_sweep(indptrs, indicess, datas, unit, yclss, n_slots, rng_state, work, pos, Cp, Cn,
              l2, B, out_W, out_wb, out_alphas, out_actives, pgmax_old, pgmin_old, out_pg,
              out_zu, out_zs, out_terms, out_counts):
    """Dual CD steps over the active rows of up to two resident blocks (the shuffle
    buffer), visited in one random order that interleaves the blocks.

    Parameters
    ----------
    indptrs, indicess, datas, yclss : tuples of 2 arrays
        CSR arrays and labels of the resident blocks (slot 0 and 1): the block's ``y``,
        float32 ±1 (binary, ``pos = [1]``) or int32 class ids.
    unit : bool
        Every value is 1 (``datas`` not read).
    n_slots : int
        1 or 2: how many of the slots hold a block (slot 1 is ignored when 1).
    rng_state : ndarray of shape (1,), uint64
        SplitMix64 state of the visit order (``kernels._rng``); advanced.
    work : ndarray of int64, at least the rows of the used slots
        Scratch for the visit order (``2 * row + slot``).
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
    out_alphas, out_actives : tuples of 2 arrays of shape (n_rows_slot, k)
        Dual variables and active flags (uint8).
    pgmax_old, pgmin_old : ndarray of shape (k,)
        Shrinking thresholds from the previous pass.
    out_pg : ndarray of shape (k, 3)
        Running ``[max PG, min PG, rows shrunk]``; updated in place.
    out_zu : ndarray of shape (k, n_features)
    out_zs : ndarray of shape (k, 2)
        Sums over the rows shrunk at the upper bound (module doc); updated in place.
    out_terms : ndarray of shape (k, 3)
        Certificate terms of the visited pairs left active (:func:`dcd_terms_add`), added.
    out_counts : ndarray of shape (2, 2), int64
        Overwritten with ``[rows active for some model, their non-zeros]`` per slot after
        the sweep.

    Returns
    -------
    int
        Number of coordinate steps made.
    """
    k = len(pos)
    n = 0
    for s in range(n_slots):
        act = out_actives[s]
        for i in range(act.shape[0]):
            for c in range(k):
                if act[i, c]:
                    work[n] = 2 * i + s
                    n += 1
                    break
    shuffle_prefix(work, n, rng_state)
    steps = 0
    for j in range(n):
        if j + _AHEAD_STATE < n:
            v = work[j + _AHEAD_STATE]
            s2 = v & 1
            _prefetch_state(indptrs[s2], yclss[s2], out_alphas[s2], v >> 1)
        if j + _AHEAD_ROW < n:
            v = work[j + _AHEAD_ROW]
            s2 = v & 1
            _prefetch_row(indptrs[s2], indicess[s2], datas[s2], unit, v >> 1)
        s = work[j] & 1
        i = work[j] >> 1
        steps += _visit(indptrs[s], indicess[s], datas[s], unit, yclss[s], i, -1.0,
                        pos, Cp, Cn, l2, B, out_W,
                        out_wb, out_alphas[s], out_actives[s], out_alphas[s], False, pgmax_old,
                        pgmin_old, out_pg, out_zu, out_zs, out_terms, True)
    for s in range(2):
        out_counts[s, 0] = 0
        out_counts[s, 1] = 0
    for s in range(n_slots):
        act = out_actives[s]
        indptr = indptrs[s]
        for i in range(act.shape[0]):
            for c in range(k):
                if act[i, c]:
                    out_counts[s, 0] += 1
                    out_counts[s, 1] += indptr[i + 1] - indptr[i]
                    break
    return steps


@kernel_inline
def _estimate_one(c, W, wb, zu, zs, loss, sum_a, half_da2, out_cert):
    """``out_cert[c] = [primal, dual]`` estimates from the sums over the active rows."""
    reg = wb[c] * wb[c]
    lin = wb[c] * zs[c, 0]
    for j in range(W.shape[1]):
        reg += W[c, j] * W[c, j]
        lin += W[c, j] * zu[c, j]
    reg *= 0.5
    out_cert[c, 0] = reg + loss + zs[c, 1] - lin
    out_cert[c, 1] = -(reg + half_da2 - sum_a - zs[c, 1])


@kernel
def dcd_estimate(W, wb, zu, zs, terms, out_cert):
    """Primal and dual estimates per model from :func:`dcd_terms_add` sums.

    Parameters
    ----------
    W, wb : the models
    zu, zs : sums over the rows shrunk at the upper bound (module doc)
    terms : ndarray of shape (k, 3)
        Sums over the active rows: ``[Σ C_i ξ(m_i), Σ α_i, ½ Σ D_i α_i²]``.
    out_cert : ndarray of shape (k, 2)
        ``[primal, dual]`` per model. The dual is exact; the primal uses the recorded
        margins of active rows.
    """
    for c in range(W.shape[0]):
        _estimate_one(c, W, wb, zu, zs, terms[c, 0], terms[c, 1], terms[c, 2], out_cert)


@kernel_inline
def _add_terms(out, c, Ci, m, a, l2):
    """``out[c] += [C_i ξ(m), α, ½ D α²]`` (D = 1/(2C_i) for the squared hinge, else 0)."""
    xi = max(0.0, 1.0 - m)
    if l2:
        out[c, 0] += Ci * xi * xi
        out[c, 2] += 0.25 / Ci * a * a
    else:
        out[c, 0] += Ci * xi
    out[c, 1] += a


@kernel_inline
def _terms_row(ycls, alpha, active, margin, i, c, pos, Cp, Cn, l2, out):
    if active[i, c] != 0:
        _add_terms(out, c, Cp[c] if ycls[i] == pos[c] else Cn[c], margin[i, c], alpha[i, c], l2)


@kernel
def dcd_terms_add(ycls, alpha, active, margin, pos, Cp, Cn, l2, out):
    """Add the per-model sums behind the certificate over the active (row, model) pairs.

    Parameters
    ----------
    ycls : ndarray of shape (n_rows,)
    alpha, active, margin : ndarray of shape (n_rows, k)
    pos, Cp, Cn, l2 : as in :func:`dcd_sweep`
    out : ndarray of shape (k, 3)
        ``out[c] += [Σ C_i ξ(margin_ic), Σ α_ic, ½ Σ D_ic α_ic²]`` over active pairs (D =
        1/(2C_i) for the squared hinge, 0 for the hinge). Shrunk pairs are accounted by
        ``zu``/``zs`` (module doc).
    """
    for i in range(len(ycls)):
        for c in range(len(pos)):
            _terms_row(ycls, alpha, active, margin, i, c, pos, Cp, Cn, l2, out)


@kernel
def dcd_slab_epochs(indptr, indices, data, unit, ycls, pos, Cp, Cn, l2, B, shrinking,
                    rng_state, max_visits, eps_pg, gap_stop, gap_after, out_W, out_wb,
                    out_alpha, out_active, out_margin, qd, pgmax_old_inout, pgmin_old_inout,
                    work, out_pg, out_zu, out_zs, work_terms, out_cert, out_info):
    """LIBLINEAR's in-memory epochs over the RAM slab, several per call.

    Each epoch visits the active rows in a fresh random order (Fisher–Yates with the
    SplitMix64 state ``rng_state``, so a call is reproducible) and then updates the
    shrinking thresholds (spec_003 §1.5). The list of active rows is built once per call
    and compacted after every epoch (LIBLINEAR's ``active_size``). The certificate
    estimate (:func:`dcd_estimate`) is recomputed after an epoch once the visits since the
    last one have touched ``k · n_features`` entries (so its ``O(k d)`` cost stays small).
    Returns after the epoch in which the visits reach ``max_visits``, the
    projected-gradient spread falls to ``eps_pg``, the estimated relative gap of every
    model falls to ``gap_stop`` (once the visits reach ``gap_after``), or no row is active.

    Parameters
    ----------
    indptr, indices, data, ycls, qd : the slab's CSR arrays, class ids and ``‖x_i‖² + B²``
    unit, pos, Cp, Cn, l2, B : as in :func:`dcd_sweep`
    shrinking : bool
    rng_state : ndarray of shape (1,), uint64
    max_visits, gap_after : int
    eps_pg, gap_stop : float
    out_W, out_wb, out_alpha, out_active, out_margin, out_zu, out_zs : as in :func:`dcd_sweep`
    pgmax_old_inout, pgmin_old_inout : ndarray of shape (k,)
        Thresholds, updated after every epoch.
    work : ndarray of shape (n_rows,), int64
        Scratch for the list of active rows.
    work_terms : ndarray of shape (k, 3)
        Scratch for the certificate sums.
    out_pg : ndarray of shape (k, 3)
        ``[max PG, min PG, rows shrunk]`` of the last epoch.
    out_cert : ndarray of shape (k, 2)
        ``[primal, dual]`` estimates after the last epoch.
    out_info : ndarray of shape (5,)
        ``[epochs, visits, PG spread of the last epoch, 1 if no row was active,
        active rows]``.
    """
    k = len(pos)
    d = out_W.shape[1]
    m = 0
    for i in range(len(ycls)):
        for c in range(k):
            if out_active[i, c]:
                work[m] = i
                m += 1
                break
    epochs = 0
    visits = 0
    since_cert = 0
    out_info[3] = 0.0
    while m > 0:
        shuffle_prefix(work, m, rng_state)
        for c in range(k):
            out_pg[c, 0], out_pg[c, 1], out_pg[c, 2] = -np.inf, np.inf, 0.0
        for t in range(m):
            if t + _AHEAD_STATE < m:
                r = work[t + _AHEAD_STATE]
                _prefetch_state(indptr, ycls, out_alpha, r)
                prefetch(qd, r)
            if t + _AHEAD_ROW < m:
                _prefetch_row(indptr, indices, data, unit, work[t + _AHEAD_ROW])
            i = work[t]
            _visit(indptr, indices, data, unit, ycls, i, qd[i], pos, Cp, Cn, l2, B, out_W,
                   out_wb, out_alpha, out_active, out_margin, True, pgmax_old_inout,
                   pgmin_old_inout, out_pg, out_zu, out_zs, out_zs, False)
            since_cert += indptr[i + 1] - indptr[i] + 1
        epochs += 1
        visits += m
        spread = -np.inf
        for c in range(k):
            spread = max(spread, out_pg[c, 0] - out_pg[c, 1])
            if shrinking:
                pgmax_old_inout[c] = out_pg[c, 0] if out_pg[c, 0] > 0.0 else np.inf
                pgmin_old_inout[c] = out_pg[c, 1] if out_pg[c, 1] < 0.0 else -np.inf
        out_info[2] = spread
        # drop the rows shrunk for every model from the list (order is reshuffled anyway)
        kept = 0
        for t in range(m):
            i = work[t]
            for c in range(k):
                if out_active[i, c]:
                    work[kept] = i
                    kept += 1
                    break
        m = kept
        stop = spread <= eps_pg or visits >= max_visits or m == 0
        if stop or since_cert >= k * d:
            _slab_certificate(work, m, ycls, out_alpha, out_active, out_margin, pos, Cp, Cn,
                              l2, out_W, out_wb, out_zu, out_zs, work_terms, out_cert)
            since_cert = 0
            converged = True
            for c in range(k):
                if out_cert[c, 0] - out_cert[c, 1] > gap_stop * max(abs(out_cert[c, 0]), 1e-300):
                    converged = False
            if stop or (converged and visits >= gap_after):
                break
    if m == 0:
        out_info[3] = 1.0
        if epochs == 0:
            _slab_certificate(work, m, ycls, out_alpha, out_active, out_margin, pos, Cp, Cn,
                              l2, out_W, out_wb, out_zu, out_zs, work_terms, out_cert)
    out_info[0] = epochs
    out_info[1] = visits
    out_info[4] = m


@kernel_inline
def _slab_certificate(work, m, ycls, alpha, active, margin, pos, Cp, Cn, l2, W, wb, zu, zs,
                      terms, out_cert):
    """:func:`dcd_estimate` from the sums over the listed rows ``work[:m]``."""
    k = len(pos)
    for c in range(k):
        terms[c, 0] = 0.0
        terms[c, 1] = 0.0
        terms[c, 2] = 0.0
    for t in range(m):
        for c in range(k):
            _terms_row(ycls, alpha, active, margin, work[t], c, pos, Cp, Cn, l2, terms)
    for c in range(k):
        _estimate_one(c, W, wb, zu, zs, terms[c, 0], terms[c, 1], terms[c, 2], out_cert)


@kernel
def dcd_check(indptr, indices, data, unit, ycls, pos, Cp, Cn, l2, B, W, wb, alpha,
              out_active, out_zu, out_zs, out_terms, out_stats):
    """Exact optimality measures at fixed ``W``, and un-shrinking of the violators.

    Read-only on ``W`` and ``alpha``. A shrunk pair whose projected gradient at ``W`` is
    not zero (shrunk at 0 with margin < 1, or at ``U`` with margin > 1) is made active
    again; the others stay shrunk, and those at ``U`` are added to ``out_zu``/``out_zs``
    (zero them before the first block). LIBLINEAR re-activates every row instead; keeping
    the rows that satisfy their optimality condition saves the full sweep that follows.

    Parameters
    ----------
    indptr, indices, data : CSR arrays of one block
    unit : bool
        Every value is 1 (``data`` not read).
    ycls : ndarray of shape (n_rows,)
        Labels as in :func:`dcd_sweep`.
    pos, Cp, Cn, l2, B, W, wb : as in :func:`dcd_sweep`
    alpha : ndarray of shape (n_rows, k)
    out_active : ndarray of shape (n_rows, k), uint8
    out_zu, out_zs : as in :func:`dcd_sweep`
    out_terms : ndarray of shape (k, 3)
        Certificate terms of the pairs active after the check, with exact margins (added).
    out_stats : ndarray of shape (k, 4)
        Overwritten with ``[max PG, min PG, Σ C_i loss_i, pairs re-activated]`` over the
        block.
    """
    k = len(pos)
    for c in range(k):
        out_stats[c, 0] = -np.inf
        out_stats[c, 1] = np.inf
        out_stats[c, 2] = 0.0
        out_stats[c, 3] = 0.0
    for i in range(len(ycls)):
        for c in range(k):
            yi = 1.0 if ycls[i] == pos[c] else -1.0
            Ci = _cost(yi, c, Cp, Cn)
            U = np.inf if l2 else Ci
            m = yi * (_row_dot(indptr, indices, data, unit, i, W, c) + wb[c] * B)
            xi = max(0.0, 1.0 - m)
            loss = Ci * (xi * xi if l2 else xi)
            out_stats[c, 2] += loss
            a = alpha[i, c]
            G = m - 1.0 + (0.5 / Ci if l2 else 0.0) * a
            PG = G
            if a == 0.0:
                PG = min(G, 0.0)
            elif a == U:
                PG = max(G, 0.0)
            out_stats[c, 0] = max(out_stats[c, 0], PG)
            out_stats[c, 1] = min(out_stats[c, 1], PG)
            if out_active[i, c] == 0:
                if PG != 0.0:
                    out_active[i, c] = 1
                    out_stats[c, 3] += 1.0
                elif a == U:
                    _row_axpy(indptr, indices, data, unit, i, Ci * yi, out_zu, c)
                    out_zs[c, 0] += Ci * yi * B
                    out_zs[c, 1] += Ci
                    continue
                else:
                    continue
            _add_terms(out_terms, c, Ci, m, a, l2)


@kernel
def row_sq_norms_bias(indptr, data, unit, B, out):
    """``out[i] = ‖x_i‖² + B²``.

    Parameters
    ----------
    indptr : ndarray of shape (n_rows + 1,)
    data : ndarray of shape (nnz,)
        Not read when ``unit`` (every value is 1).
    unit : bool
    B : float
    out : ndarray of shape (n_rows,)
    """
    for i in range(len(indptr) - 1):
        if unit:
            out[i] = B * B + (indptr[i + 1] - indptr[i])
            continue
        s = B * B
        for p in range(indptr[i], indptr[i + 1]):
            v = np.float64(data[p])
            s += v * v
        out[i] = s
