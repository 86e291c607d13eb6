"""Kernels of ``alm``: the fused pass of one ADMM iteration, the conjugate-gradient pass of
its ridge subproblem and the Gram matrix (spec_004 §2.4, §3.2–3.4).

Rows are augmented with the bias feature: ``x̄_i = (x_i, B)`` (``B = 0``: no bias). Weights
``W`` are (n_features + 1, k), the bias weight last, one model per column (``_csr.py``'s
orientation). For model ``c`` a row's target is ``y_ic = ±1`` (binary: the stored label;
one-vs-rest: ``+1`` for its class) and its cost ``C_ic``.

:func:`alm_rows`, one read of each row, for every model, at the point ``W`` (= ``w^(k)``):

* the deferred multiplier update (spec §3.2, Eq. 9): ``R = o − y + e`` with ``o = x̄·w``,
  ``λ ← λ + μ_old R`` (skipped on the first pass, ``λ = 0`` and no ``e`` yet);
* the objective's loss ``Σ C ξ^p``, ``ξ = max(0, 1 − y o)``, and the rows with ``ξ > 0``;
* the dual point of the multipliers (spec §1.1): ``α = −y λ`` clipped to ``[0, C]`` (p = 1)
  or ``[0, ∞)``; per side of the labels ``Σ α``, ``Σ ψ*(α) = Σ (p−1) C (α/(pC))^{p/(p−1)}``
  (the loss's conjugate; 0 for p = 1) and ``Σ α x̄`` (``out_V[:, c]`` positives,
  ``out_V[:, k + c]`` negatives) — the solver projects them to dual feasibility;
* the e-update (Eqs. 10–13, the closed form of §2.4 and the safeguarded Newton of Eq. 11 with
  its missing ``y_i`` restored): ``t = y − o − λ/μ``, ``e = prox(t)``;
* the ridge subproblem's right-hand side (``gram``: ``Σ z x̄``, ``z = y − e − λ/μ``) or its
  half-gradient's data term (``Σ r x̄``, ``r = o − z``, Eq. 16);
* optionally ``Σ C p ξ^{p−1} y x̄`` (the paper's gradient test), ``Σ x̄²`` per column (the
  Jacobi preconditioner) and ``Σ x̄ x̄ᵀ`` (the Gram matrix, spec §3.4).

A row's work for one model is :func:`_model_row`; rows are read and scattered only through
``_csr.py``'s primitives, the bias feature added by the helpers here.
"""

from __future__ import annotations

import math

from ._csr import row_axpy, row_axpys, row_dots, row_outer_add, row_sq_axpy
from ._jit import kernel, kernel_inline

__all__ = ["alm_rows", "alm_cg", "prox_u", "N_SUMS"]

#: Columns of ``alm_rows``'s ``out_s``: loss, ‖R‖², Σα (pos, neg), Σψ*(α) (pos, neg),
#: rows with ξ > 0, then Σα, Σψ*(α) (pos, neg) of the second dual point.
N_SUMS = 11


@kernel_inline
def prox_u(s, gamma, p):
    """``argmin_{u} γ (u)_+^p + ½ (u − s)²`` (spec §2.4, ``u = y e``, ``s = y t``): ``s`` when
    ``s ≤ 0``; else the root in ``[0, s]`` of ``p γ u^(p−1) + u = s`` — closed form for
    p = 1 (``max(s − γ, 0)``) and p = 2 (``s/(1 + 2γ)``), otherwise Newton from the upper
    bracket ``min(s, (s/(pγ))^(1/(p−1)))``, bisecting whenever a step leaves the bracket,
    until ``|Δu| ≤ 1e-12·max(1, s)`` or 60 steps."""
    if s <= 0.0:
        return s
    if p == 1.0:
        return s - gamma if s > gamma else 0.0
    if p == 2.0:
        return s / (1.0 + 2.0 * gamma)
    lo = 0.0
    hi = s
    lg = (math.log(s) - math.log(p * gamma)) / (p - 1.0)
    if lg < 700.0:
        cap = math.exp(lg)
        if cap < hi:
            hi = cap
    u = hi
    tol = 1e-12 * (s if s > 1.0 else 1.0)
    for _ in range(60):
        up = u ** (p - 1.0)
        h = p * gamma * up + u - s
        if h == 0.0:
            return u
        if h < 0.0:
            lo = u
        else:
            hi = u
        dh = p * (p - 1.0) * gamma * (up / u if u > 0.0 else math.inf) + 1.0
        un = u - h / dh
        if not (lo < un < hi):
            un = 0.5 * (lo + hi)
        if abs(un - u) <= tol:
            return un
        u = un
    return u


@kernel_inline
def _power(x, p):
    if p == 1.0:
        return x
    if p == 2.0:
        return x * x
    return x ** p if x > 0.0 else 0.0


@kernel_inline
def _conj(a, C, p, q):
    """``ψ*(α) = (p−1) C (α/(pC))^q`` (``q = p/(p−1)``, p > 1) for ``α ≥ 0``."""
    return (p - 1.0) * C * (a / (p * C)) ** q if a > 0.0 else 0.0


@kernel_inline
def _dual_points(yc, lm, xi, C, p, q, band):
    """``(α, ψ*(α), α₂, ψ*(α₂))`` of a row for one model: the multipliers' point ``α = −y λ``
    clipped, and the second point (the primal's ``α₂ = p C ξ^(p−1)``, p > 1; the band rule,
    p = 1); ``xi = 1 − y o`` signed (module doc)."""
    a = -yc * lm
    if a < 0.0:
        a = 0.0
    if p == 1.0:
        if a > C:
            a = C
        return a, 0.0, (C if xi > band else 0.0 if xi < -band else a), 0.0
    conj = a * a / (4.0 * C) if p == 2.0 else _conj(a, C, p, q)
    a2 = C * p * _power(xi, p - 1.0) if xi > 0.0 else 0.0
    return a, conj, a2, _conj(a2, C, p, q)


@kernel_inline
def _multiplier(lam, e, i, c, R0, mu_old, first, out_s):
    """λ's deferred update (Eq. 9) from ``R0 = o − y``: ``R = R0 + e``, ``λ += μ_old R``,
    ``‖R‖²`` summed; the first pass keeps ``λ`` (no ``e`` yet). Returns ``λ``."""
    lm = lam[i, c]
    if not first:
        R = R0 + e[i, c]
        lm += mu_old * R
        lam[i, c] = lm
        out_s[c, 1] += R * R
    return lm


@kernel_inline
def _scatter(X, unit, i, a, B, out, col):
    """``out[:, col] += a · x̄_i`` (the bias feature ``B`` last)."""
    row_axpy(X, unit, i, a, out, col)
    out[out.shape[0] - 1, col] += a * B


@kernel_inline
def _model_row(X, unit, i, c, yi, oc, costs, p, band, lam, e, mus, flags, out_V, out_s,
               out_gobj):
    """Row ``i`` for model ``c`` at ``o = x̄_i·w_c`` (module doc): λ's update, the loss,
    the dual sums, the e-update; returns the subproblem's coefficient (``z`` or ``o − z``)."""
    B = costs.B
    mu_old, mu_new = mus
    first, gram, want_gobj = flags[0], flags[1], flags[2]
    k = costs.pos.shape[0]
    yc = 1.0 if yi == costs.pos[c] else -1.0
    C = costs.Cp[c] if yc > 0 else costs.Cn[c]
    lm = _multiplier(lam, e, i, c, oc - yc, mu_old, first, out_s)
    xi = 1.0 - yc * oc
    if xi > 0.0:
        out_s[c, 0] += C * _power(xi, p)
        out_s[c, 6] += 1.0
    a, conj, a2, conj2 = _dual_points(yc, lm, xi, C, p, p / (p - 1.0) if p > 1.0 else 0.0,
                                      band)
    side = 0 if yc > 0 else 1
    out_s[c, 2 + side] += a
    out_s[c, 4 + side] += conj
    out_s[c, 7 + side] += a2
    out_s[c, 9 + side] += conj2
    ec = yc * prox_u(yc * (yc - oc - lm / mu_new), C / mu_new, p)    # the e-update
    e[i, c] = ec
    z = yc - ec - lm / mu_new
    if a != 0.0:
        _scatter(X, unit, i, a, B, out_V, c + side * k)
    if a2 != 0.0:
        _scatter(X, unit, i, a2, B, out_V, c + (2 + side) * k)
    if want_gobj and xi > 0.0:
        _scatter(X, unit, i, C * p * yc * (1.0 if p == 1.0 else xi ** (p - 1.0)), B,
                 out_gobj, c)
    return z if gram else oc - z


@kernel_inline
def _gram_row(X, unit, i, B, out_H):
    """``out_H += x̄_i x̄_iᵀ`` (the bias feature ``B`` last)."""
    d = out_H.shape[0] - 1
    row_outer_add(X, unit, i, out_H)
    row_axpy(X, unit, i, B, out_H, d)
    row_axpy(X, unit, i, B, out_H[d], 0)
    out_H[d, d] += B * B


@kernel
def alm_rows(X, unit, y, costs, p, band, W, lam, e, mus, flags, out_tmp, out_G, out_V, out_s,
             out_gobj, out_colsq, out_H):
    """One block of an ADMM iteration (module doc).

    Parameters
    ----------
    X : tuple (indptr, indices, data)
    unit : bool
    y : ndarray of shape (n_rows,)
        Stored labels (±1, or class ids).
    costs : Costs
        The problem's costs (:class:`~streamsvm.kernels.Costs`: per model the label counted
        positive and the costs of its positive and negative rows; the bias value ``B``).
        Its ``squared`` is not read: the loss is the power ``p``.
    p : float
        The loss power (any ``p ≥ 1``; 1 the hinge, 2 the squared hinge).
    band : float
        The second dual point's margin band (p = 1).
    W : ndarray of shape (n_features + 1, k)
    lam, e : ndarray of shape (n_rows, k)
        The block's multipliers and auxiliary variables, updated in place.
    mus : tuple (mu_old, mu_new)
        ``μ`` of the deferred λ update and of the new e-update.
    flags : tuple (first, gram, gobj, colsq, gram_matrix)
        First pass (no λ update); accumulate ``Σ z x̄`` (else ``Σ r x̄``); the optional sums.
    out_tmp : ndarray of shape (2, k)
        Scratch.
    out_G : ndarray of shape (n_features + 1, k)
    out_V : ndarray of shape (n_features + 1, 4k)
        ``Σ α x̄`` per side (positives ``c``, negatives ``k + c``) of the multipliers' point,
        then (``2k + c``, ``3k + c``) of the second point: the primal's ``α = p C ξ^(p−1)``
        (p > 1), or for p = 1 ``C`` when ``ξ > band``, 0 when ``ξ < −band``, the
        multipliers' in between.
    out_s : ndarray of shape (k, N_SUMS)
    out_gobj : ndarray of shape (n_features + 1, k) (or any, unused)
    out_colsq : ndarray of shape (n_features + 1,) (or any, unused)
    out_H : ndarray of shape (n_features + 1, n_features + 1) (or any, unused)
    """
    B = costs.B
    d = W.shape[0] - 1
    o = out_tmp[0]
    coef = out_tmp[1]
    for i in range(X[0].shape[0] - 1):
        row_dots(X, unit, i, W, o)
        for c in range(W.shape[1]):
            coef[c] = _model_row(X, unit, i, c, y[i], o[c] + B * W[d, c], costs, p, band, lam,
                                 e, mus, flags, out_V, out_s, out_gobj)
        row_axpys(X, unit, i, coef, out_G)
        for c in range(W.shape[1]):
            out_G[d, c] += B * coef[c]
        if flags[3]:
            row_sq_axpy(X, unit, i, 1.0, out_colsq, 0)
            out_colsq[d] += B * B
        if flags[4]:
            _gram_row(X, unit, i, B, out_H)


@kernel
def alm_cg(X, unit, P, B, want_hp, out_tmp, out_Hp, out_Q):
    """One block of a conjugate-gradient pass (spec §3.3): for every column ``c`` of ``P``
    (a direction ``(p_w, p_b)``), ``q = x̄·P[:, c]``; ``out_Q[c] += q²`` and (``want_hp``)
    ``out_Hp[:, c] += q x̄``.

    Parameters
    ----------
    X : tuple (indptr, indices, data)
    unit : bool
    P : ndarray of shape (n_features + 1, k)
    B : float
    want_hp : bool
    out_tmp : ndarray of shape (k,)
    out_Hp : ndarray of shape (n_features + 1, k)
    out_Q : ndarray of shape (k,)
    """
    k = P.shape[1]
    d = P.shape[0] - 1
    n = X[0].shape[0] - 1
    for i in range(n):
        row_dots(X, unit, i, P, out_tmp)
        for c in range(k):
            out_tmp[c] += B * P[d, c]
            out_Q[c] += out_tmp[c] * out_tmp[c]
        if want_hp:
            row_axpys(X, unit, i, out_tmp, out_Hp)
            for c in range(k):
                out_Hp[d, c] += B * out_tmp[c]
