"""Kernels of the distributed dual loop (``solvers/_cocoa.py``): each worker's dual
coordinate descent epoch over its active rows against its copy of ``w``, and the settling
of the client's last steps into its duals.

Rows are augmented with the bias feature ``x̄_i = (x_i, B)``; ``W`` is (n_features + 1, k),
the bias weight last. For model ``c`` (``y_ic = ±1``, cost ``C_ic``) the dual is
``max_α D(α) = Σ α − ½‖Σ α y x̄‖² − ½ Σ D_i α²`` with ``0 ≤ α ≤ U`` (hinge: ``U = C, D = 0``;
squared hinge: ``U = ∞, D = 1/(2C)``). Each worker's rows are a block of the dual's
variables; the worker improves its block with the others held at the round's start, by
coordinate steps ``α_i ← clip(α_i − G/(σ'‖x̄_i‖² + D_i), 0, U)`` with ``G = y_i x̄_i·(w +
σ'Δw) − 1 + D_i α_i``, ``Δw`` the worker's own change so far (the local subproblem of CoCoA+,
Ma et al. 2015; ``σ' = 1`` is the block's exact one, Lee & Roth 2015). With one worker and
``σ' = 1`` this is plain dual CD (Hsieh et al. 2008). Rows are shrunk as LIBLINEAR shrinks
them, with the thresholds of the previous round over all workers: a row at 0 whose ``G``
exceeds the largest projected gradient, or at ``U`` whose ``G`` is below the smallest, is
not visited again until a check re-activates it.

The client moves along the workers' combined changes by the steps that maximize the dual,
which is quadratic in them (``solvers/_cocoa.py``, ``best_steps``). The changes come in two
parts, each with its own step: the rows whose new ``α_i`` sits at a bound (0 or ``U``: their
step is at most 1) and the rows whose new ``α_i`` is inside the box (their step may exceed 1
while every such ``α`` stays in the box). Each row keeps its change (``dalpha``), and the
next round starts by taking the steps (:func:`cocoa_settle`): ``α_i ← α_i − (1 − η) Δα_i``
with ``η`` the step of the row's part (``α_i`` holds ``α_i + Δα_i`` after the epoch, so its
part is known from it). The sums the client needs are taken during the epoch, per part:
``Σ Δα``, ``Σ D α Δα``, ``Σ D Δα²``, the bound rows' ``Δw`` apart (``out_dWb``), and for
the inside rows the largest step that keeps them in the box (``min_i`` of
``(U − α_i)/Δα_i`` for ``Δα_i > 0``, ``α_i/(−Δα_i)`` for ``Δα_i < 0``).

Certificate: :func:`cocoa_settle` sums ``Σ α`` and ``Σ D α²/2`` over every row (the dual at
the round's start is exact); the epoch adds each visited pair's ``C ξ(m)`` at ``w`` before its
step, and for the pairs it shrinks at ``U`` (hinge) ``C y x̄`` into ``out_dzu`` and ``C``: their
loss ``C(1 − m)`` is linear in ``w`` while they stay shrunk (``_dcd_cert.py``'s estimate).
"""

from __future__ import annotations

import numpy as np

from ._csr import row_axpy, row_dots2, row_sq_norm
from ._dcd_cert import pair
from ._jit import kernel

__all__ = ["cocoa_due", "cocoa_rows", "cocoa_settle"]


@kernel
def cocoa_settle(y, alpha, dalpha, eta, prob, out_s):
    """Take the client's last steps (module doc) and sum the duals' terms of every row.

    Parameters
    ----------
    y : ndarray of shape (n_rows,)
    alpha, dalpha : ndarray of shape (n_rows, k)
        The duals (holding the last epoch's full changes) and those changes; on return
        ``alpha`` is after the steps and ``dalpha`` zero.
    eta : ndarray of shape (k, 2)
        The steps of the bound rows' and of the inside rows' changes.
    prob : Costs
    out_s : ndarray of shape (k, 11)
        ``[:, 2]`` and ``[:, 3]`` added to: ``Σ α`` and ``Σ D α²/2``.
    """
    squared = prob.squared
    for i in range(alpha.shape[0]):
        for c in range(alpha.shape[1]):
            yi, Ci, U, D = pair(y, i, c, prob)
            a = alpha[i, c]
            da = dalpha[i, c]
            if da != 0.0:
                e = eta[c, 0] if (a == 0.0 or (not squared and a == U)) else eta[c, 1]
                if e != 1.0:
                    a -= (1.0 - e) * da
                    if a < 0.0:
                        a = 0.0
                    elif a > U:
                        a = U
                    alpha[i, c] = a
                dalpha[i, c] = 0.0
            out_s[c, 2] += a
            out_s[c, 3] += 0.5 * D * a * a


@kernel
def cocoa_rows(X, unit, y, order, prob, W, sigma, check, state, shrink, out_tmp, out_dW,
               out_dWb, out_dzu, out_s, out_pg, out_room):
    """One worker's epoch over its active (row, model) pairs in the order ``order``
    (module doc), after :func:`cocoa_settle`.

    Parameters
    ----------
    X : tuple (indptr, indices, data)
    unit : bool
    y : ndarray of shape (n_rows,)
    order : ndarray of int64, the rows in visiting order
    prob : Costs
    W : ndarray of shape (n_features + 1, k)
        ``w`` at the round's start.
    sigma : float
        The local subproblem's ``σ'`` (module doc).
    check : bool
        An exact check: every pair's loss at ``w`` is summed, and the shrunk pairs that
        violate their bound's optimality condition are re-activated (and visited).
    state : tuple (alpha, dalpha, active, due)
        ``alpha``, ``dalpha``, ``active`` of shape (n_rows, k), updated in place
        (``active``: 0 once shrunk); ``due`` (n_rows,) uint8: the rows a round that is not a
        check visits (:func:`cocoa_due`).
    shrink : tuple (hi, lo) of arrays of shape (k,)
        The previous round's largest and smallest projected gradients (±inf: none shrunk).
    out_tmp : ndarray of shape (2, k)
    out_dW, out_dWb, out_dzu : ndarray of shape (n_features + 1, k)
        Added to: the worker's ``Δw`` (read too: it carries over from block to block of the
        same worker), its bound rows' share, and ``Σ C y x̄`` of the pairs shrunk at ``U``
        (less those a check re-activates).
    out_s : ndarray of shape (k, 11)
        Added to: [0] ``Σ C ξ(m)`` at ``w`` of the visited pairs (of all pairs in a check),
        [1] pairs visited,
        [4:7] and [7:10] ``Σ Δα``, ``Σ D α Δα``, ``Σ D Δα²`` of the bound and inside rows,
        [10] ``Σ C`` of the pairs shrunk at ``U`` (less those re-activated).
    out_pg : ndarray of shape (k, 2)
        Raised to the largest and lowered to the smallest projected gradient.
    out_room : ndarray of shape (k,)
        Lowered to the largest step that keeps the inside rows in the box.
    """
    active, due = state[2], state[3]
    m0 = out_tmp[0]
    md = out_tmp[1]
    outs = (out_dW, out_dWb, out_dzu, out_s, out_pg, out_room)
    for t in range(order.shape[0]):
        i = order[t]
        if not check and due[i] == 0:
            continue
        live = check
        for c in range(W.shape[1]):
            live = live or active[i, c] != 0
        if not live:
            continue
        row_dots2(X, unit, i, W, out_dW, m0, md)
        q = row_sq_norm(X, unit, i, prob.B * prob.B)
        for c in range(W.shape[1]):
            if active[i, c] != 0 or check:
                _visit_pair(X, unit, i, c, y, prob, W, sigma, q, (m0[c], md[c]), state,
                            shrink, outs)


@kernel
def _visit_pair(X, unit, i, c, y, prob, W, sigma, q, margins, state, shrink, outs):
    """Row ``i`` under model ``c`` (:func:`cocoa_rows`; ``margins``: ``x_i·w_c`` and
    ``x_i·Δw_c`` without the bias): its loss at ``w`` summed; a shrunk pair re-activated
    when it violates its bound (a check) or left; an active pair shrunk, or stepped."""
    alpha, dalpha, active = state[0], state[1], state[2]
    out_dW, out_s, out_pg = outs[0], outs[3], outs[4]
    yi, Ci, U, D = pair(y, i, c, prob)
    d, B = W.shape[0] - 1, prob.B
    a = alpha[i, c]
    xi = 1.0 - yi * (margins[0] + B * W[d, c])
    if xi > 0.0:
        out_s[c, 0] += Ci * (xi * xi if prob.squared else xi)
    G = yi * (margins[0] + B * W[d, c] + sigma * (margins[1] + B * out_dW[d, c])) - 1.0 + \
        D * a
    if active[i, c] == 0 and not _reactivated(X, unit, i, c, yi, Ci, U, B, a, G, active,
                                              outs):
        return
    out_s[c, 1] += 1.0
    PG = _projected_gradient(X, unit, i, c, yi, Ci, U, B, a, G, shrink, active, outs)
    if PG != PG:                            # (NaN) shrunk
        return
    out_pg[c, 0] = max(out_pg[c, 0], PG)
    out_pg[c, 1] = min(out_pg[c, 1], PG)
    Q = sigma * q + D
    if PG != 0.0 and Q > 0.0:
        _step(X, unit, i, c, yi, (U, D, B), a, a - G / Q, alpha, dalpha, outs)


@kernel
def _reactivated(X, unit, i, c, yi, Ci, U, B, a, G, active, outs):
    """A check's test of a shrunk pair: re-activated (and its ``C y x̄`` taken out of ``zu``
    when it sat at ``U``) when ``G`` violates its bound's optimality condition."""
    if a == 0.0 and G < 0.0:
        active[i, c] = 1
        return True
    if a == U and G > 0.0:
        active[i, c] = 1
        _shrunk_at_upper(X, unit, i, c, -Ci * yi, -Ci, B, outs)
        return True
    return False


@kernel
def _projected_gradient(X, unit, i, c, yi, Ci, U, B, a, G, shrink, active, outs):
    """LIBLINEAR's projected gradient of an active pair, or NaN when it is shrunk now (at
    0 with ``G`` above the previous largest PG, at ``U`` with ``G`` below the smallest)."""
    if a == 0.0:
        if G > shrink[0][c]:
            active[i, c] = 0
            return np.nan
        return min(G, 0.0)
    if a == U:
        if G < shrink[1][c]:
            active[i, c] = 0
            _shrunk_at_upper(X, unit, i, c, Ci * yi, Ci, B, outs)
            return np.nan
        return max(G, 0.0)
    return G


@kernel
def _shrunk_at_upper(X, unit, i, c, g, Cs, B, outs):
    """``zu += g·x̄_i`` and ``Σ C += Cs`` for pair ``(i, c)`` shrunk at ``U`` (negated when a
    check re-activates it)."""
    _axpy_bias(X, unit, i, c, g, B, outs[2])
    outs[3][c, 10] += Cs


@kernel
def _axpy_bias(X, unit, i, c, g, B, out):
    """``out[:, c] += g·x̄_i`` (the bias feature's ``B`` in the last row)."""
    row_axpy(X, unit, i, g, out, c)
    out[out.shape[0] - 1, c] += g * B


@kernel
def _step(X, unit, i, c, yi, UDB, a, na, alpha, dalpha, outs):
    """``α_ic ← clip(na, 0, U)``: its change into ``Δw`` (and the bound rows' share when it
    ends at a bound) and the sums of its part; an inside pair's room lowers ``out_room``."""
    U, D, B = UDB
    out_dW, out_dWb, out_s, out_room = outs[0], outs[1], outs[3], outs[5]
    bound = na <= 0.0 or na >= U
    na = min(max(na, 0.0), U)
    delta = na - a
    if delta == 0.0:
        return
    alpha[i, c] = na
    dalpha[i, c] = delta
    p = 4 if bound else 7
    out_s[c, p] += delta
    out_s[c, p + 1] += D * a * delta
    out_s[c, p + 2] += D * delta * delta
    _axpy_bias(X, unit, i, c, delta * yi, B, out_dW)
    if bound:
        _axpy_bias(X, unit, i, c, delta * yi, B, out_dWb)
    else:
        out_room[c] = min(out_room[c], -a / delta if delta < 0.0 else (U - a) / delta)


@kernel
def cocoa_due(active, slot, part, due, out_live):
    """The rows the next round visits when it is not a check: ``due = (some pair of the row
    active) and slot == part`` (a sweep over the active rows is cut in parts, each a round of
    its own; each row's slot, fixed, says which); ``out_live[0] +=`` the rows with an active
    pair."""
    for i in range(active.shape[0]):
        live = False
        for c in range(active.shape[1]):
            live = live or active[i, c] != 0
        due[i] = 1 if live and slot[i] == part else 0
        if live:
            out_live[0] += 1.0
