"""Dual coordinate descent kernels (LIBLINEAR's ``solve_l2r_l1l2_svc``, spec_003 §1.4–1.8).

One call sweeps the rows of a group of resident blocks (the shuffle buffer: their rows
interleaved at random), runs epochs over the RAM slab, or checks optimality exactly, for all
one-vs-rest models at once (one read of a row serves every model). Built on the CSR
primitives of ``_csr.py`` (``X = (indptr, indices, data)``, ``unit`` for stores whose values
are all 1).

Argument groups (tuples, so that a kernel takes about ten arguments):

``model = (W, zu, zs)``
    ``W`` (d + 1, k) the models, the bias (a regularized constant feature of value ``B``)
    weighted by the last row (``_csr.bias_at``); ``zu`` (d, k) and ``zs`` (k, 2) the sums over the rows shrunk at
    the upper bound (``_dcd_cert.py``). One model (k = 1: a binary problem, or one class
    of :func:`dcd_classes_epochs`) passes ``W`` and ``zu`` as vectors, read without the
    (d, k) address arithmetic (``_csr.w_at``).
``prob``
    The problem's costs, :class:`~streamsvm.kernels.Costs` ``(pos, Cp, Cn, squared, B)``
    (``_costs.py``): squared hinge ``U = inf``, ``D = 1/(2 C_i)``; hinge ``U = C_i``, ``D = 0``.
``shrink = (pgmax_old, pgmin_old)``
    LIBLINEAR 1.92's shrinking thresholds of the previous pass (spec §1.5).
``duals = (alpha, active)`` per block (``(alpha, active, margin)`` in the slab)
    Dual variables, active flags (uint8) and margins recorded at the last visit, (n, k).

The certificate (each pair's terms, their sums' estimates, the exact check) is in
``_dcd_cert.py``, whence :func:`dcd_check`, :func:`dcd_estimate` and :func:`dcd_terms_add`.
"""

from __future__ import annotations

import numpy as np

from ._costs import class_costs
from ._csr import bias_add, row_axpy, row_sq_norm
from ._dcd_cert import (add_terms, check_one, clear_shrunk_sums, dcd_check, dcd_estimate,
                        dcd_terms_add, estimate_listed, gap_met, pair, row_margin,
                        shrunk_at_bound)
from ._jit import kernel, kernel_inline
from ._prefetch import prefetch, prefetch2, prefetch_row
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
    """What a visit of row ``i`` reads first: its ``indptr`` entry, label and duals."""
    prefetch(indptr, i)
    prefetch(y, i)
    prefetch2(alpha, i, 0)


@kernel_inline
def _step(G, a, qd, U):
    """Projected Newton step of one coordinate; returns the new alpha."""
    if qd <= 0.0:                       # empty row, hinge, no bias: f is linear in alpha
        return U if G < 0 else 0.0
    return min(max(a - G / qd, 0.0), U)


@kernel_inline
def _shrinks(G, a, U, shrink, c):
    """LIBLINEAR's shrinking test (spec_003 §1.5): the pair sits at a bound and its gradient
    points out of the box beyond the previous pass's threshold ``shrink`` of model ``c``."""
    if a == 0.0:
        return G > shrink[0][c]
    if a == U:
        return G < shrink[1][c]
    return False


@kernel_inline
def _projected(G, a, U):
    """The projected gradient of a pair that was not shrunk: 0 where its bound stops it."""
    if a == 0.0:
        return G if G < 0.0 else 0.0
    if a == U:
        return G if G > 0.0 else 0.0
    return G


@kernel_inline
def _move(X, unit, i, c, yi, a, a_new, alpha, model, B):
    """``α_ic ← a_new`` and ``w̄_c += (a_new − a) y_i x̄_i``; returns ``a_new``."""
    alpha[i, c] = a_new
    d = (a_new - a) * yi
    row_axpy(X, unit, i, d, model[0], c)
    bias_add(model[0], c, d * B)
    return a_new


@kernel_inline
def _visit(X, unit, y, i, qd_i, duals, margin, record, model, prob, shrink, out_pg,
           out_terms, sum_terms):
    """One visit of row ``i``: a coordinate step for every model still active on it.

    ``qd_i``: ``‖x_i‖² + B²``, or a negative value to have it computed from the row only
    when a step is taken (a streamed sweep, where most early visits take none).
    ``record``: store the visit-time margin in ``margin``; ``sum_terms``: add the certificate
    terms of the pairs still active after the visit to ``out_terms`` (as
    :func:`dcd_terms_add`, with the visit-time margin).
    """
    alpha, active = duals
    l2, B = prob.squared, prob.B
    steps = 0
    for c in range(len(prob.pos)):
        if active[i, c] == 0:
            continue
        steps += 1
        yi, Ci, U, D = pair(y, i, c, prob)
        m = row_margin(X, unit, i, c, yi, model, B)
        if record:
            margin[i, c] = m
        a = alpha[i, c]
        G = m - 1.0 + D * a
        if _shrinks(G, a, U, shrink, c):
            active[i, c] = 0
            out_pg[c, 2] += 1
            if a != 0.0:                # at U = C_i: its loss now linear in w (zu, zs)
                shrunk_at_bound(X, unit, i, Ci, yi, B, model, c)
            continue
        PG = _projected(G, a, U)
        out_pg[c, 0] = max(out_pg[c, 0], PG)
        out_pg[c, 1] = min(out_pg[c, 1], PG)
        if abs(PG) > 1e-12:
            if qd_i < 0.0:              # computed on the first step the visit takes
                qd_i = row_sq_norm(X, unit, i, B * B)
            a = _move(X, unit, i, c, yi, a, _step(G, a, qd_i + D, U), alpha, model, B)
        if sum_terms:
            add_terms(out_terms, c, Ci, m, a, l2)
    return steps


@kernel_inline
def _any_active(active, i):
    """Whether some model is still active on row ``i``."""
    for c in range(active.shape[1]):
        if active[i, c]:
            return True
    return False


@kernel_inline
def _list_slots(duals, n_slots, work):
    """The active rows of the first ``n_slots`` blocks as ``G · row + slot`` in ``work``
    (``G`` slots); returns their number."""
    G = len(duals)
    n = 0
    for s in range(n_slots):
        act = duals[s][1]
        for i in range(act.shape[0]):
            if _any_active(act, i):
                work[n] = G * i + s
                n += 1
    return n


@kernel_inline
def _prefetch_slots(Xs, ys, duals, unit, work, j, n):
    """Prefetch ahead of visit ``j`` of ``work[:n]`` (``G · row + slot``): the state of the
    row ``_AHEAD_STATE`` visits on, the CSR slice of the one ``_AHEAD_ROW`` on."""
    G = len(Xs)
    if j + _AHEAD_STATE < n:
        v = work[j + _AHEAD_STATE]
        s = v % G
        _prefetch_state(Xs[s][0], ys[s], duals[s][0], v // G)
    if j + _AHEAD_ROW < n:
        v = work[j + _AHEAD_ROW]
        prefetch_row(Xs[v % G], unit, v // G)


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
    pg, terms = out_stats
    n = _list_slots(duals, n_slots, work)
    shuffle_prefix(work, n, rng_state)
    steps = 0
    for j in range(n):
        _prefetch_slots(Xs, ys, duals, unit, work, j, n)
        s = work[j] % G
        i = work[j] // G
        steps += _visit(Xs[s], unit, ys[s], i, -1.0, duals[s], duals[s][0], False, model,
                        prob, shrink, pg, terms, True)
    return steps


@kernel_inline
def _list_rows(active, rows):
    """The rows on which some model is active, in ``rows``; returns their number."""
    m = 0
    for i in range(active.shape[0]):
        if _any_active(active, i):
            rows[m] = i
            m += 1
    return m


@kernel_inline
def _keep_rows(active, rows, m):
    """``rows[:m]`` less the rows shrunk for every model (LIBLINEAR's ``active_size``; the
    order is reshuffled anyway); returns how many are kept."""
    kept = 0
    for t in range(m):
        i = rows[t]
        if _any_active(active, i):
            rows[kept] = i
            kept += 1
    return kept


@kernel_inline
def _prefetch_listed(X, unit, y, alpha, qd, rows, t, m):
    """Prefetch ahead of visit ``t`` of ``rows[:m]``: the state of the row
    ``_AHEAD_STATE`` visits on, the CSR slice of the one ``_AHEAD_ROW`` on."""
    if t + _AHEAD_STATE < m:
        r = rows[t + _AHEAD_STATE]
        _prefetch_state(X[0], y, alpha, r)
        prefetch(qd, r)
    if t + _AHEAD_ROW < m:
        prefetch_row(X, unit, rows[t + _AHEAD_ROW])


@kernel_inline
def _slab_epoch(X, unit, y, qd, duals, model, prob, shrink, rows, m, out_pg, terms):
    """One epoch over ``rows[:m]`` in their order, its ``[max PG, min PG, rows shrunk]`` in
    ``out_pg``; returns the entries it touched (each row's nonzeros and its bias)."""
    alpha, active, margin = duals
    far = len(X[1]) > _CACHED_ENTRIES          # prefetching pays only beyond the caches
    for c in range(len(prob.pos)):
        out_pg[c, 0], out_pg[c, 1], out_pg[c, 2] = -np.inf, np.inf, 0.0
    touched = 0
    for t in range(m):
        if far:
            _prefetch_listed(X, unit, y, alpha, qd, rows, t, m)
        i = rows[t]
        _visit(X, unit, y, i, qd[i], (alpha, active), margin, True, model, prob, shrink,
               out_pg, terms, False)
        touched += X[0][i + 1] - X[0][i] + 1
    return touched


@kernel_inline
def _end_epoch(out_pg, shrink, shrinking):
    """The epoch's projected-gradient spread (the largest over models); with
    ``shrinking``, the thresholds of the next epoch from this one's (spec_003 §1.5)."""
    spread = -np.inf
    for c in range(out_pg.shape[0]):
        spread = max(spread, out_pg[c, 0] - out_pg[c, 1])
        if shrinking:
            shrink[0][c] = out_pg[c, 0] if out_pg[c, 0] > 0.0 else np.inf
            shrink[1][c] = out_pg[c, 1] if out_pg[c, 1] < 0.0 else -np.inf
    return spread


@kernel_inline
def _gaps_met(cert, tol):
    """Whether every model's estimated relative gap is at most ``tol``."""
    for c in range(cert.shape[0]):
        if not gap_met(cert, c, tol):
            return False
    return True


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
    shrinking, max_visits, eps_pg, gap_stop, gap_after = control
    rows, terms = work
    out_pg, out_cert, out_info = out
    active = duals[1]
    m = _list_rows(active, rows)
    due = len(prob.pos) * (model[0].shape[0] - 1)    # entries between two estimates: k · d
    epochs, visits, since_cert = 0, 0, 0
    out_info[3] = 0.0
    while m > 0:
        shuffle_prefix(rows, m, rng_state)
        since_cert += _slab_epoch(X, unit, y, qd, duals, model, prob, shrink, rows, m,
                                  out_pg, terms)
        epochs += 1
        visits += m
        spread = _end_epoch(out_pg, shrink, shrinking)
        out_info[2] = spread
        m = _keep_rows(active, rows, m)
        stop = spread <= eps_pg or visits >= max_visits or m == 0
        if stop or since_cert >= due:
            estimate_listed(rows, m, y, duals, prob, model, terms, out_cert)
            since_cert = 0
            if stop or (_gaps_met(out_cert, gap_stop) and visits >= gap_after):
                break
    if m == 0:
        out_info[3] = 1.0
        if epochs == 0:
            estimate_listed(rows, m, y, duals, prob, model, terms, out_cert)
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
    model : tuple (W, zu, zs)
        ``W`` of shape (k, n_features + 1) and ``zu`` of shape (k, n_features) (row ``c``:
        model ``c``, its bias weight last), ``zs`` (k, 2); updated in place.
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
    classes, _, max_visits, _, _, _, _, checks = control
    for c in classes:
        if checks:
            _checked_class(c, X, unit, y, qd, duals, model, prob, shrink, control, rng_state,
                           work, out)
        else:
            _class_epochs(c, X, unit, y, qd, duals, model, prob, shrink, control, max_visits[c],
                          rng_state, work, out)
            for j in range(5):
                out[2][c, j] = work[3][j]
            out[2][c, 5] = 0.0


@kernel_inline
def _class_views(c, duals, model, prob, shrink):
    """Class ``c``'s rows of the class-major arrays as the one-model ``(duals, model, prob,
    shrink)`` that :func:`dcd_slab_epochs` takes."""
    n = duals[0].shape[1]
    e = c + 1
    return ((duals[0][c].reshape((n, 1)), duals[1][c].reshape((n, 1)),
             duals[2][c].reshape((n, 1))),
            (model[0][c], model[1][c], model[2][c:e]),
            class_costs(prob, c),
            (shrink[0][c:e], shrink[1][c:e]))


@kernel_inline
def _class_epochs(c, X, unit, y, qd, duals, model, prob, shrink, control, limit, rng_state,
                  work, out):
    """:func:`dcd_slab_epochs` of class ``c`` for at most ``limit`` visits: its ``pg`` and
    ``cert`` in row ``c`` of ``out``'s, its ``info`` in ``work[3]``."""
    _, shrinking, _, tol, _, eps_pg, plan, _ = control
    cduals, cmodel, cprob, cshrink = _class_views(c, duals, model, prob, shrink)
    e = c + 1
    dcd_slab_epochs(X, unit, y, qd, cduals, cmodel, cprob, cshrink,
                    (shrinking, limit, eps_pg[c], tol, plan[c, 1] - plan[c, 0]),
                    rng_state[c:e], (work[0], work[1]), (out[0][c:e], out[1][c:e], work[3]))


@kernel_inline
def _unshrink_class(c, active, shrink, model):
    """Every row of class ``c`` active again, its thresholds and shrunk sums reset
    (LIBLINEAR un-shrinks too when every row is shrunk)."""
    active[c, :] = 1
    shrink[0][c], shrink[1][c] = np.inf, -np.inf
    clear_shrunk_sums(model)


@kernel_inline
def _checked_class(c, X, unit, y, qd, duals, model, prob, shrink, control, rng_state, work,
                   out):
    """Class ``c``'s epochs until its exact check certifies it or its visits are used up
    (:func:`dcd_classes_epochs`); its ``info`` in ``out[2][c]``."""
    _, _, max_visits, tol, base, eps_pg, plan, _ = control
    cduals, cmodel, cprob, _ = _class_views(c, duals, model, prob, shrink)
    cert, one = out[1][c:c + 1], work[3]
    n = duals[0].shape[1]
    epochs, visits, nchecks, spread, done = 0, 0, 0, -np.inf, 0.0
    while visits < max_visits[c]:
        _class_epochs(c, X, unit, y, qd, duals, model, prob, shrink, control,
                      max_visits[c] - visits, rng_state, work, out)
        epochs += int(one[0])
        visits += int(one[1])
        plan[c, 0] += int(one[1])
        spread = one[2] if one[0] > 0 else -np.inf
        if one[3] != 0.0:                               # every row shrunk
            _unshrink_class(c, duals[1], shrink, cmodel)
            continue
        by_gap = gap_met(cert, 0, tol) and plan[c, 0] >= plan[c, 1]
        by_pg = one[0] > 0 and spread <= eps_pg[c]
        if not (by_gap or by_pg):
            break                                       # its visits are used up
        check_one(X, unit, y, cduals, cmodel, cprob, (work[1], work[2]), cert)
        visits += n
        nchecks += 1
        plan[c, 0] = 0
        if gap_met(cert, 0, tol):
            done = 1.0
            break
        if by_pg:                                       # LIBLINEAR's test fired too early
            eps_pg[c] = max(eps_pg[c] * 0.1, 1e-12)
        if by_gap:                                      # the estimate was optimistic
            plan[c, 2] = min(plan[c, 2] + 1, 2)
        plan[c, 1] = base * 2 ** plan[c, 2]
    m = 0
    for i in range(n):
        m += duals[1][c, i]
    out[2][c, 0], out[2][c, 1], out[2][c, 2] = epochs, visits, spread
    out[2][c, 3], out[2][c, 4], out[2][c, 5] = nchecks, m, done
