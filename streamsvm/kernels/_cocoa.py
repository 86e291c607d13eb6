"""Kernel of the CoCoA+ outer loop (``solvers/_cocoa.py``): one local dual coordinate
descent epoch over a block's rows against the worker's copy of ``w``.

Rows are augmented with the bias feature ``x̄_i = (x_i, B)``; ``W`` is (n_features + 1, k),
the bias weight last. For model ``c`` (``y_ic = ±1``, cost ``C_ic``) the dual is
``max_α Σ α − ½‖Σ α y x̄‖² − ½ Σ D_i α²`` with ``0 ≤ α ≤ U`` (hinge: ``U = C, D = 0``; squared
hinge: ``U = ∞, D = 1/(2C)``). The local subproblem of CoCoA+ (Ma et al. 2015) with
aggregation by adding and the safe ``σ' = K`` (the number of partitions) is solved by
coordinate steps ``α_i ← clip(α_i − G/(σ'‖x̄_i‖² + D_i), 0, U)`` with ``G = y_i x̄_i·(w + σ' Δw)
− 1 + D_i α_i``, ``Δw`` the partition's own change so far (``out_dW``, which carries over
from block to block of the same worker). With ``K = 1`` this is plain dual CD (Hsieh et al.
2008).

Before a row's step its contribution to the certificate at the pass's start is added:
``Σ C ξ^p`` at ``w`` (the primal's loss), ``Σ α`` and ``Σ D α²/2``.
"""

from __future__ import annotations

from ._csr import row_axpy, row_dots2, row_sq_norm
from ._jit import kernel

__all__ = ["cocoa_rows"]


@kernel
def cocoa_rows(X, unit, y, order, model, W, sigma, alpha, out_tmp, out_dW, out_s):
    """One block (module doc).

    Parameters
    ----------
    X : tuple (indptr, indices, data)
    unit : bool
    y : ndarray of shape (n_rows,)
    order : ndarray of int64, the rows in visiting order
    model : Costs
        The problem's costs (:class:`~streamsvm.kernels.Costs`, ``(pos, Cp, Cn, squared, B)``).
    W : ndarray of shape (n_features + 1, k)
        ``w`` at the pass's start.
    sigma : float
        ``σ'``.
    alpha : ndarray of shape (n_rows, k)
        The block's duals, updated in place.
    out_tmp : ndarray of shape (2, k)
    out_dW : ndarray of shape (n_features + 1, k)
        The partition's ``Δw`` (read and added to).
    out_s : ndarray of shape (k, 3)
        Added to: ``Σ C loss(w)``, ``Σ α``, ``Σ D α²/2`` (at the pass's start).
    """
    pos, Cp, Cn, squared, B = model
    k = W.shape[1]
    d = W.shape[0] - 1
    m0 = out_tmp[0]
    md = out_tmp[1]
    for t in range(order.shape[0]):
        i = order[t]
        row_dots2(X, unit, i, W, out_dW, m0, md)
        q = row_sq_norm(X, unit, i, B * B)
        for c in range(k):
            yc = 1.0 if y[i] == pos[c] else -1.0
            C = Cp[c] if yc > 0 else Cn[c]
            D = 0.5 / C if squared else 0.0
            m = m0[c] + B * W[d, c]
            xi = 1.0 - yc * m
            if xi > 0.0:
                out_s[c, 0] += C * (xi * xi if squared else xi)
            a = alpha[i, c]
            out_s[c, 1] += a
            out_s[c, 2] += 0.5 * D * a * a
            Q = sigma * q + D
            if Q <= 0.0:
                continue
            G = yc * (m + sigma * (md[c] + B * out_dW[d, c])) - 1.0 + D * a
            na = a - G / Q
            if na < 0.0:
                na = 0.0
            elif not squared and na > C:
                na = C
            delta = na - a
            if delta != 0.0:
                alpha[i, c] = na
                g = delta * yc
                row_axpy(X, unit, i, g, out_dW, c)
                out_dW[d, c] += g * B
