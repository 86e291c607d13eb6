"""AVSF kernels (spec_003 §2–3): Algorithm 4's epoch schedule with exact marginals, and dual
coordinate descent visits with Algorithm 5's preference adaptation.

A **visit list** is an int64 array of codes ``((i·k + c)·NSRC + s)``: row ``i`` of source
``s``, for model ``c`` (one-vs-rest: every model has its own preferences and schedule). The
sources of one kernel call are two resident store blocks and the hot cache (``NSRC = 3``),
so the visits of the rows streaming by and of the cached rows interleave at random in one
loop (spec §3.6 item 3). Built on the CSR primitives of ``_csr.py``, the coordinate step of
``_dcd.py`` and its pair (``_dcd_cert.pair``); ``W`` (n_features + 1, k), the bias weight
last (``_csr.bias_at``), and ``prob`` (the :class:`~streamsvm.kernels.Costs` record) as
there (one model's ``W`` a vector, ``w_at``).
"""

from __future__ import annotations

import math

import numpy as np

from ._csr import bias_add, bias_at, row_axpy, row_dot_sq
from ._dcd import _step
from ._dcd_cert import pair
from ._jit import kernel, kernel_inline
from ._prefetch import prefetch, prefetch2, prefetch_row
from ._rng import shuffle_prefix, splitmix

__all__ = ["NSRC", "alg4_counts", "avsf_codes", "avsf_shuffle", "avsf_visits", "avsf_group",
           "avsf_masses"]

NSRC = 3
"""Sources of a visit list: two resident blocks and the hot cache."""
_AHEAD = 6
"""Visits ahead at which a row's CSR slice is prefetched (as in ``_dcd.py``)."""
_AHEAD_STATE = 12
"""Visits ahead at which a row's pointer, label, dual and preference are prefetched, so
that the row's prefetch at ``_AHEAD`` does not wait for its pointer (``_dcd.py``)."""


@kernel_inline
def _shares(w, cached, out):
    """``out[i] = w_i / N_i`` with ``N_i = Σ_{t ≥ i} w_t`` the weight not yet visited at
    entry ``i`` of Algorithm 4 (0 where ``w_i ≤ 0`` or ``cached[i]``; ``cached`` may be None),
    summed afresh from the end: no drift from subtracting, the last entry of positive weight
    gets exactly 1, and the divisions are off the sequential chain of the counts. Returns the
    last entry of positive weight (−1: none)."""
    N = 0.0
    last = -1
    for i in range(w.shape[0] - 1, -1, -1):
        wi = w[i]
        if cached is not None:
            if cached[i] != 0:
                wi = 0.0
        if wi > 0.0:
            N += wi
            out[i] = wi / N
            if last < 0:
                last = i
        else:
            out[i] = 0.0
    return last


@kernel_inline
def _round(mf, rem, s):
    """Algorithm 4's stochastic rounding of ``mf ≥ 0``, at most ``rem``: ``⌊mf⌋ + 1`` with
    probability ``mf − ⌊mf⌋``. One draw always and no branch on it (a branch on a coin flip
    mispredicts half the time); ``(count, state)``."""
    s, u = splitmix(s)
    fl = np.floor(mf)
    return min(np.int64(fl) + np.int64(u < mf - fl), rem), s


@kernel
def alg4_counts(w, L, counts, state):
    """Algorithm 4 of the paper (spec §2.3) with the spec's guards: visit counts with
    ``Σ counts = L`` and ``E[counts[i]] = L·w_i/Σw``.

    Entry ``i`` gets the stochastic rounding of ``m = w_i·(L − j)/N_i`` (``j`` visits given
    so far, ``N_i`` the weight not yet visited: :func:`_shares`), so uniform weights give
    one visit each when ``L`` is their count (the product ``(w_i/N_i)·(L − j)`` is 1 within
    an ulp: a count of 0 or 2 has a chance below 1e-15 a row); the last entry of positive
    weight takes the remainder (its share is exactly 1), and no count exceeds what is left.
    The shares are divided out first and the sequential loop only multiplies: the quotient
    ``w_i·(L − j)/N_i`` of the paper's print, a division chained from row to row, made the
    schedule cost 17 ns a row on a9a against 7 ns now (scratch timing, 32,561 rows).

    Parameters
    ----------
    w : ndarray of shape (n,), float64
        Non-negative weights (0: never visited).
    L : int
        Budget.
    counts : ndarray of shape (n,), int64
        Overwritten (used as scratch for the shares first).
    state : ndarray of shape (1,), uint64
        SplitMix64 state (``_rng.py``).

    Returns
    -------
    int
        ``Σ counts``: ``L``, or 0 when every weight is 0.
    """
    n = w.shape[0]
    share = counts.view(np.float64)
    last = _shares(w, None, share)
    s = state[0]
    rem = L
    for i in range(n):
        m = 0
        if i <= last:
            m, s = _round(share[i] * rem, rem, s)
            rem -= m
        counts[i] = m
    state[0] = s
    return L - rem if last >= 0 else 0


@kernel
def avsf_codes(p, cached, budgets, src, out, off, wbuf, state):
    """The visits of one source's rows for every model, appended to a visit list.

    For model ``c``, Algorithm 4 (:func:`alg4_counts`) over the rows' preferences
    ``p[:, c]`` (0 for the rows ``cached`` marks: the hot cache schedules those) with budget
    ``budgets[c]``, each count written at once as that many codes (the shares first, then
    one sequential loop of rounding and writing).

    Parameters
    ----------
    p : ndarray of shape (n, k)
    cached : ndarray of shape (n,), uint8
    budgets : ndarray of shape (k,), int64
    src : int
        The source id in the codes (module doc).
    out : ndarray of int64
        The visit list, written from ``off``.
    wbuf : ndarray of shape (≥ n,), float64
        Scratch (the shares).
    state : ndarray of shape (1,), uint64

    Returns
    -------
    int
        The new end of the list.
    """
    n, k = p.shape
    s = state[0]
    cap = out.shape[0]
    for c in range(k):
        rem = budgets[c]
        if rem <= 0:
            continue
        last = _shares(p[:, c], cached, wbuf)
        for i in range(last + 1):
            m, s = _round(wbuf[i] * rem, rem, s)
            # the first code written whatever the count (overwritten when 0): no branch on
            # the count, which is 0 or 1 at random for most rows
            code = (i * k + c) * NSRC + src
            if off < cap:
                out[off] = code
            for t in range(1, m):
                out[off + t] = code
            off += m
            rem -= m
    state[0] = s
    return off


@kernel
def avsf_shuffle(codes, n, state):
    """Fisher–Yates shuffle of ``codes[:n]`` (Algorithm 4 emits them grouped, spec §5.6)."""
    shuffle_prefix(codes, n, state)


@kernel_inline
def _decode(code, k):
    """``(source, row, model)`` of a visit code (module doc); one model: no division by a
    runtime ``k``."""
    rc = code // NSRC
    if k == 1:
        return code % NSRC, rc, 0
    return code % NSRC, rc // k, rc % k


@kernel_inline
def _prefetch_ahead(Xs, ys, alphas, ps, codes, t, n, unit, k):
    """Prefetch ahead of visit ``t`` of ``codes[:n]``: the pointer, label, dual and
    preference of the visit ``_AHEAD_STATE`` on, the CSR slice of the one ``_AHEAD`` on."""
    if t + _AHEAD_STATE < n:
        s, i, c = _decode(codes[t + _AHEAD_STATE], k)
        prefetch(Xs[s][0], i)
        prefetch(ys[s], i)
        prefetch2(alphas[s], i, c)
        prefetch2(ps[s], i, c)
    if t + _AHEAD < n:
        s, i, _ = _decode(codes[t + _AHEAD], k)
        prefetch_row(Xs[s], unit, i)


@kernel_inline
def _visit(X, unit, y, i, c, alpha, W, prob, st):
    """LIBLINEAR's coordinate step on the pair (row ``i``, model ``c``), taken when its
    projected gradient exceeds 1e-12; that gradient into the epoch's extremes ``st[c, 1:3]``,
    the change of the duals into the sums ``st[c, 3:5]``. Returns the step's gain, the
    decrease of the dual objective (0 without a step)."""
    B = prob[4]
    yi, Ci, U, D = pair(y, i, c, prob)
    dot, sq = row_dot_sq(X, unit, i, W, c)
    q = sq + B * B + D
    a = alpha[i, c]
    G = yi * (dot + bias_at(W, c) * B) - 1.0 + D * a
    PG = G
    if a == 0.0:
        PG = min(G, 0.0)
    elif a == U:
        PG = max(G, 0.0)
    if PG > st[c, 1]:
        st[c, 1] = PG
    if PG < st[c, 2]:
        st[c, 2] = PG
    gain = 0.0
    if abs(PG) > 1e-12:
        an = _step(G, a, q, U)
        mu = an - a
        if mu != 0.0:
            alpha[i, c] = an
            row_axpy(X, unit, i, mu * yi, W, c)
            bias_add(W, c, mu * yi * B)
            st[c, 3] += mu
            st[c, 4] += 0.5 * D * (an * an - a * a)
            gain = max(-mu * (G + 0.5 * mu * q), 0.0)
    return gain


@kernel_inline
def _adapt(p, i, c, gain, adapt, still, st):
    """Algorithm 5 after a visit of the pair (``i``, ``c``) with ``gain``: in the first
    epoch ``Δ_ref = st[c, 0]`` sums the mean gain and the preferences stay; after it,
    ``p[i, c]`` is scaled by ``exp(min(rate·(gain/Δ_ref − 1), hmax))`` (``still`` for no
    gain) within ``[pmin, pmax]``, and ``Δ_ref`` becomes the running mean of the gains."""
    first, rate, pmin, pmax, hmax, inv_l = adapt
    dref = st[c, 0]
    if first:
        st[c, 0] = dref + gain * inv_l
    else:
        f = 1.0
        if dref > 0.0:
            f = still if gain == 0.0 else math.exp(min(rate * (gain / dref - 1.0), hmax))
        p[i, c] = min(max(p[i, c] * f, pmin), pmax)
        st[c, 0] = (1.0 - inv_l) * dref + gain * inv_l


@kernel
def avsf_visits(Xs, ys, alphas, ps, codes, n, unit, W, prob, adapt, st):
    """Dual coordinate descent visits (spec §2.8): LIBLINEAR's coordinate step, the gain of
    the step and Algorithm 5's preference update, in the order of ``codes[:n]``.

    Parameters
    ----------
    Xs, ys, alphas, ps : tuples of ``NSRC`` per source
        CSR rows, labels, duals ``(n_s, k)`` and preferences ``(n_s, k)`` (``‖x_i‖²`` is
        summed with the margin, in the same read of the row).
    codes, n : the visit list (module doc)
    unit : bool
    W, prob : see the module doc (``W`` updated in place)
    adapt : tuple (first, rate, pmin, pmax, hmax, inv_l)
        ``first``: the first epoch (Δ_ref accumulates the mean gain, preferences stay);
        ``rate`` c, the bounds of p, ``hmax = ln(pmax/pmin)`` and ``1/ℓ`` (the global ℓ).
    st : ndarray of shape (k, 5)
        Per model ``[Δ_ref, PG max, PG min, Σ α, ½ Σ D α²]``: Δ_ref and the sums carried
        over calls, the PG extremes over this epoch's visits.
    """
    # W is passed on as it is: with a (W, wb) tuple unpacked in the loop (in _visit), numba
    # 0.68.1 compiled the visits without the step's update of wb (_jit.py)
    k = prob[0].shape[0]
    # the factor of a visit without gain: exp(min(c·(0/Δ_ref − 1), hmax)) = exp(−c)
    still = math.exp(-adapt[1])
    for t in range(n):
        _prefetch_ahead(Xs, ys, alphas, ps, codes, t, n, unit, k)
        s, i, c = _decode(codes[t], k)
        gain = _visit(Xs[s], unit, ys[s], i, c, alphas[s], W, prob, st)
        _adapt(ps[s], i, c, gain, adapt, still, st)


@kernel
def avsf_masses(p, cached, bounds, out_mass, hist, lo, width):
    """Per-block preference masses of the rows not cached, and a histogram of their
    hottest preference (for the hot cache's admission threshold).

    Parameters
    ----------
    p : ndarray of shape (n, k)
    cached : ndarray of shape (n,), uint8
    bounds : ndarray of shape (n_blocks + 1,), int64
        Row ranges of the blocks.
    out_mass : ndarray of shape (n_blocks, k)
        Overwritten: ``Σ p[i, c]`` over each block's rows not cached.
    hist : ndarray of shape (n_bins,), int64
        Adds each row's bin of ``log(max_c p[i, c])``: ``(log p − lo) / width``, clipped.
    lo, width : float
    """
    k = p.shape[1]
    nb = hist.shape[0]
    for b in range(bounds.shape[0] - 1):
        for c in range(k):
            out_mass[b, c] = 0.0
        for i in range(bounds[b], bounds[b + 1]):
            if cached[i] != 0:
                continue
            top = 0.0
            for c in range(k):
                v = p[i, c]
                out_mass[b, c] += v
                if v > top:
                    top = v
            j = np.int64((math.log(top) - lo) / width) if top > 0.0 else 0
            hist[min(max(j, 0), nb - 1)] += 1


@kernel
def avsf_group(Xs, ys, alphas, ps, hots, budgets, n_blocks, H, scratch, unit, W, prob,
               adapt, st, admit):
    """One resident group in one call: the visits of its blocks' rows (:func:`avsf_codes`
    over each block's preferences, its hot rows left out) and the hot rows' slice ``H``,
    shuffled together and run (:func:`avsf_visits`); then the admission candidates counted.

    Parameters
    ----------
    Xs, ys, alphas, ps : as :func:`avsf_visits` (sources 0 and 1 the blocks, 2 the cache)
    hots : tuple of two uint8 arrays
        The blocks' hot flags.
    budgets : ndarray of shape (2, k), int64
        Each block's visits per model (the first ``n_blocks`` rows used).
    H : ndarray of int64
        The hot rows' visit codes for this group.
    scratch : tuple (codes, wbuf, state)
        ``codes`` long enough for every visit, ``wbuf`` for a block's rows,
        ``state`` the group's SplitMix64 state.
    admit : tuple (tau, floor, out_count)
        ``out_count[j]``: rows of block ``j`` not hot whose largest preference is at least
        ``tau`` and above ``floor``.

    Returns
    -------
    int
        The visits run.
    """
    codes, wbuf, state = scratch
    off = 0
    for j in range(n_blocks):
        off = avsf_codes(ps[j], hots[j], budgets[j], j, codes, off, wbuf, state)
    for t in range(H.shape[0]):
        codes[off + t] = H[t]
    off += H.shape[0]
    shuffle_prefix(codes, off, state)
    avsf_visits(Xs, ys, alphas, ps, codes, off, unit, W, prob, adapt, st)
    tau, floor, out_count = admit
    for j in range(n_blocks):
        p, hot = ps[j], hots[j]
        m = 0
        for i in range(p.shape[0]):
            if hot[i] != 0:
                continue
            top = p[i, 0]
            for c in range(1, p.shape[1]):
                top = max(top, p[i, c])
            if top >= tau and top > floor:
                m += 1
        out_count[j] = m
    return off
