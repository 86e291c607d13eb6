"""The certificate of the dual CD kernels (``_dcd.py``): each (row, model) pair's terms, the
primal and dual estimates made of their sums, and the exact check at fixed weights.

Argument groups as in ``_dcd.py`` (``model = (W, zu, zs)``, ``prob`` the
:class:`~streamsvm.kernels.Costs` record, ``duals``). The duality gap of model ``c`` is
``P − D`` with::

    P = ½‖w̄‖² + Σ_i C_i ξ(m_i)            (ξ the hinge or its square)
    D = Σ_i α_i − ½‖w̄‖² − ½ Σ_i D_i α_i²   (D_i = 1/(2 C_i) for the squared hinge, else 0)

summed as ``terms = [Σ C_i ξ(m_i), Σ α_i, ½ Σ D_i α_i²]`` over the pairs still active.

Certificate of shrunk rows (not in LIBLINEAR). A row is shrunk only at a bound and is not
visited again until un-shrinking, so its terms are known without its margin except for
the loss: at ``α = 0`` it was shrunk with margin > 1, and its loss is taken as 0; at
``α = U = C_i`` (hinge only) its loss ``C_i (1 − m_i)`` is linear in ``w``, and the sum over
all such rows is ``Σ C_i − w·zu − w_b·zs[0]`` (``w_b`` the bias weight) with ``zu = Σ C_i y_i x_i`` and
``zs = [Σ C_i y_i B, Σ C_i]`` accumulated when rows are shrunk. The approximate primal
(used only to decide when to run the exact check) therefore tracks the current ``w``
instead of margins recorded many epochs ago.
"""

from __future__ import annotations

import numpy as np

from ._csr import bias_at, row_axpy, row_dot, w_at
from ._jit import kernel, kernel_inline

__all__ = ["dcd_check", "dcd_estimate", "dcd_terms_add", "pair", "row_margin", "add_terms",
           "shrunk_at_bound", "gap_met", "estimate_listed", "check_one", "clear_shrunk_sums"]


@kernel_inline
def pair(y, i, c, prob):
    """Row ``i`` as model ``c`` sees it: ``(y_i, C_i, U, D)``, its sign (+1 when ``y[i] ==
    pos[c]``), its cost, the bound of its dual (``inf`` for the squared hinge, else ``C_i``)
    and the diagonal term ``D`` (``1/(2 C_i)`` for the squared hinge, else 0)."""
    pos, Cp, Cn, l2 = prob.pos, prob.Cp, prob.Cn, prob.squared
    yi = 1.0 if y[i] == pos[c] else -1.0
    Ci = Cp[c] if yi > 0 else Cn[c]
    U = np.inf if l2 else Ci
    D = 0.5 / Ci if l2 else 0.0
    return yi, Ci, U, D


@kernel_inline
def row_margin(X, unit, i, c, yi, model, B):
    """The margin ``y_i (w_c·x_i + w_{d,c} B)`` of row ``i`` under model ``c``."""
    return yi * (row_dot(X, unit, i, model[0], c) + bias_at(model[0], c) * B)


@kernel_inline
def add_terms(out, c, Ci, m, a, l2):
    """``out[c] += [C_i ξ(m), α, ½ D α²]`` (D = 1/(2C_i) for the squared hinge, else 0)."""
    xi = max(0.0, 1.0 - m)
    if l2:
        out[c, 0] += Ci * xi * xi
        out[c, 2] += 0.25 / Ci * a * a
    else:
        out[c, 0] += Ci * xi
    out[c, 1] += a


@kernel_inline
def shrunk_at_bound(X, unit, i, Ci, yi, B, model, c):
    """Row ``i`` leaves the active set at ``α = U = C_i``: its loss is now tracked
    linearly through ``zu``/``zs`` (module doc)."""
    row_axpy(X, unit, i, Ci * yi, model[1], c)
    model[2][c, 0] += Ci * yi * B
    model[2][c, 1] += Ci


@kernel_inline
def gap_met(cert, c, tol):
    """Whether model ``c``'s relative gap ``(P − D)/|P|`` (``cert[c] = [P, D]``) is at most
    ``tol``."""
    return cert[c, 0] - cert[c, 1] <= tol * max(abs(cert[c, 0]), 1e-300)


@kernel_inline
def _estimate_one(c, model, loss, sum_a, half_da2, out_cert):
    """``out_cert[c] = [primal, dual]`` estimates from the sums over the active rows."""
    W, zu, zs = model
    b = bias_at(W, c)
    reg = b * b
    lin = b * zs[c, 0]
    for j in range(W.shape[0] - 1):
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
    for c in range(model[2].shape[0]):
        _estimate_one(c, model, terms[c, 0], terms[c, 1], terms[c, 2], out_cert)


@kernel_inline
def _terms_row(y, duals, i, c, prob, out):
    alpha, active, margin = duals
    if active[i, c] != 0:
        add_terms(out, c, pair(y, i, c, prob)[1], margin[i, c], alpha[i, c], prob.squared)


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
        for c in range(len(prob.pos)):
            _terms_row(y, duals, i, c, prob, out)


@kernel_inline
def estimate_listed(rows, m, y, duals, prob, model, terms, out_cert):
    """:func:`dcd_estimate` from the sums over the listed rows ``rows[:m]`` (``terms``:
    scratch of shape (k, 3))."""
    k = len(prob.pos)
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

    Read-only on ``W`` and ``alpha``. A shrunk pair whose projected gradient at
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
    l2, B = prob.squared, prob.B
    out_terms, stats = acc
    for i in range(len(y)):
        for c in range(len(prob.pos)):
            yi, Ci, U, D = pair(y, i, c, prob)
            m = row_margin(X, unit, i, c, yi, model, B)
            xi = max(0.0, 1.0 - m)
            stats[c, 2] += Ci * (xi * xi if l2 else xi)
            a = alpha[i, c]
            G = m - 1.0 + D * a
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
                    shrunk_at_bound(X, unit, i, Ci, yi, B, model, c)
                    continue
                else:
                    continue
            add_terms(out_terms, c, Ci, m, a, l2)


@kernel_inline
def clear_shrunk_sums(model):
    """``zu = 0``, ``zs = 0`` of one model given as d-vectors (before they are summed
    again)."""
    zu, zs = model[1], model[2]
    for j in range(zu.shape[0]):
        zu[j] = 0.0
    zs[0, 0], zs[0, 1] = 0.0, 0.0


@kernel_inline
def check_one(X, unit, y, duals, model, prob, scratch, out_cert):
    """The exact check (:func:`dcd_check`) of one model given as d-vectors: its shrunk
    violators re-activated, ``out_cert[0] = [primal, dual]`` exact at its current ``W``."""
    terms, stats = scratch
    clear_shrunk_sums(model)
    terms[0, 0], terms[0, 1], terms[0, 2] = 0.0, 0.0, 0.0
    stats[0, 0], stats[0, 1], stats[0, 2], stats[0, 3] = -np.inf, np.inf, 0.0, 0.0
    dcd_check(X, unit, y, duals[:2], model, prob, (terms, stats))
    _estimate_one(0, model, terms[0, 0], terms[0, 1], terms[0, 2], out_cert)
    W = model[0]
    d = W.shape[0] - 1
    reg = W[d] * W[d]
    for j in range(d):
        reg += W[j] * W[j]
    out_cert[0, 0] = 0.5 * reg + stats[0, 2]
