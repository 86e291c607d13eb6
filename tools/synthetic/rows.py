"""Rows of a synthetic data set (``tools/make_synthetic.py``, whose docstring says how they are
drawn): the hidden model's weights hashed from (seed, feature, class), Zipf feature ids, and the
:class:`Generator` that yields block ``i`` of any data set from its own random streams."""

from __future__ import annotations

import math

import numba
import numpy as np

from .text import quantize

__all__ = ["BLOCK_ROWS", "BLOCK_TOKENS", "PILOT_ROWS", "Generator"]

#: Rows per generated block (fewer when rows are long, so a block holds about BLOCK_TOKENS
#: non-zeros).  Changing either changes the output bytes.
BLOCK_ROWS = 50_000
BLOCK_TOKENS = 500_000
#: Rows of the fixed pilot sample used to centre the bias (capped at about BLOCK_TOKENS tokens).
PILOT_ROWS = 20_000
_STREAM_MODEL, _STREAM_PILOT, _STREAM_BLOCK = 0, 1, 2
_COUNTS, _FEATURES, _VALUES, _FLIP, _TARGET = range(5)

# Cache compiled kernels only under the canonical module name (as in ``text.py``).
_CACHE = __name__ == "tools.synthetic.rows"

# splitmix64 constants
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_WSCALE = 2.0 * math.sqrt(3.0) * 2.0 ** -53  # (z >> 11) - 2**52 -> [-sqrt 3, sqrt 3)


@numba.njit(cache=_CACHE)
def _hash_weight(key, idx):
    """Hidden weight number ``idx``: splitmix64 of ``key + idx * golden``, mapped to
    ``[-sqrt 3, sqrt 3)`` with a single rounding (no FMA can change it)."""
    z = key + idx * _GOLDEN
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    z = z ^ (z >> np.uint64(31))
    s = np.int64(z >> np.uint64(11)) - np.int64(1 << 52)  # exact, |s| <= 2**52
    return np.float64(s) * _WSCALE


@numba.njit(cache=_CACHE, nogil=True)
def _dense_weights(key, features, kw):
    W = np.empty((features, kw))
    for j in range(features):
        for c in range(kw):
            W[j, c] = _hash_weight(key, np.uint64(j) * np.uint64(kw) + np.uint64(c))
    return W


@numba.njit(cache=_CACHE, nogil=True)
def _row_scores(indptr, feats, vals, has_vals, key, kw, bias, out):
    """``out[i, c] = sum_t W[feats[t], c] * vals[t] + bias[c]`` over the non-zeros of row i."""
    for i in range(indptr.shape[0] - 1):
        for c in range(kw):
            acc = 0.0
            for t in range(indptr[i], indptr[i + 1]):
                w = _hash_weight(key, np.uint64(feats[t]) * np.uint64(kw) + np.uint64(c))
                acc += w * vals[t] if has_vals else w
            out[i, c] = acc + bias[c]


@numba.njit(cache=_CACHE, nogil=True)
def _draw_features(u, cdf, guide, out):
    """``out = np.minimum(np.searchsorted(cdf, u, side="right"), len(cdf) - 1)``, but a binary
    search only within the guide-table bucket of each ``u`` (about 4x faster than searchsorted)."""
    G = guide.shape[0] - 1
    last = cdf.shape[0] - 1
    for t in range(u.shape[0]):
        x = u[t]
        b = min(int(x * G), G - 1)  # exact: G is a power of two (and x < 1)
        lo = guide[b]
        hi = min(guide[b + 1], last)
        while lo < hi:  # first j in [lo, hi] with cdf[j] > x (hi if none)
            mid = (lo + hi) >> 1
            if cdf[mid] > x:
                hi = mid
            else:
                lo = mid + 1
        out[t] = lo


@numba.njit(cache=_CACHE, nogil=True)
def _sort_unique_rows(counts, f, indptr):
    """Sort and de-duplicate each row's segment of ``f`` (rows given by ``counts``), compacting
    ``f`` in place; fill ``indptr``; return the number of non-zeros kept."""
    read = 0
    write = 0
    indptr[0] = 0
    for i in range(counts.shape[0]):
        c = counts[i]
        seg = f[read:read + c]
        if c <= 32:  # insertion sort
            for a in range(1, c):
                x = seg[a]
                b = a - 1
                while b >= 0 and seg[b] > x:
                    seg[b + 1] = seg[b]
                    b -= 1
                seg[b + 1] = x
        else:
            seg.sort()
        last = -1
        for a in range(c):  # write <= read + a, so nothing unread is overwritten
            x = seg[a]
            if x != last:
                f[write] = x
                write += 1
                last = x
        read += c
        indptr[i + 1] = write
    return write


# --------------------------------------------------------------------------------------------
# the generator
# --------------------------------------------------------------------------------------------

class _Block:
    """Rows of one block: labels, CSR structure, and (unless binary values) quantised values."""

    __slots__ = ("labels", "indptr", "feats", "values", "mant", "expo", "neg")


class Generator:
    """All random structure of one synthetic data set; ``block(i, n)`` gives rows of block i."""

    def __init__(self, *, features, nnz_per_row, classes, noise, zipf, binary_values, seed,
                 block_rows=None):
        self.D = features
        self.K = nnz_per_row
        self.k = classes
        self.binary_labels = classes == 2
        self.kw = 1 if self.binary_labels else classes  # columns of the hidden model
        self.noise = noise
        self.binary_values = binary_values
        self.seed = seed
        per_row = min(nnz_per_row, features)
        self.block_rows = block_rows or max(1, min(BLOCK_ROWS, BLOCK_TOKENS // per_row))
        # Zipf-like CDF over features (float64: tail probabilities are far below float32 eps)
        cdf = np.arange(1, features + 1, dtype=np.float64)
        np.power(cdf, -zipf, out=cdf)
        np.cumsum(cdf, out=cdf)
        cdf /= cdf[-1]
        self.cdf = cdf
        # guide table: guide[i] = first j with cdf[j] > i / G (G a power of two, so u * G exact)
        G = 1 << min(20, max(1, (features - 1).bit_length()))
        self.guide = np.searchsorted(cdf, np.arange(G + 1) / G, side="right")
        self.key = np.random.SeedSequence(seed, spawn_key=(_STREAM_MODEL,)).generate_state(
            1, np.uint64)[0]
        self.bias = np.zeros(self.kw)
        self._centre_bias()

    def hidden_model(self):
        """``(W, bias)``: W dense, (D,) binary or (D, k) multiclass; for tests and benchmarks."""
        W = _dense_weights(self.key, self.D, self.kw)
        if self.kw == 1:
            return W[:, 0], float(self.bias[0])
        return W, self.bias.copy()

    def _scores(self, blk):
        n = blk.indptr.shape[0] - 1
        s = np.empty((n, self.kw))
        vals = blk.values if blk.values is not None else np.empty(0)
        _row_scores(blk.indptr, blk.feats, vals, blk.values is not None, self.key, self.kw,
                    self.bias, s)
        return s

    def _centre_bias(self):
        """Choose the bias on a fixed pilot sample so that classes come out roughly balanced."""
        n = max(1000, min(PILOT_ROWS, BLOCK_TOKENS // min(self.K, self.D)))
        seeds = [np.random.SeedSequence(self.seed, spawn_key=(_STREAM_PILOT, s)) for s in range(5)]
        s = self._scores(self._sample(seeds, n))
        if self.kw == 1:
            self.bias[0] = -float(np.median(s[:, 0]))
            return
        # multiclass: centre each class score, then nudge the biases towards equal class shares
        self.bias = -s.mean(axis=0)
        step = float(np.std(s + self.bias))
        for it in range(200):
            share = np.bincount(np.argmax(s + self.bias, axis=1), minlength=self.kw) / n
            if np.max(np.abs(share - 1.0 / self.kw)) < 0.2 / self.kw:
                break
            self.bias += step * (1.0 / self.kw - share) / (1 + it) ** 0.5

    def _sample(self, seeds, n):
        """``n`` sparse rows (labels not yet set) from the per-quantity seeds ``seeds``."""
        blk = _Block()
        counts = np.random.default_rng(seeds[_COUNTS]).poisson(self.K - 1, n)
        counts += 1
        np.minimum(counts, self.D, out=counts)
        u = np.random.default_rng(seeds[_FEATURES]).random(int(counts.sum()))
        f = np.empty(u.shape[0], np.int64)
        _draw_features(u, self.cdf, self.guide, f)
        del u
        blk.indptr = np.empty(n + 1, np.int64)
        nnz = _sort_unique_rows(counts, f, blk.indptr)
        blk.feats = f[:nnz]
        if self.binary_values:
            blk.values = blk.mant = blk.expo = blk.neg = None
            return blk
        v = np.random.default_rng(seeds[_VALUES]).standard_normal(nnz)
        v *= 1.0 / math.sqrt(self.K)
        blk.mant, blk.expo, blk.neg = (np.empty(nnz, np.int32), np.empty(nnz, np.int8),
                                       np.empty(nnz, np.bool_))
        quantize(v, blk.mant, blk.expo, blk.neg)
        blk.values = v
        return blk

    def block(self, b, n):
        """Rows ``[b * block_rows, b * block_rows + n)`` of the data set, labels included."""
        seeds = [np.random.SeedSequence(self.seed, spawn_key=(_STREAM_BLOCK, b, s))
                 for s in range(5)]
        blk = self._sample(seeds, n)
        s = self._scores(blk)
        if self.kw == 1:
            y = np.where(s[:, 0] > 0, 1, -1).astype(np.int64)
        else:
            y = np.argmax(s, axis=1).astype(np.int64) + 1
        flip = np.random.default_rng(seeds[_FLIP]).random(n) < self.noise
        if self.kw == 1:
            y[flip] *= -1
        else:
            shift = np.random.default_rng(seeds[_TARGET]).integers(1, self.k, n)
            y = np.where(flip, (y - 1 + shift) % self.k + 1, y)
        blk.labels = y
        return blk
