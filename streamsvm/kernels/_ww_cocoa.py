"""Kernels of ``ww``'s distributed loop (``solvers/_ww_cocoa.py``): each worker's epoch of
Walrus steps over its rows against its copy of ``W``, and the settling of the client's last
steps into its multipliers.

The β-form dual of the Weston–Watkins SVM (``_ww.py``'s module doc) is
``D(β) = Σ_i γ_i − ½‖W(β)‖²`` with ``γ_i = Σ_s β_is`` and a box ``0 ≤ β_is ≤ C_{y_i}``: the
same shape as the binary dual of ``_cocoa.py`` (linear term, quadratic term, a box per
variable, no diagonal term), so the same round works. Each worker's rows are a block of the
dual's variables; the worker improves its block with the others held at the round's start:
each row's block minimized exactly by Walrus on the local subproblem with ``σ'`` (scores at
``W + σ'ΔW``, curvature ``σ'‖x̄_i‖²``, ``ΔW`` the worker's own change so far; CoCoA+,
Ma et al. 2015; ``σ' = 1`` is the block's exact subproblem, Lee & Roth 2015).

The client moves along the combined changes by the steps that maximize the dual
(``solvers/_cocoa.py``'s ``best_steps``): one for the multipliers that ended at a bound (0 or
``C``: at most 1) and one for those inside the box (up to the largest feasible step). Each
row keeps its change (``dbeta``); the next round starts by taking the steps
(:func:`ww_cocoa_settle`): ``β_is ← β_is − (1 − η) Δβ_is`` with the step of the entry's part
(known from ``β_is`` itself: it holds ``β_is + Δβ_is`` after the epoch), and
``γ_i ← Σ_s β_is``.

Shrinking, as the local ``ww`` shrinks: a row that a step skips (β = 0 and every margin ≥ 1)
or leaves unchanged sits out (``active = 0``) until the next *full* epoch, which visits
every row, sums every row's loss at ``W`` (the exact primal of the round's start) and
decides each row's flag again. (Also shrinking rows whose projected gradients are all below
a share of the last full epoch's: 1e-2 of it, 64.7 passes instead of 54.3 on dna with two
workers, 16.1 instead of 17.7 on letter; 1e-3: 59.8 and 16.8. Not taken.)
"""

from __future__ import annotations

from ._csr import row_axpys, row_dots2
from ._jit import kernel
from ._ww import _slot_class, _ww_loss, _ww_row

__all__ = ["ww_cocoa_due", "ww_cocoa_rows", "ww_cocoa_settle"]


@kernel
def ww_cocoa_settle(y, Cy, beta, gamma, dbeta, eta, out):
    """Take the client's last steps (module doc) and sum ``γ`` over every row.

    Parameters
    ----------
    y : ndarray of int64, class indices
    Cy : ndarray of shape (k,), a row's cost by class
    beta, dbeta : ndarray of shape (n_rows, k − 1)
        The multipliers (holding the last epoch's full changes) and those changes; on
        return ``beta`` is after the steps and ``dbeta`` zero.
    gamma : ndarray of shape (n_rows,), set to ``Σ_s β_is``
    eta : ndarray of shape (2,), the steps of the bound and of the inside entries
    out : ndarray of shape (8,); ``out[1] += Σ γ``
    """
    for i in range(beta.shape[0]):
        Ci = Cy[y[i]]
        g = 0.0
        for s in range(beta.shape[1]):
            b = beta[i, s]
            d = dbeta[i, s]
            if d != 0.0:
                e = eta[0] if (b <= 0.0 or b >= Ci) else eta[1]
                if e != 1.0:
                    b = min(max(b - (1.0 - e) * d, 0.0), Ci)
                    beta[i, s] = b
                dbeta[i, s] = 0.0
            g += b
        gamma[i] = g
        out[1] += g


@kernel
def ww_cocoa_rows(X, unit, y, q, order, state, costs, model, scratch, out_dW, out_dWb, out,
                  out_room):
    """One worker's epoch (module doc) over the rows ``order``, after
    :func:`ww_cocoa_settle`.

    Parameters
    ----------
    X, unit, y, q, costs
        As in :func:`~streamsvm.kernels._ww.ww_epoch`.
    order : ndarray of int64, the rows in visiting order
    state : tuple (beta, gamma, dbeta, active, due)
        ``active`` (n_rows,) uint8: 0 for a shrunk row; ``due`` (n_rows,) uint8: the rows an
        epoch that is not full visits (:func:`ww_cocoa_due`).
    model : tuple (W, sigma, full)
        ``W`` at the round's start (read only), ``σ'``, and whether the epoch is full (every
        row visited, its loss at ``W`` summed, its flag decided again).
    scratch : tuple (z, zd, v, b, dW, heap, vs, P, old, dWb)
        float64: ``z``, ``zd``, ``dW``, ``P``, ``dWb`` of k entries; ``v``, ``b``, ``heap``,
        ``vs``, ``old`` of k − 1.
    out_dW, out_dWb : ndarray of shape (n_features + 1, k)
        Added to: the worker's ``ΔW`` (read too: it carries over from row to row) and the
        share of its entries that ended at a bound.
    out : ndarray of shape (8,)
        Added to: [0] ``Σ C_i ·`` WW hinge loss at ``W`` (full epochs), [2] rows visited,
        [4] and [5] ``Σ Δβ`` of the bound and of the inside entries, [6] rows changed;
        [3] raised to the largest projected-gradient entry.
    out_room : ndarray of shape (1,)
        Lowered to the largest step that keeps the inside entries in their box.
    """
    beta, gamma, dbeta, active, due = state
    Cy, B = costs.Cp, costs.B
    W, sigma, full = model
    z, zd, v, b, dW, heap, vs, P, old, dWb = scratch
    k = W.shape[1]
    d = W.shape[0] - 1
    for t in range(order.shape[0]):
        i = order[t]
        if not full and due[i] == 0:
            continue
        yi = y[i]
        row_dots2(X, unit, i, W, out_dW, z, zd)
        for c in range(k):
            z[c] += B * W[d, c]
        if full:
            out[0] += Cy[yi] * _ww_loss(z, yi, k)
        for c in range(k):
            z[c] += sigma * (zd[c] + B * out_dW[d, c])
        out[2] += 1.0
        for s in range(k - 1):
            old[s] = beta[i, s]
        step = _ww_row(i, yi, Cy[yi], sigma * q[i], z, beta, gamma, v, b, dW, heap, vs, P,
                       out)
        active[i] = 1 if step >= 2 else 0
        if step >= 2:
            _record(X, unit, i, yi, Cy[yi], B, old, (beta, dbeta), (dW, dWb),
                    (out_dW, out_dWb, out, out_room))


@kernel
def _record(X, unit, i, yi, Ci, B, old, state, rows, outs):
    """Row ``i``'s change ``Δβ_i = β_i − old`` into ``dbeta``, its columns' changes into the
    worker's ``ΔW`` (and the bound entries' into ``ΔW_b``), ``Σ Δβ`` by part, and the inside
    entries' room (module doc)."""
    beta, dbeta = state
    dW, dWb = rows
    out_dW, out_dWb, out, out_room = outs
    k = dW.shape[0]
    dW[:] = 0.0
    dWb[:] = 0.0
    bound = False
    for s in range(k - 1):
        delta = beta[i, s] - old[s]
        dbeta[i, s] = delta
        if delta == 0.0:
            continue
        c = _slot_class(s, yi)
        dW[c] -= delta
        dW[yi] += delta
        if beta[i, s] <= 0.0 or beta[i, s] >= Ci:
            dWb[c] -= delta
            dWb[yi] += delta
            out[4] += delta
            bound = True
        else:
            out[5] += delta
            out_room[0] = min(out_room[0], (Ci - old[s]) / delta if delta > 0.0 else
                              old[s] / -delta)
    out[6] += 1.0
    _axpy_bias(X, unit, i, B, dW, out_dW)
    if bound:
        _axpy_bias(X, unit, i, B, dWb, out_dWb)


@kernel
def _axpy_bias(X, unit, i, B, dW, out):
    """``out[:, c] += dW[c]·x̄_i`` for every class (the bias feature's ``B`` in the last
    row)."""
    row_axpys(X, unit, i, dW, out)
    d = out.shape[0] - 1
    for c in range(dW.shape[0]):
        out[d, c] += B * dW[c]


@kernel
def ww_cocoa_due(active, slot, part, due, out):
    """The rows the next epoch over the active rows visits: ``due = active and slot ==
    part`` (an epoch over the active rows is cut in parts, each a round of its own: each
    row's slot, fixed, says which); ``out[7] +=`` the active rows."""
    for i in range(active.shape[0]):
        due[i] = 1 if active[i] != 0 and slot[i] == part else 0
        if active[i] != 0:
            out[7] += 1.0
