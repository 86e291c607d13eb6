#!/usr/bin/env python
"""Stream a synthetic libsvm/svmlight file of any size to disk with bounded memory.

Rows are generated and written one block at a time, so a file of 10^8 rows needs no more memory
than one of 10^4.  The data come from a hidden linear model, so the accuracy of a linear SVM on
them is meaningful (well above chance, below 100 % once ``noise`` > 0):

* non-zeros per row: ``1 + Poisson(K - 1)`` capped at ``D`` (duplicates then merged, so a row
  with a heavy-headed feature distribution may end up with a few fewer);
* feature ids: Zipf-like, P(feature j) proportional to ``1 / (j + 1) ** zipf`` (``zipf=0`` is
  uniform), unique and sorted within a row;
* values: standard normal / sqrt(K), rounded to 6 significant digits and written exactly as
  Python's ``'%.6g'`` would, so the parsed value *is* the value the labels were computed from
  (magnitudes are clamped to [1e-12, 1e12]); or exactly ``1`` with ``binary_values``;
* labels: a hidden dense model ``W`` (uniform on [-sqrt 3, sqrt 3], one weight per feature and
  class, defined by a hash of (seed, feature, class), so it is never stored: see
  ``hidden_model``) plus a bias chosen on a fixed pilot sample to balance the classes.
  Binary (``classes=2``): ``sign(x.w + b)`` written ``+1`` / ``-1``; multiclass:
  ``argmax_c x.W[:, c] + b[c]`` written ``1..k``.  Then each label is replaced, with
  probability ``noise``, by a different class chosen uniformly.

Memory: about 200 MB (numpy + numba + one block of ~5 * 10^5 non-zeros), plus 8 bytes per
feature for the Zipf CDF (D = 10^7: ~290 MB), whatever the number of rows.

Determinism: the same arguments (and numpy version) give the same bytes.  Block ``i`` draws from
``SeedSequence(seed, spawn_key=(2, i, stream))``; the block size is a fixed function of
``nnz_per_row`` and ``features`` only; and every random quantity has its own stream, so the file
for ``rows=n`` is exactly the first ``n`` lines of the file for any larger ``rows``.

The output is written to ``OUT + ".partial"`` and renamed to OUT only when complete.  OUT ending
in ``.gz``, ``.bz2``, ``.xz`` or ``.zst`` is compressed (gzip level 1, bz2 level 9, xz preset 1,
zstd level 3; headers carry no name or time stamp, so compressed output is deterministic too).

Example::

    python tools/make_synthetic.py train.svm.gz --rows 1000000 --features 100000 --nnz-per-row 20
"""

from __future__ import annotations

import argparse
import bz2
import gzip
import lzma
import math
import numbers
import os
import queue
import sys
import threading
import time

if __name__ == "__main__":
    # Run as a script: re-enter through the importable module, so that numba's on-disk cache
    # (keyed by file, not module name) is only ever written for ``tools.make_synthetic``.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tools.make_synthetic import main as _main

    sys.exit(_main())

import numba  # noqa: E402
import numpy as np  # noqa: E402

__all__ = ["make_synthetic", "hidden_model", "main"]

#: Rows per generated block (fewer when rows are long, so a block holds about BLOCK_TOKENS
#: non-zeros).  Changing either changes the output bytes.
BLOCK_ROWS = 50_000
BLOCK_TOKENS = 500_000
#: Rows of the fixed pilot sample used to centre the bias (capped at about BLOCK_TOKENS tokens).
PILOT_ROWS = 20_000

_MIN_ABS, _MAX_ABS = 1e-12, 1e12
_POW10 = np.array([float(10 ** i) for i in range(23)])  # exact powers of ten
_STREAM_MODEL, _STREAM_PILOT, _STREAM_BLOCK = 0, 1, 2
_COUNTS, _FEATURES, _VALUES, _FLIP, _TARGET = range(5)
_EMPTY_I32, _EMPTY_I8, _EMPTY_BOOL = (np.empty(0, np.int32), np.empty(0, np.int8),
                                      np.empty(0, np.bool_))
_VALUE_MAX_CHARS = 13  # '-1.23456e-123'; '-0.000123456' is 12

# Cache compiled kernels only under the canonical module name: a cache written while the file
# was imported under another name (e.g. ``make_synthetic``) fails to load under this one.
_CACHE = __name__ == "tools.make_synthetic"

# splitmix64 constants
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_WSCALE = 2.0 * math.sqrt(3.0) * 2.0 ** -53  # (z >> 11) - 2**52 -> [-sqrt 3, sqrt 3)


# --------------------------------------------------------------------------------------------
# text formatting kernel
# --------------------------------------------------------------------------------------------

@numba.njit(cache=_CACHE, nogil=True, inline="always")
def _write_uint(out, pos, x):
    """Write the decimal digits of a non-negative integer at ``out[pos:]``; return the end."""
    nd = 1
    t = x // 10
    while t > 0:
        nd += 1
        t //= 10
    for q in range(nd - 1, -1, -1):
        out[pos + q] = 48 + x % 10
        x //= 10
    return pos + nd


@numba.njit(cache=_CACHE, nogil=True)
def _format_block(labels, indptr, indices, mant, expo, neg, offset, binary_labels, binary_values,
                  out):
    """Write rows as libsvm text into the uint8 buffer ``out``; return the number of bytes.

    Values are given as ``(-1)**neg * mant * 10**(expo - 5)`` with ``100000 <= mant <= 999999``
    and are written the way Python's ``'%.6g'`` writes that number.
    """
    dig = np.empty(6, np.uint8)
    pos = 0
    for i in range(labels.shape[0]):
        lab = labels[i]
        if binary_labels:
            out[pos] = 43 if lab > 0 else 45  # '+' / '-'
            out[pos + 1] = 49  # '1'
            pos += 2
        else:
            pos = _write_uint(out, pos, lab)
        for k in range(indptr[i], indptr[i + 1]):
            out[pos] = 32  # ' '
            pos += 1
            pos = _write_uint(out, pos, indices[k] + offset)
            out[pos] = 58  # ':'
            pos += 1
            if binary_values:
                out[pos] = 49
                pos += 1
                continue
            if neg[k]:
                out[pos] = 45
                pos += 1
            m = mant[k]
            e = expo[k]
            for q in range(5, -1, -1):
                dig[q] = 48 + m % 10
                m //= 10
            nd = 6
            while nd > 1 and dig[nd - 1] == 48:
                nd -= 1
            if -4 <= e < 6:  # fixed notation, as %g does
                if e >= 0:
                    for q in range(e + 1):
                        out[pos] = dig[q] if q < nd else 48
                        pos += 1
                    if nd > e + 1:
                        out[pos] = 46  # '.'
                        pos += 1
                        for q in range(e + 1, nd):
                            out[pos] = dig[q]
                            pos += 1
                else:
                    out[pos] = 48
                    out[pos + 1] = 46
                    pos += 2
                    for q in range(-e - 1):
                        out[pos] = 48
                        pos += 1
                    for q in range(nd):
                        out[pos] = dig[q]
                        pos += 1
            else:  # exponent notation: d[.ddddd]e[+-]XX
                out[pos] = dig[0]
                pos += 1
                if nd > 1:
                    out[pos] = 46
                    pos += 1
                    for q in range(1, nd):
                        out[pos] = dig[q]
                        pos += 1
                out[pos] = 101  # 'e'
                if e < 0:
                    out[pos + 1] = 45
                    ae = -e
                else:
                    out[pos + 1] = 43
                    ae = e
                pos += 2
                if ae >= 100:
                    out[pos] = 48 + ae // 100
                    pos += 1
                    ae %= 100
                out[pos] = 48 + ae // 10
                out[pos + 1] = 48 + ae % 10
                pos += 2
        out[pos] = 10  # '\n'
        pos += 1
    return pos


@numba.njit(cache=_CACHE, nogil=True)
def _quantize(v, mant, expo, neg):
    """Round ``v`` in place to 6 significant digits; fill ``mant``, ``expo``, ``neg`` for output.

    Afterwards ``v[i]`` is exactly the float64 a correct parser reads back from the text written for
    ``(mant[i], expo[i], neg[i])``: only exact powers of ten are used (|5 - expo| <= 17 after
    clamping magnitudes to [1e-12, 1e12]), and ``m / 10**p`` or ``m * 10**p`` is one correctly
    rounded operation on exact operands, which is what strtod returns for that decimal.
    """
    for i in range(v.shape[0]):
        x = v[i]
        ng = x < 0
        a = -x if ng else x
        if not a >= _MIN_ABS:  # also catches NaN (never produced)
            a = _MIN_ABS
        if a > _MAX_ABS:
            a = _MAX_ABS
        e = int(np.floor(np.log10(a)))
        m = 0.0
        for _ in range(4):  # log10 may be off by one next to powers of ten; fix up
            p = 5 - e
            m = np.rint(a * _POW10[p]) if p >= 0 else np.rint(a / _POW10[-p])
            if m >= 1e6:
                e += 1
            elif m < 1e5:
                e -= 1
            else:
                break
        p = 5 - e
        val = m / _POW10[p] if p >= 0 else m * _POW10[-p]
        v[i] = -val if ng else val
        mant[i] = np.int32(m)
        expo[i] = np.int8(e)
        neg[i] = ng


def _format_g6(values) -> list[str]:
    """The tokens written for ``values`` (testing aid): ``'%.6g'`` of the rounded values."""
    v = np.array(values, dtype=np.float64).ravel()
    n = v.shape[0]
    mant, expo, neg = np.empty(n, np.int32), np.empty(n, np.int8), np.empty(n, np.bool_)
    _quantize(v, mant, expo, neg)
    out = np.empty(n * (_VALUE_MAX_CHARS + 6) + 1, np.uint8)
    labels = np.ones(n, np.int64)
    indptr = np.arange(n + 1, dtype=np.int64)
    end = _format_block(labels, indptr, np.zeros(n, np.int64), mant, expo, neg, 0, True, False, out)
    return [line.split(b":", 1)[1].decode() for line in out[:end].tobytes().splitlines()]


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


class _Generator:
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
        _quantize(v, blk.mant, blk.expo, blk.neg)
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


# --------------------------------------------------------------------------------------------
# public API
# --------------------------------------------------------------------------------------------

def _open_compressed(raw, path):
    name = os.fspath(path).lower()
    if name.endswith(".gz"):
        return gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=1, mtime=0)
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw, "wb", compresslevel=9)
    if name.endswith(".xz"):
        return lzma.LZMAFile(raw, "wb", format=lzma.FORMAT_XZ, preset=1)
    if name.endswith(".zst"):
        try:
            import zstandard
        except ImportError as exc:  # pragma: no cover - zstandard is a test/bench extra
            raise ValueError(".zst output needs the 'zstandard' package") from exc
        return zstandard.ZstdCompressor(level=3).stream_writer(raw, closefd=False)
    return None


class _Writer:
    """Writes buffers to ``sink`` in a background thread, so that compression (zlib, bz2, lzma
    and zstd release the GIL) overlaps with generating the next block.  At most one buffer waits."""

    def __init__(self, sink):
        self._sink = sink
        self._queue = queue.Queue(maxsize=1)
        self._error = None
        self._thread = threading.Thread(target=self._run, name="make_synthetic-writer",
                                        daemon=True)
        self._thread.start()

    def _run(self):
        while True:
            item = self._queue.get()
            if item is None:
                return
            if self._error is None:  # after an error keep draining, so put() never blocks
                try:
                    self._sink.write(item)
                except BaseException as exc:
                    self._error = exc

    def write(self, data):
        if self._error is not None:
            raise self._error
        self._queue.put(data)

    def close(self):
        self._queue.put(None)
        self._thread.join()
        if self._error is not None:
            raise self._error

    def abort(self):
        self._error = self._error or RuntimeError("aborted")
        self._queue.put(None)
        self._thread.join()


def _check(name, value, ok, what):
    if isinstance(value, bool) or not ok(value):
        raise ValueError(f"{name} must be {what}, got {value!r}")


def make_synthetic(path, *, rows, features, nnz_per_row=10, classes=2, noise=0.05, zipf=1.1,
                   binary_values=False, seed=0, zero_based=False, progress=True,
                   _block_rows=None) -> dict:
    """Stream a synthetic libsvm file to ``path`` (see the module docstring) and return a summary.

    Memory is bounded by one block (about 5 * 10^5 non-zeros) plus 8 bytes per feature for the
    Zipf CDF, whatever ``rows`` is.  ``_block_rows`` overrides the internal block size (for tests
    only: it changes the output).

    Returns a dict with ``path``, ``rows``, ``features``, ``nnz`` (non-zeros written), ``bytes``
    (size of the file on disk), ``text_bytes`` (uncompressed), ``seconds``, ``mb_per_s``
    (uncompressed MB written per second, 1 MB = 10^6 bytes) and ``label_counts``
    ({label: rows}; labels -1/+1, or 1..k).
    """
    integral, real = numbers.Integral, numbers.Real
    _check("rows", rows, lambda v: isinstance(v, integral) and v >= 0, "an integer >= 0")
    _check("features", features, lambda v: isinstance(v, integral) and v >= 1, "an integer >= 1")
    _check("nnz_per_row", nnz_per_row, lambda v: isinstance(v, integral) and v >= 1,
           "an integer >= 1")
    _check("classes", classes, lambda v: isinstance(v, integral) and v >= 2, "an integer >= 2")
    _check("noise", noise, lambda v: isinstance(v, real) and 0 <= v <= 1,
           "a number in [0, 1]")
    _check("zipf", zipf, lambda v: isinstance(v, real) and 0 <= v < math.inf,
           "a finite number >= 0")
    _check("seed", seed, lambda v: isinstance(v, integral) and v >= 0, "an integer >= 0")
    rows, features, nnz_per_row, classes, seed = map(int, (rows, features, nnz_per_row, classes,
                                                           seed))
    path = os.fspath(path)
    partial = path + ".partial"
    t0 = time.perf_counter()
    gen = _Generator(features=features, nnz_per_row=nnz_per_row, classes=classes,
                     noise=float(noise), zipf=float(zipf), binary_values=bool(binary_values),
                     seed=seed, block_rows=_block_rows)
    offset = 0 if zero_based else 1
    idx_chars = len(str(features - 1 + offset))
    label_chars = 2 if gen.binary_labels else len(str(classes))
    tok_chars = 1 + idx_chars + 1 + (1 if binary_values else _VALUE_MAX_CHARS)
    counts = np.zeros(classes, np.int64)  # binary: [-1, +1]
    nnz = 0
    text_bytes = 0

    from tqdm import tqdm

    bar = tqdm(total=rows, unit="row", unit_scale=True, disable=not progress, file=sys.stderr,
               desc=os.path.basename(path), dynamic_ncols=True, mininterval=0.5)
    raw = open(partial, "wb")
    out = writer = None
    try:
        out = _open_compressed(raw, path)
        writer = _Writer(out if out is not None else raw)
        for b in range(-(-rows // gen.block_rows)):
            n = min(gen.block_rows, rows - b * gen.block_rows)
            blk = gen.block(b, n)
            y, feats = blk.labels, blk.feats
            if binary_values:
                mant, expo, neg = _EMPTY_I32, _EMPTY_I8, _EMPTY_BOOL
            else:
                mant, expo, neg = blk.mant, blk.expo, blk.neg
            # a fresh buffer per block: the writer thread may still hold the previous ones
            buf = np.empty(n * (label_chars + 1) + feats.size * tok_chars, np.uint8)
            end = _format_block(y, blk.indptr, feats, mant, expo, neg, offset, gen.binary_labels,
                                bool(binary_values), buf)
            del blk
            writer.write(memoryview(buf)[:end])
            del buf
            nnz += feats.size
            text_bytes += end
            if gen.binary_labels:
                counts += np.bincount((y > 0).astype(np.int64), minlength=2)
            else:
                counts += np.bincount(y - 1, minlength=classes)
            bar.update(n)
            if progress:
                dt = time.perf_counter() - t0
                bar.set_postfix_str(f"{text_bytes / 1e6 / max(dt, 1e-9):.0f} MB/s, "
                                    f"{text_bytes / 1e6:,.0f} MB", refresh=False)
        writer.close()
        if out is not None:
            out.close()
        raw.close()
        os.replace(partial, path)
    except BaseException:
        bar.close()
        if writer is not None:
            writer.abort()
        if out is not None:
            try:
                out.close()
            except Exception:
                pass
        raw.close()
        try:
            os.remove(partial)
        except OSError:
            pass
        raise
    bar.close()
    seconds = time.perf_counter() - t0
    labels = [-1, 1] if gen.binary_labels else list(range(1, classes + 1))
    return {
        "path": path,
        "rows": rows,
        "features": features,
        "nnz": int(nnz),
        "bytes": os.path.getsize(path),
        "text_bytes": int(text_bytes),
        "seconds": seconds,
        "mb_per_s": text_bytes / 1e6 / seconds if seconds > 0 else float("inf"),
        "label_counts": {lab: int(c) for lab, c in zip(labels, counts)},
    }


def hidden_model(*, features, nnz_per_row=10, classes=2, zipf=1.1, binary_values=False, seed=0):
    """The hidden ``(W, bias)`` behind ``make_synthetic`` with the same arguments (dense arrays)."""
    gen = _Generator(features=features, nnz_per_row=nnz_per_row, classes=classes, noise=0.0,
                     zipf=zipf, binary_values=binary_values, seed=seed)
    return gen.hidden_model()


# --------------------------------------------------------------------------------------------
# command line
# --------------------------------------------------------------------------------------------

def _build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="make_synthetic.py",
        description="Stream a synthetic libsvm/svmlight file (labels from a hidden linear model, "
                    "Zipf-distributed sparse features) of any size to disk with bounded memory. "
                    "Same arguments give the same bytes; the file for --rows n is the first n "
                    "lines of the file for any larger --rows.",
        epilog="OUT ending in .gz/.bz2/.xz/.zst is compressed. The file is written to "
               "OUT.partial and renamed when complete. Example: python tools/make_synthetic.py "
               "train.svm.gz --rows 1000000 --features 100000 --nnz-per-row 20",
    )
    p.add_argument("out", metavar="OUT", help="output path (.gz, .bz2, .xz, .zst compress)")
    p.add_argument("--rows", type=int, required=True, help="number of rows (examples)")
    p.add_argument("--features", type=int, required=True, help="number of features D")
    p.add_argument("--nnz-per-row", type=int, default=10, metavar="K",
                   help="mean non-zeros per row: 1 + Poisson(K-1), capped at D, de-duplicated "
                        "(default: %(default)s)")
    p.add_argument("--classes", type=int, default=2,
                   help="2: labels -1/+1; k > 2: labels 1..k, the argmax of k hidden models "
                        "(default: %(default)s)")
    p.add_argument("--noise", type=float, default=0.05,
                   help="fraction of labels replaced by a different class at random "
                        "(default: %(default)s)")
    p.add_argument("--zipf", type=float, default=1.1,
                   help="feature j is drawn with probability proportional to 1/(j+1)^zipf "
                        "(0: uniform; default: %(default)s)")
    p.add_argument("--binary-values", action="store_true",
                   help="write every value as exactly 1 (idx:1)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    p.add_argument("--zero-based", action="store_true",
                   help="write 0-based feature indices (default: 1-based, the libsvm convention)")
    p.add_argument("--quiet", action="store_true",
                   help="no progress bar (the one-line summary is still printed on stdout)")
    return p


def main(argv=None) -> int:
    parser = _build_parser()
    args = parser.parse_args(argv)
    try:
        summary = make_synthetic(
            args.out, rows=args.rows, features=args.features, nnz_per_row=args.nnz_per_row,
            classes=args.classes, noise=args.noise, zipf=args.zipf,
            binary_values=args.binary_values, seed=args.seed, zero_based=args.zero_based,
            progress=not args.quiet)
    except ValueError as exc:
        parser.error(str(exc))
    except KeyboardInterrupt:
        print("interrupted; no output written", file=sys.stderr)
        return 130
    labels = " ".join(f"{'+' if lab > 0 and args.classes == 2 else ''}{lab}:{c}"
                      for lab, c in summary["label_counts"].items())
    print(f"{summary['path']}: {summary['rows']} rows, {summary['nnz']} non-zeros, "
          f"{summary['bytes']} bytes ({summary['text_bytes']} uncompressed) in "
          f"{summary['seconds']:.2f} s = {summary['mb_per_s']:.1f} MB/s; labels {labels}")
    return 0

