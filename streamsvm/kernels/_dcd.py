"""Dual coordinate descent kernels (LIBLINEAR's ``solve_l2r_l1l2_svc``, spec_003 §1.4–1.8).

One call sweeps the rows of a group of resident blocks (the shuffle buffer: their rows
interleaved at random), runs epochs over the RAM slab, or checks optimality exactly, for all
one-vs-rest models at once (one read of a row serves every model). Built on the CSR
primitives of ``_csr.py`` (``W`` of shape (n_features, k), ``X = (indptr, indices, data)``,
``unit`` for stores whose values are all 1).

Argument groups (tuples, so that a kernel takes about ten arguments):

``model = (W, wb, zu, zs)``
    ``W`` (d, k) and ``wb`` (k,) the models (the bias is a regularized constant feature of
    value ``B`` kept as the scalar ``wb[c]``); ``zu`` (d, k) and ``zs`` (k, 2) the sums over
    the rows shrunk at the upper bound (below). One model (k = 1: a binary problem, or one
    class of :func:`dcd_classes_epochs`) passes ``W`` and ``zu`` as d-vectors, which the
    CSR primitives read without the (d, k) address arithmetic (``_csr.w_at``).
``prob = (pos, Cp, Cn, l2, B)``
    Model ``c`` takes row ``i`` as positive when ``y[i] == pos[c]`` (binary: ``y`` is ±1 and
    ``pos = [1]``); ``Cp``/``Cn`` the costs of its positive/negative rows; ``l2`` squared
    hinge (``U = inf``, ``D = 1/(2 C_i)``) or hinge (``U = C_i``, ``D = 0``); ``B`` the bias
    feature (0: none).
``shrink = (pgmax_old, pgmin_old)``
    LIBLINEAR 1.92's shrinking thresholds of the previous pass (spec §1.5).
``duals = (alpha, active)`` per block (``(alpha, active, margin)`` in the slab)
    Dual variables, active flags (uint8) and margins recorded at the last visit, (n, k).

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

from ._csr import row_axpy, row_dot, row_sq_norm, w_at
from ._jit import kernel, kernel_inline
from ._prefetch import prefetch, prefetch2
from ._rng import shuffle_prefix

__all__ = ["dcd_sweep", "dcd_slab_epochs", "dcd_classes_epochs", "dcd_check", "dcd_terms_add",
           "dcd_estimate"]

# Visits ahead at which the row's state and its CSR slice are prefetched.
_AHEAD_STATE = 12
_AHEAD_ROW = 6
# Slab entries up to which the slab's rows stay in the CPU caches between epochs, and
# prefetching them only costs instructions (vowel, 5,300 entries: 36 → 25 ns a visit).
_CACHED_ENTRIES = 100_000


@kernel_inline
def _prefetch_state(indptr, y, alpha, i):
    prefetch(indptr, i)
    prefetch(y, i)
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
def _prefetch_row(X, unit, i):
    """The whole CSR slice of row ``i`` (a row spans several cache lines; prefetching only
    the first one left the others to miss in a random visit order)."""
    p0 = X[0][i]
    p1 = X[0][i + 1]
    _prefetch_lines(X[1], p0, p1)
    if not unit:
        _prefetch_lines(X[2], p0, p1)


@kernel_inline
def _step(G, a, qd, U):
    """Projected Newton step of one coordinate; returns the new alpha."""
    if qd <= 0.0:                       # empty row, hinge, no bias: f is linear in alpha
        return U if G < 0 else 0.0
    return min(max(a - G / qd, 0.0), U)


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
def _shrunk_at_bound(X, unit, i, Ci, yi, B, model, c):
    """Row ``i`` leaves the active set at ``α = U = C_i``: its loss is now tracked
    linearly through ``zu``/``zs`` (module doc)."""
    row_axpy(X, unit, i, Ci * yi, model[2], c)
    model[3][c, 0] += Ci * yi * B
    model[3][c, 1] += Ci


@kernel_inline
def _visit(X, unit, y, i, qd_i, duals, margin, record, model, prob, shrink, out_pg,
           out_terms, add_terms):
    """One visit of row ``i``: a coordinate step for every model still active on it.

    ``qd_i``: ``‖x_i‖² + B²``, or a negative value to have it computed from the row only
    when a step is taken (a streamed sweep, where most early visits take none).
    ``record``: store the visit-time margin in ``margin``; ``add_terms``: add the
    certificate terms of the pairs still active after the visit to ``out_terms`` (as
    :func:`dcd_terms_add`, with the visit-time margin).
    """
    alpha, active = duals
    W, wb = model[0], model[1]
    pos, Cp, Cn, l2, B = prob
    pgmax_old, pgmin_old = shrink
    steps = 0
    for c in range(len(pos)):
        if active[i, c] == 0:
            continue
        steps += 1
        yi = 1.0 if y[i] == pos[c] else -1.0
        Ci = Cp[c] if yi > 0 else Cn[c]
        U = np.inf if l2 else Ci
        D = 0.5 / Ci if l2 else 0.0
        m = yi * (row_dot(X, unit, i, W, c) + wb[c] * B)
        if record:
            margin[i, c] = m
        a = alpha[i, c]
        G = m - 1.0 + D * a
        PG = 0.0
        if a == 0.0:
            if G > pgmax_old[c]:            # shrink (spec_003 §1.5)
                active[i, c] = 0
                out_pg[c, 2] += 1
                continue
            if G < 0.0:
                PG = G
        elif a == U:
            if G < pgmin_old[c]:
                active[i, c] = 0
                out_pg[c, 2] += 1
                _shrunk_at_bound(X, unit, i, Ci, yi, B, model, c)
                continue
            if G > 0.0:
                PG = G
        else:
            PG = G
        out_pg[c, 0] = max(out_pg[c, 0], PG)
        out_pg[c, 1] = min(out_pg[c, 1], PG)
        if abs(PG) > 1e-12:
            if qd_i < 0.0:              # computed on the first step the visit takes
                qd_i = row_sq_norm(X, unit, i, B * B)
            a_new = _step(G, a, qd_i + D, U)
            alpha[i, c] = a_new
            d = (a_new - a) * yi
            row_axpy(X, unit, i, d, W, c)
            wb[c] += d * B
            a = a_new
        if add_terms:
            _add_terms(out_terms, c, Ci, m, a, l2)
    return steps


@kernel
def dcd_sweep(Xs, ys, duals, n_slots, unit, model, prob, shrink, out_stats, rng_state, work):
    """Dual CD steps over the active rows of a group of resident blocks (the shuffle
    buffer), visited in one random order that interleaves the blocks.

    Parameters
    ----------
    Xs, ys, duals : tuples of G
        The blocks' CSR tuples, labels (float32 ±1 or int32 class ids) and ``(alpha,
        active)`` views, one per slot; only the first ``n_slots`` are used.
    n_slots : int
        Slots holding a block (``1 ≤ n_slots ≤ G``).
    unit : bool
        Every value is 1 (``data`` not read).
    model, prob, shrink : see the module doc
        ``model`` is updated in place.
    out_stats : tuple (pg, terms)
        ``pg`` (k, 3): running ``[max PG, min PG, rows shrunk]``; ``terms`` (k, 3):
        certificate terms of the visited pairs left active (:func:`dcd_terms_add`), added.
    rng_state : ndarray of shape (1,), uint64
        SplitMix64 state of the visit order (``kernels._rng``); advanced.
    work : ndarray of int64, at least the rows of the used slots
        Scratch for the visit order (``G * row + slot``).

    Returns
    -------
    int
        Number of coordinate steps made.
    """
    G = len(Xs)
    k = len(prob[0])
    pg, terms = out_stats
    n = 0
    for s in range(n_slots):
        act = duals[s][1]
        for i in range(act.shape[0]):
            for c in range(k):
                if act[i, c]:
                    work[n] = G * i + s
                    n += 1
                    break
    shuffle_prefix(work, n, rng_state)
    steps = 0
    for j in range(n):
        if j + _AHEAD_STATE < n:
            v = work[j + _AHEAD_STATE]
            s2 = v % G
            _prefetch_state(Xs[s2][0], ys[s2], duals[s2][0], v // G)
        if j + _AHEAD_ROW < n:
            v = work[j + _AHEAD_ROW]
            s2 = v % G
            _prefetch_row(Xs[s2], unit, v // G)
        s = work[j] % G
        i = work[j] // G
        steps += _visit(Xs[s], unit, ys[s], i, -1.0, duals[s], duals[s][0], False, model,
                        prob, shrink, pg, terms, True)
    return steps


@kernel_inline
def _estimate_one(c, model, loss, sum_a, half_da2, out_cert):
    """``out_cert[c] = [primal, dual]`` estimates from the sums over the active rows."""
    W, wb, zu, zs = model
    reg = wb[c] * wb[c]
    lin = wb[c] * zs[c, 0]
    for j in range(W.shape[0]):
        w = w_at(W, j, c)
        reg += w * w
        lin += w * w_at(zu, j, c)
    reg *= 0.5
    out_cert[c, 0] = reg + loss + zs[c, 1] - lin
    out_cert[c, 1] = -(reg + half_da2 - sum_a - zs[c, 1])


@kernel
def dcd_estimate(model, terms, out_cert):
    """Primal and dual estimates per model from :func:`dcd_terms_add` sums.

    Parameters
    ----------
    model : see the module doc
    terms : ndarray of shape (k, 3)
        Sums over the active rows: ``[Σ C_i ξ(m_i), Σ α_i, ½ Σ D_i α_i²]``.
    out_cert : ndarray of shape (k, 2)
        ``[primal, dual]`` per model. The dual is exact; the primal uses the recorded
        margins of active rows.
    """
    for c in range(len(model[1])):
        _estimate_one(c, model, terms[c, 0], terms[c, 1], terms[c, 2], out_cert)


@kernel_inline
def _terms_row(y, duals, i, c, prob, out):
    alpha, active, margin = duals
    pos, Cp, Cn, l2, B = prob
    if active[i, c] != 0:
        _add_terms(out, c, Cp[c] if y[i] == pos[c] else Cn[c], margin[i, c], alpha[i, c], l2)


@kernel
def dcd_terms_add(y, duals, prob, out):
    """Add the per-model sums behind the certificate over the active (row, model) pairs.

    Parameters
    ----------
    y : ndarray of shape (n_rows,)
    duals : tuple (alpha, active, margin) of arrays of shape (n_rows, k)
    prob : see the module doc
    out : ndarray of shape (k, 3)
        ``out[c] += [Σ C_i ξ(margin_ic), Σ α_ic, ½ Σ D_ic α_ic²]`` over active pairs (D =
        1/(2C_i) for the squared hinge, 0 for the hinge). Shrunk pairs are accounted by
        ``zu``/``zs`` (module doc).
    """
    for i in range(len(y)):
        for c in range(len(prob[0])):
            _terms_row(y, duals, i, c, prob, out)


@kernel
def dcd_slab_epochs(X, unit, y, qd, duals, model, prob, shrink, control, rng_state, work,
                    out):
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
    X, unit, y : the slab's rows
    qd : ndarray of shape (n_rows,)
        ``‖x_i‖² + B²``.
    duals : tuple (alpha, active, margin)
    model, prob : see the module doc
    shrink : tuple (pgmax_old, pgmin_old)
        Updated after every epoch.
    control : tuple (shrinking, max_visits, eps_pg, gap_stop, gap_after)
    rng_state : ndarray of shape (1,), uint64
    work : tuple (rows, terms)
        Scratch: ``rows`` of shape (n_rows,), int64, for the list of active rows;
        ``terms`` of shape (k, 3) for the certificate sums.
    out : tuple (pg, cert, info)
        ``pg`` (k, 3): ``[max PG, min PG, rows shrunk]`` of the last epoch; ``cert``
        (k, 2): ``[primal, dual]`` estimates after the last epoch; ``info`` (5,):
        ``[epochs, visits, PG spread of the last epoch, 1 if no row was active, active
        rows]``.
    """
    pos = prob[0]
    shrinking, max_visits, eps_pg, gap_stop, gap_after = control
    pgmax_old, pgmin_old = shrink
    rows, work_terms = work
    out_pg, out_cert, out_info = out
    alpha, active, margin = duals
    k = len(pos)
    d = model[0].shape[0]
    m = 0
    for i in range(len(y)):
        for c in range(k):
            if active[i, c]:
                rows[m] = i
                m += 1
                break
    epochs = 0
    visits = 0
    since_cert = 0
    out_info[3] = 0.0
    far = len(X[1]) > _CACHED_ENTRIES          # prefetching pays only beyond the caches
    while m > 0:
        shuffle_prefix(rows, m, rng_state)
        for c in range(k):
            out_pg[c, 0], out_pg[c, 1], out_pg[c, 2] = -np.inf, np.inf, 0.0
        for t in range(m):
            if far and t + _AHEAD_STATE < m:
                r = rows[t + _AHEAD_STATE]
                _prefetch_state(X[0], y, alpha, r)
                prefetch(qd, r)
            if far and t + _AHEAD_ROW < m:
                _prefetch_row(X, unit, rows[t + _AHEAD_ROW])
            i = rows[t]
            _visit(X, unit, y, i, qd[i], (alpha, active), margin, True, model, prob, shrink,
                   out_pg, work_terms, False)
            since_cert += X[0][i + 1] - X[0][i] + 1
        epochs += 1
        visits += m
        spread = -np.inf
        for c in range(k):
            spread = max(spread, out_pg[c, 0] - out_pg[c, 1])
            if shrinking:
                pgmax_old[c] = out_pg[c, 0] if out_pg[c, 0] > 0.0 else np.inf
                pgmin_old[c] = out_pg[c, 1] if out_pg[c, 1] < 0.0 else -np.inf
        out_info[2] = spread
        # drop the rows shrunk for every model from the list (order is reshuffled anyway)
        kept = 0
        for t in range(m):
            i = rows[t]
            for c in range(k):
                if active[i, c]:
                    rows[kept] = i
                    kept += 1
                    break
        m = kept
        stop = spread <= eps_pg or visits >= max_visits or m == 0
        if stop or since_cert >= k * d:
            _slab_certificate(rows, m, y, duals, prob, model, work_terms, out_cert)
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
            _slab_certificate(rows, m, y, duals, prob, model, work_terms, out_cert)
    out_info[0] = epochs
    out_info[1] = visits
    out_info[4] = m


@kernel
def dcd_classes_epochs(X, unit, y, qd, duals, model, prob, shrink, control, rng_state, work,
                       out):
    """:func:`dcd_slab_epochs` one model at a time, for each listed class in turn, on
    class-major arrays, each class checked exactly when its own test fires (one-vs-rest in
    RAM, class by class: ``solvers/_dcd_ram.py``).

    Class ``c`` works on row ``c`` of each class-major array, a contiguous vector viewed as
    the one-column arrays :func:`dcd_slab_epochs` takes, with its own thresholds, ε, visit
    limit and random stream. When its epochs stop on LIBLINEAR's test (PG spread ≤ ε) or
    on its estimated gap (≤ ``tol``, once ``due`` visits passed since its last check), the
    class is checked exactly at once (:func:`dcd_check` on its column, one read of the
    rows): at an exact gap ≤ ``tol`` it is done, else ε is divided by 10 (LIBLINEAR's test
    fired too early) or its checks are spaced wider (``base · 2^misses`` visits, misses up
    to 2: the estimate was optimistic) and its epochs go on, until ``max_visits``. So a
    class never waits for the others, and one call can take it to its certificate.

    Parameters
    ----------
    X, unit, y, qd : as :func:`dcd_slab_epochs`
    duals : tuple (alpha, active, margin) of shape (k, n_rows)
    model : tuple (W, wb, zu, zs)
        ``W`` and ``zu`` of shape (k, n_features) (row ``c``: model ``c``), ``wb`` (k,),
        ``zs`` (k, 2); updated in place.
    prob : see the module doc (all k models)
    shrink : tuple (pgmax_old, pgmin_old) of shape (k,)
    control : tuple (classes, shrinking, max_visits, tol, base, eps_pg, plan, checks)
        ``classes`` (m,) int64 the classes to run, in order; ``max_visits`` (k,) int64;
        ``base`` the spacing of checks after a miss; updated per class: ``eps_pg`` (k,)
        and ``plan`` (k, 3) int64 ``[visits since its last check, visits due before an
        estimate-driven check, misses]``. ``checks`` False: no exact check, each class
        stops where :func:`dcd_slab_epochs` does (``info[c, :5]`` as it writes them;
        newton's polish).
    rng_state : ndarray of shape (k,), uint64
        One SplitMix64 state per class; advanced.
    work : tuple (rows, terms, stats, one)
        Scratch: ``rows`` (n_rows,) int64, ``terms`` (1, 3), ``stats`` (1, 4), ``one``
        (5,).
    out : tuple (pg, cert, info)
        ``pg`` (k, 3), ``cert`` (k, 2), ``info`` (k, 6): row ``c`` as
        :func:`dcd_slab_epochs` writes them for class ``c`` (``cert`` exact after a
        check), except ``info[c, 3]``: the exact checks made; ``info[c, 5]`` 1 when the
        class was certified (exact gap ≤ ``tol``); rows of other classes are left as they
        were. ``info[c, 1]`` counts the checks' reads as visits.
    """
    classes, shrinking, max_visits, tol, base, eps_pg, plan, checks = control
    alpha, active, margin = duals
    W, wb, zu, zs = model
    pos, Cp, Cn, l2, B = prob
    n = alpha.shape[1]
    d = W.shape[1]
    out_pg, out_cert, out_info = out
    rows, terms, stats, one = work
    for c in classes:
        e = c + 1
        cduals = (alpha[c].reshape((n, 1)), active[c].reshape((n, 1)),
                  margin[c].reshape((n, 1)))
        cmodel = (W[c], wb[c:e], zu[c], zs[c:e])
        cprob = (pos[c:e], Cp[c:e], Cn[c:e], l2, B)
        cshrink = (shrink[0][c:e], shrink[1][c:e])
        cert = out_cert[c:e]
        if not checks:
            dcd_slab_epochs(X, unit, y, qd, cduals, cmodel, cprob, cshrink,
                            (shrinking, max_visits[c], eps_pg[c], tol, plan[c, 1] - plan[c, 0]),
                            rng_state[c:e], (rows, terms), (out_pg[c:e], cert, one))
            for j in range(5):
                out_info[c, j] = one[j]
            out_info[c, 5] = 0.0
            continue
        epochs = 0
        visits = 0
        nchecks = 0
        spread = -np.inf
        done = 0.0
        while visits < max_visits[c]:
            dcd_slab_epochs(X, unit, y, qd, cduals, cmodel, cprob, cshrink,
                            (shrinking, max_visits[c] - visits, eps_pg[c], tol,
                             plan[c, 1] - plan[c, 0]),
                            rng_state[c:e], (rows, terms), (out_pg[c:e], cert, one))
            epochs += int(one[0])
            visits += int(one[1])
            plan[c, 0] += int(one[1])
            spread = one[2] if one[0] > 0 else -np.inf
            if one[3] != 0.0:        # every row shrunk: un-shrink (LIBLINEAR does the same)
                active[c, :] = 1
                shrink[0][c], shrink[1][c] = np.inf, -np.inf
                _clear_shrunk_sums(cmodel)
                continue
            by_gap = (cert[0, 0] - cert[0, 1] <= tol * max(abs(cert[0, 0]), 1e-300)
                      and plan[c, 0] >= plan[c, 1])
            by_pg = one[0] > 0 and spread <= eps_pg[c]
            if not (by_gap or by_pg):
                break                                   # its visits are used up
            _check_one(X, unit, y, cduals, cmodel, cprob, (terms, stats), cert)
            visits += n
            nchecks += 1
            plan[c, 0] = 0
            if cert[0, 0] - cert[0, 1] <= tol * max(abs(cert[0, 0]), 1e-300):
                done = 1.0
                break
            if by_pg:
                eps_pg[c] = max(eps_pg[c] * 0.1, 1e-12)
            if by_gap:
                plan[c, 2] = min(plan[c, 2] + 1, 2)
            plan[c, 1] = base * 2 ** plan[c, 2]
        m = 0
        for i in range(n):
            m += active[c, i]
        out_info[c, 0], out_info[c, 1], out_info[c, 2] = epochs, visits, spread
        out_info[c, 3], out_info[c, 4], out_info[c, 5] = nchecks, m, done


@kernel_inline
def _clear_shrunk_sums(model):
    """``zu = 0``, ``zs = 0`` of one model (before they are summed again)."""
    zu, zs = model[2], model[3]
    for j in range(zu.shape[0]):
        zu[j] = 0.0
    zs[0, 0], zs[0, 1] = 0.0, 0.0


@kernel_inline
def _check_one(X, unit, y, duals, model, prob, scratch, out_cert):
    """The exact check (:func:`dcd_check`) of one model given as d-vectors: its shrunk
    violators re-activated, ``out_cert[0] = [primal, dual]`` exact at its current ``W``."""
    terms, stats = scratch
    _clear_shrunk_sums(model)
    terms[0, 0], terms[0, 1], terms[0, 2] = 0.0, 0.0, 0.0
    stats[0, 0], stats[0, 1], stats[0, 2], stats[0, 3] = -np.inf, np.inf, 0.0, 0.0
    dcd_check(X, unit, y, duals[:2], model, prob, (terms, stats))
    _estimate_one(0, model, terms[0, 0], terms[0, 1], terms[0, 2], out_cert)
    W, wb = model[0], model[1]
    reg = wb[0] * wb[0]
    for j in range(W.shape[0]):
        reg += W[j] * W[j]
    out_cert[0, 0] = 0.5 * reg + stats[0, 2]


@kernel_inline
def _slab_certificate(rows, m, y, duals, prob, model, terms, out_cert):
    """:func:`dcd_estimate` from the sums over the listed rows ``rows[:m]``."""
    k = len(prob[0])
    for c in range(k):
        terms[c, 0] = 0.0
        terms[c, 1] = 0.0
        terms[c, 2] = 0.0
    for t in range(m):
        for c in range(k):
            _terms_row(y, duals, rows[t], c, prob, terms)
    for c in range(k):
        _estimate_one(c, model, terms[c, 0], terms[c, 1], terms[c, 2], out_cert)


@kernel
def dcd_check(X, unit, y, duals, model, prob, acc):
    """Exact optimality measures at fixed ``W``, and un-shrinking of the violators.

    Read-only on ``W``, ``wb`` and ``alpha``. A shrunk pair whose projected gradient at
    ``W`` is not zero (shrunk at 0 with margin < 1, or at ``U`` with margin > 1) is made
    active again; the others stay shrunk, and those at ``U`` are added to ``zu``/``zs``.
    LIBLINEAR re-activates every row instead; keeping the rows that satisfy their
    optimality condition saves the full sweep that follows.

    Parameters
    ----------
    X, unit, y : one block
    duals : tuple (alpha, active)
        ``active`` is updated.
    model, prob : see the module doc
        ``model``'s ``zu`` and ``zs`` accumulate (zero them before the first block).
    acc : tuple (terms, stats)
        Accumulated over blocks: ``terms`` (k, 3) the certificate terms of the pairs
        active after the check, with exact margins; ``stats`` (k, 4) ``[max PG, min PG,
        Σ C_i loss_i, pairs re-activated]`` (start from ``[-inf, inf, 0, 0]``).
    """
    alpha, active = duals
    W, wb = model[0], model[1]
    pos, Cp, Cn, l2, B = prob
    out_terms, stats = acc
    k = len(pos)
    for i in range(len(y)):
        for c in range(k):
            yi = 1.0 if y[i] == pos[c] else -1.0
            Ci = Cp[c] if yi > 0 else Cn[c]
            U = np.inf if l2 else Ci
            m = yi * (row_dot(X, unit, i, W, c) + wb[c] * B)
            xi = max(0.0, 1.0 - m)
            stats[c, 2] += Ci * (xi * xi if l2 else xi)
            a = alpha[i, c]
            G = m - 1.0 + (0.5 / Ci if l2 else 0.0) * a
            PG = G
            if a == 0.0:
                PG = min(G, 0.0)
            elif a == U:
                PG = max(G, 0.0)
            stats[c, 0] = max(stats[c, 0], PG)
            stats[c, 1] = min(stats[c, 1], PG)
            if active[i, c] == 0:
                if PG != 0.0:
                    active[i, c] = 1
                    stats[c, 3] += 1.0
                elif a == U:
                    _shrunk_at_bound(X, unit, i, Ci, yi, B, model, c)
                    continue
                else:
                    continue
            _add_terms(out_terms, c, Ci, m, a, l2)
