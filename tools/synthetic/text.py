"""libsvm text of synthetic rows (``tools/make_synthetic.py``): values rounded to 6 significant
digits and written byte for byte as Python's ``'%.6g'`` would, so the parsed value *is* the value
the labels were computed from."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["VALUE_MAX_CHARS", "format_block", "quantize"]

_MIN_ABS, _MAX_ABS = 1e-12, 1e12
_POW10 = np.array([float(10 ** i) for i in range(23)])  # exact powers of ten
VALUE_MAX_CHARS = 13  # '-1.23456e-123'; '-0.000123456' is 12

# Cache compiled kernels only under the canonical module name: a cache written while the file
# was imported under another name fails to load under this one.
_CACHE = __name__ == "tools.synthetic.text"


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
def format_block(labels, indptr, indices, mant, expo, neg, offset, binary_labels, binary_values,
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
def quantize(v, mant, expo, neg):
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
    quantize(v, mant, expo, neg)
    out = np.empty(n * (VALUE_MAX_CHARS + 6) + 1, np.uint8)
    labels = np.ones(n, np.int64)
    indptr = np.arange(n + 1, dtype=np.int64)
    end = format_block(labels, indptr, np.zeros(n, np.int64), mant, expo, neg, 0, True, False, out)
    return [line.split(b":", 1)[1].decode() for line in out[:end].tobytes().splitlines()]
