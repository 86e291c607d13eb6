"""Kernels of ``ww``: the exact Walrus subproblem solver and the block epoch of dual block
coordinate descent for the Weston–Watkins SVM (spec_002 §2–§3).

The per-row subproblem (spec §2.1, the β-form: a pure box)::

    min_{0 ≤ b ≤ C}  ½‖b‖² + ½(1ᵀb)² − vᵀb,    v ∈ R^{k−1}

has the unique minimizer ``b = clip_C(v − γ)`` where ``γ = 1ᵀb`` is the root of the
increasing piecewise-linear ``φ(γ) = γ − Σ_j clip_C(v_j − γ)`` (Lemma A.9).
:func:`walrus` finds it exactly (spec §3.5, the robust single-comparison variant): sort the
positive ``v`` once, merge the ENTRY breakpoints ``v_j`` and the EXIT breakpoints ``v_j − C``
as two sorted streams, and stop at the first linear piece whose root lies at or above the
next breakpoint. It cannot exit early or return NaN on rounding (no KKT test is taken as
exact), costs O(k + p log p) for ``p`` positive entries, and allocates nothing.

Slots and classes (spec §1.4, 0-based): row ``i`` of true class ``y`` has ``k − 1`` slots;
slot ``s`` is class ``s + 1``, except slot ``y − 1`` which is class 0 (for ``y ≥ 1``). Its
multiplier ``β_{i,s}`` belongs to the pair (``y``, that class); the weights are
``W = Σ_i x̄_i β_iᵀ π σ_{y_i}``: ``+1ᵀβ_i·x̄_i`` in column ``y`` and ``−β_{i,s}·x̄_i`` in the
column of slot ``s``. ``W`` has shape (n_features + 1, k), the bias weights in the last row
(``_csr.py``'s orientation; ``x̄_i = (x_i, B)``).

Costs: the kernels read the joint problem's :class:`~streamsvm.kernels.Costs` (one "model" per
class, ``pos = 0..k−1``): a row of class ``y`` costs ``C_y = costs.Cp[y]``, and the bias
feature's value is ``costs.B`` (``Cn`` and ``squared`` are not read).
"""

from __future__ import annotations

from ._csr import row_axpys, row_axpys_cols, row_dots, row_dots2
from ._jit import kernel, kernel_inline

__all__ = ["walrus", "ww_epoch", "ww_scores_loss"]


@kernel_inline
def _sift_down(a, start, end):
    """Max-heap sift of ``a[start]`` within ``a[:end]`` (the value moves once: the larger
    children move up into the hole it leaves)."""
    x = a[start]
    root = start
    while True:
        child = 2 * root + 1
        if child >= end:
            break
        if child + 1 < end and a[child + 1] > a[child]:
            child += 1
        if a[child] > x:
            a[root] = a[child]
            root = child
        else:
            break
    a[root] = x


@kernel_inline
def _pop_to(heap, size, vs, P, popped, j):
    """Move the largest remaining values from the max-heap ``heap[:size]`` to ``vs`` (in
    descending order, with their prefix sums ``P``) until ``vs[j]`` is known: ``(size,
    popped)`` after. Lazy: a call costs O(log p) per value moved."""
    while popped <= j and size > 0:
        vs[popped] = heap[0]
        P[popped + 1] = P[popped] + heap[0]
        popped += 1
        size -= 1
        heap[0] = heap[size]
        _sift_down(heap, 0, size)
    return size, popped


@kernel_inline
def _heap_above(v, lo, heap):
    """The entries of ``v`` above ``lo`` as a max-heap in ``heap`` (O(p)); returns their
    number ``p``."""
    p = 0
    for j in range(v.shape[0]):
        if v[j] > lo:
            heap[p] = v[j]
            p += 1
    for start in range((p - 2) // 2, -1, -1):
        _sift_down(heap, start, p)
    return p


@kernel_inline
def _root(heap, p, C, vs, P):
    """The root ``γ`` of ``φ`` from the heap of the ``p > 0`` positive entries: the ENTRY
    breakpoints ``v_j`` and the EXIT breakpoints ``v_j − C`` merged in descending order,
    up to the first linear piece whose root lies at or above the next breakpoint (module
    doc). ``vs`` and ``P`` (``P[0] = 0``) receive the values popped and their prefix sums."""
    size, popped = _pop_to(heap, p, vs, P, 0, 0)
    ie = 0
    ix = 0
    while True:
        # vs[ix] is known (ix ≤ ie); its EXIT exists when vs[ix] > C, and comes only after
        # its own ENTRY (ix < ie): the spec's tie-break alone lets it come first when C is
        # below v's rounding (v − C == v), and m = −1 divides by zero
        if ie < p:
            size, popped = _pop_to(heap, size, vs, P, popped, ie)
        if ix < ie and vs[ix] > C and (ie == p or vs[ix] - C >= vs[ie]):
            ix += 1                             # EXIT: ⟨n+1⟩ joins the upper bound
        else:
            ie += 1                             # ENTRY: ⟨n+m+1⟩ joins the free set
        n = ix
        m = ie - ix
        gam = (C * n + P[ie] - P[ix]) / (m + 1)
        nxt = 0.0                               # the next breakpoint, floored at 0
        if ie < p:
            size, popped = _pop_to(heap, size, vs, P, popped, ie)
            if vs[ie] > nxt:
                nxt = vs[ie]
        if ix < ie and vs[ix] > C and vs[ix] - C > nxt:
            nxt = vs[ix] - C
        if gam >= nxt:
            return gam


@kernel
def walrus(v, C, out_b, scratch, lo=0.0):
    """The exact minimizer of ``½‖b‖² + ½(1ᵀb)² − vᵀb`` over ``[0, C]^{k−1}`` (module doc).

    The entries above ``lo`` are put in a max-heap (O(p)) and taken out in descending order
    only as far as the sweep over the breakpoints goes (the C++ reference's lazy heaps):
    O(p + r log p) for the r largest values visited, O(p log p) at worst. ``lo`` (default
    0) must lie below the root ``γ``: the entries at or below it have ``b_j = 0`` and no
    breakpoint the sweep reaches, so leaving them out changes nothing but the heap's size.

    Parameters
    ----------
    v : ndarray of shape (k − 1,)
    C : float
        The box's upper bound, > 0.
    out_b : ndarray of shape (k − 1,)
        Overwritten with the minimizer.
    scratch : tuple (heap, vs, P)
        float64 arrays of at least k − 1, k − 1 and k entries.
    lo : float
        A lower bound of the root, ≥ 0 (:func:`_ww_row` passes one when it can prove it).

    Returns
    -------
    float
        ``γ = Σ_j b_j``, recomputed from ``out_b``.
    """
    heap, vs, P = scratch
    p = _heap_above(v, lo, heap)
    if p == 0:                                  # Lemma A.9(3): b = 0
        for j in range(v.shape[0]):
            out_b[j] = 0.0
        return 0.0
    P[0] = 0.0
    gam = _root(heap, p, C, vs, P)
    total = 0.0
    for j in range(v.shape[0]):
        b = v[j] - gam
        b = 0.0 if b < 0.0 else (C if b > C else b)
        out_b[j] = b
        total += b
    return total


@kernel_inline
def _slot_class(s, y):
    """The class of slot ``s`` of a row of class ``y`` (module doc)."""
    return 0 if s == y - 1 else s + 1


@kernel_inline
def _ww_loss(z, y, k):
    """``Σ_{c ≠ y} max(0, 1 − (z_y − z_c))``."""
    loss = 0.0
    for c in range(k):
        if c != y:
            t = 1.0 - (z[y] - z[c])
            if t > 0.0:
                loss += t
    return loss


@kernel_inline
def _slot_values(i, yi, Ci, qi, z, beta, gi, v, out):
    """The unconstrained point of row ``i``'s block, ``v_s = β_is + γ_i − g_s/q_i`` for each
    slot ``s`` (``g_s`` the D2 gradient at scores ``z``), into ``v``; ``out[3]`` raised to
    the largest projected-gradient entry. Returns ``(Σ_s clip_C(v_s − γ_i), some v_s >
    0)``: ``φ(γ_i) = γ_i −`` the first."""
    zy = z[yi]
    pos = False
    pgmax = out[3]                              # (a local: no store to out per slot)
    above = 0.0
    for s in range(z.shape[0] - 1):
        c = _slot_class(s, yi)
        g = (zy - z[c]) - 1.0                   # the D2 gradient of slot s
        bs = beta[i, s]
        pg = g if 0.0 < bs < Ci else (min(g, 0.0) if bs <= 0.0 else max(g, 0.0))
        if abs(pg) > pgmax:
            pgmax = abs(pg)
        vs_ = bs + gi - g / qi
        v[s] = vs_
        t = vs_ - gi
        above += 0.0 if t <= 0.0 else (Ci if t > Ci else t)
        if vs_ > 0.0:
            pos = True
    out[3] = pgmax
    return above, pos


@kernel_inline
def _root_floor(gi, above):
    """A lower bound of the root ``γ`` of ``φ`` (0 when none is proven) from the row's
    previous ``γ_i`` and ``φ(γ_i) = γ_i − above``.

    The root moves little from ``γ_i`` once the row settles: ``φ`` has slope ≥ 1, so
    ``φ(γ_i) ≤ δ/2`` gives ``φ(γ_i − δ) < 0`` and ``γ > γ_i − δ`` (δ far above ``φ``'s
    rounding error), and Walrus can leave every ``v_j ≤ γ_i − δ`` out of its heap (with
    1,000 classes nearly all ``v_j`` are positive: the heap of all of them was most of a
    row's time)."""
    delta = 1e-9 * (gi + above)
    lo = gi - delta if gi > 0.0 and gi - above <= 0.5 * delta else 0.0
    return max(lo, 0.0)


@kernel
def _take_step(i, yi, b, beta, dW):
    """``β_i ← b``; ``dW`` (k,) set to the change of the row's coefficients in W's
    columns (module doc). Returns whether ``β_i`` changed.

    A call, not inlined by numba: inlined, ww on dna ran 12–15 % slower (BENCHMARKS.md,
    "Every solver in memory, before and after issue 34"; LLVM inlines the call anyway)."""
    changed = False
    tot = 0.0
    for s in range(beta.shape[1]):
        delta = b[s] - beta[i, s]
        dW[_slot_class(s, yi)] = -delta
        tot += delta
        if delta != 0.0:
            changed = True
        beta[i, s] = b[s]
    dW[yi] = tot
    return changed


@kernel_inline
def _ww_row(i, yi, Ci, qi, z, beta, gamma, v, b, dW, heap, vs, P, out):
    """The exact step of row ``i``'s block of the dual at scores ``z`` (bias included) with
    curvature ``qi`` (``‖x̄_i‖²``, times ``σ'`` in CoCoA+): ``β_i`` and ``γ_i`` updated, ``dW``
    (k,) set to the change of the row's coefficients in W's columns, ``out[3]`` raised to the
    largest projected gradient. Returns 0 when the row is skipped (β = 0 and every margin ≥
    1: no solve), 1 when β did not change, 2 when it did, 3 when ``x̄_i = 0`` (spec §7.5:
    β = C exactly, W does not move)."""
    k = z.shape[0]
    if qi == 0.0:
        for s in range(k - 1):
            beta[i, s] = Ci
        gamma[i] = Ci * (k - 1)
        return 3
    gi = gamma[i]
    above, pos = _slot_values(i, yi, Ci, qi, z, beta, gi, v, out)
    if gi == 0.0 and not pos:                   # β_i = 0 and every margin ≥ 1: b = 0
        return 0
    gnew = walrus(v, Ci, b, (heap, vs, P), _root_floor(gi, above))
    changed = _take_step(i, yi, b, beta, dW)
    gamma[i] = gnew
    return 2 if changed else 1


@kernel_inline
def _axpy_changed(X, unit, i, dW, W, cols):
    """``W[:, c] += dW[c] · x_i`` (bias row excluded: the caller's): over the columns whose
    ``dW[c]`` is not 0 when they are at most half of them (with many classes a step changes
    a few of a row's k − 1 multipliers), else over all (adding 0 changes nothing).
    ``cols``: int64 scratch of k entries."""
    k = dW.shape[0]
    m = 0
    for c in range(k):
        if dW[c] != 0.0:
            cols[m] = c
            m += 1
    if 2 * m > k:
        row_axpys(X, unit, i, dW, W)
    else:
        row_axpys_cols(X, unit, i, dW, cols, m, W)


@kernel
def ww_epoch(X, unit, y, q, order, state, costs, model, scratch, out):
    """One sweep of block coordinate descent over the rows ``order`` of one block, with the
    read-only evaluation of the previous pass's weights fused in (spec §2.2–2.3, §8).

    Parameters
    ----------
    X : tuple (indptr, indices, data)
    unit : bool
    y : ndarray of shape (n_rows,) int64
        Class indices 0..k−1.
    q : ndarray of shape (n_rows,)
        ``‖x̄_i‖²`` (with ``B²``).
    order : ndarray of int64
        The rows to visit, in order.
    state : tuple (beta, gamma, active)
        ``beta`` (n_rows, k − 1) and ``gamma`` (n_rows,) of this block, updated in place;
        ``active`` (n_rows,) uint8 set to 0 for the rows skipped (β = 0 and every margin ≥
        1) — and with ``shrink`` for the rows whose β did not change — 1 for the others.
    costs : Costs
        The joint problem's (module doc): ``Cp`` (k,) the cost of a row of each class, ``B``
        the bias feature's value.
    model : tuple (W, Wprev, evaluate, shrink)
        ``W`` (n_features + 1, k), updated in place; ``Wprev`` the weights at the end of the
        previous pass (only read: with ``evaluate``, its hinge losses are summed).
    scratch : tuple (z, zp, v, b, dW, heap, vs, P, cols)
        float64 arrays: ``z``, ``zp`` and ``dW`` of k entries, ``v``, ``b``, ``heap`` and
        ``vs`` of k − 1, ``P`` of k; ``cols`` int64 of k.
    out : ndarray of shape (4,)
        Added into: [0] ``Σ C_i ·`` WW hinge loss at ``Wprev``, [1] ``Σ γ_i`` of the rows
        visited, after the sweep, [2] rows whose β changed, [3] the largest
        projected-gradient entry seen (before each row's update).
    """
    beta, gamma, active = state
    Cy, B = costs.Cp, costs.B
    W, Wprev, evaluate, shrink = model
    z, zp, v, b, dW, heap, vs, P, cols = scratch
    k = W.shape[1]
    d = W.shape[0] - 1
    for t in range(order.shape[0]):
        i = order[t]
        yi = y[i]
        Ci = Cy[yi]
        if evaluate:            # the previous pass's weights too: their loss on this row
            row_dots2(X, unit, i, W, Wprev, z, zp)
            if B != 0.0:        # (no bias: its k-entry loops are skipped, adding 0)
                for c in range(k):
                    zp[c] += B * Wprev[d, c]
            out[0] += Ci * _ww_loss(zp, yi, k)
        active[i] = 1
        if not evaluate and q[i] != 0.0:
            row_dots(X, unit, i, W, z)
        if B != 0.0:
            for c in range(k):
                z[c] += B * W[d, c]
        step = _ww_row(i, yi, Ci, q[i], z, beta, gamma, v, b, dW, heap, vs, P, out)
        if step == 2:
            _axpy_changed(X, unit, i, dW, W, cols)
            if B != 0.0:
                for c in range(k):
                    W[d, c] += B * dW[c]
            out[2] += 1.0
        elif step == 0 or (step == 1 and shrink):   # skipped, or at its block's minimum
            active[i] = 0
    for t in range(order.shape[0]):
        out[1] += gamma[order[t]]


@kernel
def ww_scores_loss(X, unit, y, W, costs, z, out):
    """``out[0] += Σ_i C_i Σ_{c≠y_i} max(0, 1 − (z_{i,y_i} − z_{i,c}))`` at ``W`` over a
    block (the read-only evaluation of the exact check; ``costs`` the joint problem's, module
    doc); ``z``: scratch of k entries."""
    Cy, B = costs.Cp, costs.B
    k = W.shape[1]
    d = W.shape[0] - 1
    for i in range(X[0].shape[0] - 1):
        row_dots(X, unit, i, W, z)
        for c in range(k):
            z[c] += B * W[d, c]
        out[0] += Cy[y[i]] * _ww_loss(z, y[i], k)
