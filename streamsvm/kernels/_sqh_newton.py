"""A primal Newton-CG for one squared-hinge model over a CSR slab in RAM (LIBLINEAR ``-s 2``).

``dcd`` switches a one-vs-rest class to it when the dual coordinate descent is slow on that
class, as LIBLINEAR switches ``-s 1`` to ``-s 2`` at its dual iteration limit
(``solvers/_dcd_ram.py`` says when). Problem, for the model ``w̄ = (w, b)`` and rows
``x̄_i = (x_i, B)``::

    P(w̄) = ½‖w̄‖² + Σ_i C_i max(0, 1 − z_i)²,      z_i = y_i w̄·x̄_i

Newton's direction solves ``H s = −g`` with the generalized Hessian ``H = I + 2 Σ_{z_i<1}
C_i x̄_i x̄_iᵀ`` by conjugate gradient preconditioned by its diagonal, to a residual of
``0.1 ‖g‖`` (LIBLINEAR's ``eps_cg``), each product over the rows with ``z_i < 1`` only; the
step is the Armijo backtracking on the exact objective along ``s`` (one read of the rows for
``x̄_i·s``, then each trial costs O(n)).

Certificate: ``α_i = 2 C_i max(0, 1 − z_i)`` is dual feasible, ``v = Σ y_i α_i x̄_i = w̄ −
g``, and ``D(α) = Σ α_i − ½‖v‖² − Σ α_i²/(4C_i)``: the kernel stops once ``P(w̄) − D(α) ≤
tol·|P(w̄)|`` (or after ``max_steps`` Newton steps) and returns the primal point ``w̄`` with
``α`` and both values. It does not end at the dual's own point ``v`` (the identity ``W = Σ y
α x̄`` dcd keeps): on pendigits (features up to 100) ``v`` is 2e-4 from ``w̄`` but ``P(v)`` is
250 times ``P(w̄)``.
"""

from __future__ import annotations

from ._csr import row_axpy, row_dot, row_sq_axpy
from ._jit import kernel, kernel_inline

__all__ = ["sqh_newton"]


@kernel_inline
def _xdot(X, unit, i, v, B):
    """``x̄_i · v`` with ``v`` of shape (d + 1, 1), the bias weight last."""
    return row_dot(X, unit, i, v, 0) + B * v[v.shape[0] - 1, 0]


@kernel_inline
def _xaxpy(X, unit, i, a, B, out):
    row_axpy(X, unit, i, a, out, 0)
    out[out.shape[0] - 1, 0] += a * B


@kernel_inline
def _dot(a, b):
    s = 0.0
    for j in range(a.shape[0]):
        s += a[j, 0] * b[j, 0]
    return s


@kernel_inline
def _gradient(X, unit, B, yc, cost, z, w, rows, coef, out_g, out_h):
    """Gradient into ``out_g``, the Hessian's diagonal into ``out_h``, the rows with
    ``z_i < 1`` and their ``2 C_i`` into ``rows``/``coef``: ``(m, loss, Σ α_i)``."""
    d1 = w.shape[0]
    for j in range(d1):
        out_g[j, 0] = w[j, 0]
        out_h[j, 0] = 1.0
    m = 0
    loss = 0.0
    asum = 0.0
    for i in range(len(z)):
        r = 1.0 - z[i]
        if r > 0.0:
            c2 = 2.0 * cost[i]
            loss += cost[i] * r * r
            asum += c2 * r
            _xaxpy(X, unit, i, -c2 * r * yc[i], B, out_g)
            rows[m] = i
            coef[m] = c2
            m += 1
            row_sq_axpy(X, unit, i, c2, out_h, 0)
            out_h[d1 - 1, 0] += c2 * B * B
    return m, loss, asum


@kernel_inline
def _hess_vec(X, unit, B, rows, coef, m, v, out):
    """``out = H v`` over the rows with ``z_i < 1``."""
    for j in range(v.shape[0]):
        out[j, 0] = v[j, 0]
    for t in range(m):
        i = rows[t]
        _xaxpy(X, unit, i, coef[t] * _xdot(X, unit, i, v, B), B, out)


@kernel_inline
def _gap(w, g, loss, asum):
    """``(P(w̄), D(α), ‖w̄‖², ‖g‖²)`` at ``α_i = 2 C_i max(0, 1 − z_i)`` (module doc):
    ``v = w̄ − g`` and ``Σ α²/(4C) = loss``."""
    wn = _dot(w, w)
    gn = _dot(g, g)
    vv = wn - 2.0 * _dot(w, g) + gn
    return 0.5 * wn + loss, asum - 0.5 * vv - loss, wn, gn


@kernel_inline
def _cg(X, unit, B, rows, coef, m, g, h, vecs, cg_steps, gn):
    """Conjugate gradient on ``H s = −g`` preconditioned by the diagonal ``h``, from ``s =
    0`` to ``‖r‖ ≤ 0.1 ‖g‖`` (``gn = ‖g‖²``) or ``50 (d + 1)`` CG steps in all (``cg_steps``
    before): ``s`` into ``vecs[2]``; returns the CG steps in all."""
    s, r, p, q = vecs[2], vecs[3], vecs[4], vecs[5]
    d1 = s.shape[0]
    for j in range(d1):
        s[j, 0] = 0.0
        r[j, 0] = -g[j, 0]
        p[j, 0] = r[j, 0] / h[j, 0]
    rz = _dot(r, p)
    while True:
        _hess_vec(X, unit, B, rows, coef, m, p, q)
        cg_steps += 1
        a = rz / _dot(p, q)
        rr = 0.0
        for j in range(d1):
            s[j, 0] += a * p[j, 0]
            r[j, 0] -= a * q[j, 0]
            rr += r[j, 0] * r[j, 0]
        if rr <= 0.01 * gn or cg_steps > 50 * d1:
            return cg_steps
        rz_new = 0.0
        for j in range(d1):
            rz_new += r[j, 0] * r[j, 0] / h[j, 0]
        beta = rz_new / rz
        rz = rz_new
        for j in range(d1):
            p[j, 0] = r[j, 0] / h[j, 0] + beta * p[j, 0]


@kernel_inline
def _armijo(X, unit, B, yc, cost, z, u, w, g, s, wn, primal):
    """Armijo backtracking on the exact ``P(w̄ + t s)`` from ``t = 1`` (one read of the rows
    for ``u_i = y_i x̄_i·s``, then each trial costs O(n)); ``w̄`` and the margins ``z`` moved
    by the step ``t`` found."""
    n = z.shape[0]
    for i in range(n):
        u[i] = yc[i] * _xdot(X, unit, i, s, B)
    ws, ss, gs = _dot(w, s), _dot(s, s), _dot(g, s)
    t = 1.0
    for _ in range(30):
        lt = 0.0
        for i in range(n):
            e = 1.0 - z[i] - t * u[i]
            if e > 0.0:
                lt += cost[i] * e * e
        if 0.5 * wn + t * ws + 0.5 * t * t * ss + lt <= primal + 0.01 * t * gs:
            break
        t *= 0.5
    for j in range(w.shape[0]):
        w[j, 0] += t * s[j, 0]
    for i in range(n):
        z[i] += t * u[i]


@kernel
def sqh_newton(X, unit, y, model, w, control, work, out):
    """Newton-CG on one squared-hinge model until its own duality gap is below ``tol``.

    Parameters
    ----------
    X : tuple (indptr, indices, data)
        The rows (a RAM slab).
    unit : bool
    y : ndarray of shape (n_rows,)
        Class labels.
    model : tuple (positive label, C of the positive rows, C of the others, B)
    w : ndarray of shape (n_features + 1, 1)
        ``w̄``, the bias weight last; updated in place.
    control : tuple (tol, max_steps)
    work : tuple (rows int64 (n,), float64 (5, n), vecs (6, n_features + 1, 1))
    out : tuple (alpha, margin, info)
        ``alpha`` (n,) ``α_i`` at the returned ``w̄``; ``margin`` (n,) its margins ``z_i``
        (signed, as dcd records them); ``info`` (5,) ``[Newton steps, CG steps, row visits,
        P(w̄), D(α)]``.
    """
    label, Cp, Cn, B = model
    tol, max_steps = control
    rows, vecs = work[0], work[2]
    coef, u, yc, cost, z = work[1][0], work[1][1], work[1][2], work[1][3], work[1][4]
    g, h = vecs[0], vecs[1]
    alpha, margin, info = out
    n = len(y)
    for i in range(n):
        yc[i] = 1.0 if y[i] == label else -1.0
        cost[i] = Cp if y[i] == label else Cn
        z[i] = yc[i] * _xdot(X, unit, i, w, B)
    visits, steps, cg_steps = n, 0, 0
    while True:
        m, loss, asum = _gradient(X, unit, B, yc, cost, z, w, rows, coef, g, h)
        visits += m
        primal, dual, wn, gn = _gap(w, g, loss, asum)
        if primal - dual <= tol * abs(primal) or steps >= max_steps or gn == 0.0:
            break
        before = cg_steps
        cg_steps = _cg(X, unit, B, rows, coef, m, g, h, vecs, cg_steps, gn)
        _armijo(X, unit, B, yc, cost, z, u, w, g, vecs[2], wn, primal)
        visits += m * (cg_steps - before) + n
        steps += 1
    for i in range(n):
        e = 1.0 - z[i]
        alpha[i] = 2.0 * cost[i] * e if e > 0.0 else 0.0
        margin[i] = z[i]
    info[0], info[1], info[2], info[3], info[4] = steps, cg_steps, visits, primal, dual
