"""Kernels of ``nesvm``: the fused pass of one optimal-gradient round and the power
iteration for its Lipschitz constant (spec_001 §2.1, §4.2–4.3, §5).

Rows are augmented with the bias feature: ``x̄_i = (x_i, B)``, ``s̄_i = max(‖x_i‖∞, B)``,
``q̄_i = ‖x_i‖² + B²`` — both computed from the row in the same read as its dot products
(``row_inf_sq``), so no per-row statistics are stored. Weights ``W`` are (n_features + 1, k),
the bias weight last, one model per column (``_csr.py``'s orientation).

:func:`nesvm_rows`, for every model ``c`` (binary: ``y_ic = y_i``; one-vs-rest: ``+1`` for
its class), cost ``C_ic`` and smoothing ``μ_c``, with ``m = y_ic x̄_i·W[:, c]``, ``r = 1 − m``:

* hinge (C-SVM, LP-SVM): ``u = clip(r/(μ s̄_i), 0, 1)`` (``u = [r > 0]`` when ``s̄_i = 0``),
  the smoothed hinge ``h_μ = u r − ½ μ s̄_i u²`` (spec Eq. 5 with the corrected threshold,
  branch-free), the true hinge ``max(0, r)``;
* squared residual (LS-SVM): ``u = r``, loss ``r²``;
* squared hinge (L2-SVM): ``u = max(0, r)``, loss ``u²``;

and sums, in ``out_s[c]``: ``Σ C h_μ``, ``Σ C loss``, ``Σ C u``, ``Σ C s̄ u²``, the rows in
the quadratic zone ``0 < u < 1``, the rows with ``u > 0``, and (when ``two``) ``Σ C h_μ``
and ``Σ C loss`` at the second point ``V[:, c]`` (the last ``y^k``, spec §4.3); in
``out_G[:, c]``: ``Σ C u y_ic x̄_i`` (rows with ``u = 0`` skipped). The solver turns these
into the gradient, ``F_μ``, the true objective and the duality gap (``solvers/_nesvm_cert.py``).
"""

from __future__ import annotations

import math

from ._csr import row_axpys, row_dots, row_dots2, row_inf_sq
from ._jit import kernel, kernel_inline

__all__ = ["nesvm_rows", "nesvm_power", "N_SUMS"]

#: Columns of ``out_s`` (module doc).
N_SUMS = 8


@kernel_inline
def _clip_u(r, mu, s):
    """``clip(r/(μ s), 0, 1)``; ``[r > 0]`` when ``μ s = 0`` (spec §2.1, rows of zeros)."""
    if r <= 0.0:
        return 0.0
    t = mu * s
    if t <= 0.0 or r >= t:
        return 1.0
    return r / t


@kernel_inline
def _smoothed(r, mu, s, squared):
    """``(u, h, loss)`` of a row at residual ``r = 1 − m`` (module doc): the hinge's ``u``,
    its smoothing ``h_μ`` and ``max(0, r)`` (``squared`` 0), ``(r, r², r²)`` for the squared
    residual (1), ``(t, t², t²)`` with ``t = max(0, r)`` for the squared hinge (2)."""
    if squared == 1:
        return r, r * r, r * r
    if squared == 2:
        t = r if r > 0.0 else 0.0
        return t, t * t, t * t
    u = _clip_u(r, mu, s)
    return u, u * r - 0.5 * mu * s * u * u, (r if r > 0.0 else 0.0)


@kernel_inline
def _model_terms(c, C, r, rv, s, norm, mu, squared, two, out_s, out_slack):
    """Model ``c``'s terms of a row of cost ``C`` at residual ``r`` (and ``rv`` at the second
    point when ``two``), with ``s̄_i = s``, ``‖x̄_i‖ = norm``, smoothing ``mu`` and the squared
    loss ``squared`` (:func:`_smoothed`): added to ``out_s[c]``, the screening slack lowered in
    ``out_slack[c]``; returns ``u``."""
    slack = -r / norm if norm > 0.0 else -math.inf
    if slack < out_slack[c]:
        out_slack[c] = slack
    u, h, loss = _smoothed(r, mu, s, squared)
    if not squared and 0.0 < u < 1.0:
        out_s[c, 4] += 1.0
    if u != 0.0:
        out_s[c, 5] += 1.0
    out_s[c, 0] += C * h
    out_s[c, 1] += C * loss
    out_s[c, 2] += C * u
    out_s[c, 3] += C * s * u * u
    if two:
        _, hv, lossv = _smoothed(rv, mu, s, squared)
        out_s[c, 6] += C * hv
        out_s[c, 7] += C * lossv
    return u


@kernel_inline
def _add_gradient(X, unit, i, B, coef, out_G, out_P):
    """``out_G[:, c] += coef[c] x̄_i``; when ``out_P`` is not empty, the same over the
    positive ``coef[c]`` into ``out_P``, and those ``coef[c]`` into its last row
    (``coef`` is left clipped at 0)."""
    k = out_G.shape[1]
    d = out_G.shape[0] - 1
    row_axpys(X, unit, i, coef, out_G)
    for c in range(k):
        out_G[d, c] += B * coef[c]
    if out_P.shape[0] > 0:          # the positive side alone (coef > 0 there)
        for c in range(k):
            coef[c] = coef[c] if coef[c] > 0.0 else 0.0
            out_P[d + 1, c] += coef[c]
        row_axpys(X, unit, i, coef, out_P)
        for c in range(k):
            out_P[d, c] += B * coef[c]


@kernel
def nesvm_rows(X, unit, y, costs, mu, least_squares, W, V, two, out_tmp, out_G, out_s,
               out_slack, out_P):
    """One block of an optimal-gradient round (module doc).

    Parameters
    ----------
    X : tuple (indptr, indices, data)
    unit : bool
    y : ndarray of shape (n_rows,)
        Stored labels (±1, or class ids).
    costs : Costs
        The problem's costs (:class:`~streamsvm.kernels.Costs`: per model the label counted
        positive and the costs of its positive and negative rows; the bias value ``B``, 0:
        no bias). Its ``squared`` (the squared hinge) is not read.
    mu : ndarray of shape (k,)
        The hinge smoothing per model.
    least_squares : int
        The loss: 0 the (smoothed) hinge, 1 the squared residual of the LS-SVM, 2 the
        squared hinge.
    W, V : ndarray of shape (n_features + 1, k)
        The point of the round and (``two``) the second point evaluated.
    out_tmp : ndarray of shape (3, k)
        Scratch.
    out_G : ndarray of shape (n_features + 1, k)
        Added to: ``Σ C u y x̄``.
    out_s : ndarray of shape (k, N_SUMS)
        Added to (module doc).
    out_slack : ndarray of shape (k,)
        Lowered to ``min_i (m_i − 1)/‖x̄_i‖`` at ``W`` (safe screening, spec §4.5: every row
        of the block has ``m_i > 1`` at any point within that distance of ``W``); ``−inf``
        for a row of zeros.
    out_P : ndarray of shape (n_features + 2, k), or (0, k)
        When not empty (a free bias): added to, over the rows with ``y_ic = +1`` only,
        ``Σ C u x̄`` (the first n_features + 1 rows) and ``Σ C u`` (the last): the positive
        side of ``out_G``, from which the solver rescales the dual point to ``Σ α y = 0``.
    """
    pos, Cp, Cn, B = costs.pos, costs.Cp, costs.Cn, costs.B
    k = W.shape[1]
    d = W.shape[0] - 1
    mw, mv, coef = out_tmp[0], out_tmp[1], out_tmp[2]
    for i in range(X[0].shape[0] - 1):
        if two:
            row_dots2(X, unit, i, W, V, mw, mv)
        else:
            row_dots(X, unit, i, W, mw)
        s, q = row_inf_sq(X, unit, i)
        if B > s:
            s = B
        norm = math.sqrt(q + B * B)
        any_u = False
        for c in range(k):
            yc = 1.0 if y[i] == pos[c] else -1.0
            C = Cp[c] if yc > 0 else Cn[c]
            r = 1.0 - yc * (mw[c] + B * W[d, c])
            rv = 1.0 - yc * (mv[c] + B * V[d, c]) if two else 0.0
            u = _model_terms(c, C, r, rv, s, norm, mu[c], least_squares, two, out_s,
                             out_slack)
            coef[c] = C * u * yc
            if u != 0.0:
                any_u = True
        if any_u:
            _add_gradient(X, unit, i, B, coef, out_G, out_P)


@kernel
def nesvm_power(X, unit, B, scaled, V, out_tmp, out_M, out_stats):
    """One block of ``M V`` with ``M = Σ_i x̄_i x̄_iᵀ / s̄_i`` (``scaled``) or ``Σ_i x̄_i
    x̄_iᵀ``, for the Lipschitz constant (spec §5 item 3), and the rows' statistics.

    ``V`` and ``out_M`` are (n_features + 1, b); ``out_tmp`` (b,) scratch; ``out_stats``
    (4,) is added ``Σ s̄_i``, ``Σ q̄_i``, ``Σ q̄_i/s̄_i`` and ``max q̄_i/s̄_i`` — the last as
    a running max (spec §5 items 1–2: the paper's and the trace bound).
    """
    b = V.shape[1]
    d = V.shape[0] - 1
    n = X[0].shape[0] - 1
    for i in range(n):
        row_dots(X, unit, i, V, out_tmp)
        s, q = row_inf_sq(X, unit, i)
        if B > s:
            s = B
        q += B * B
        inv = 1.0
        if scaled:
            inv = 1.0 / s if s > 0.0 else 0.0
        for c in range(b):
            out_tmp[c] = (out_tmp[c] + B * V[d, c]) * inv
        row_axpys(X, unit, i, out_tmp, out_M)
        for c in range(b):
            out_M[d, c] += B * out_tmp[c]
        out_stats[0] += s
        out_stats[1] += q
        if s > 0.0:
            out_stats[2] += q / s
            if q / s > out_stats[3]:
                out_stats[3] = q / s
