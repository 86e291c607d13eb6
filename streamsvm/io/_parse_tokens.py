"""The numba scanners of the libsvm tokenizer: byte classes, integers and decimal numbers.

Every function takes the block's bytes ``buf`` (uint8), a position ``pos`` and the block
length ``n`` and returns positions, so that the line kernel (:mod:`._parse_lines`) walks a
block without ever copying a token. Fields are separated by spaces, tabs, ``\\r``, ``\\v``
or ``\\f``; a token ends at a separator, a newline, ``#`` or the end of the block.

Numbers: ``[+-]`` digits with optional ``.`` fraction and ``e``/``E`` exponent (``+1``,
``.5``, ``5.``, ``-2.5E+04``); indices: ``[+-]`` digits. :func:`_parse_number` is correctly
rounded, bit-identical to Python's ``float(token)``: it takes Clinger's exact fast path (at
most ``2**53`` as integer significand, decimal exponent within +-22) and answers ``_SLOW``
for every other valid token, which the Python driver (:mod:`._parse`) converts with
``float()``.

All are ``kernel_inline``: small, allocation-free, inlined by numba into the line kernel.
"""

from __future__ import annotations

import numpy as np

from ..kernels._jit import kernel_inline

__all__ = ["INDEX_LIMIT"]

INDEX_LIMIT = 1 << 62
"""Largest index the parser can represent; pass it as ``max_index`` for "no limit"."""

_POW10 = np.array([float(10**k) for k in range(23)])  # exact: 10**22 < 2**53 * 2**22

# Status of _parse_number.
_OK, _SLOW, _BAD = 0, 1, 2


@kernel_inline
def _is_ws(c):
    """Field separator within a line: space, ``\\t``, ``\\v``, ``\\f`` or ``\\r``."""
    return c == 32 or (c >= 9 and c <= 13 and c != 10)


@kernel_inline
def _is_end(buf, pos, n):
    """Whether ``pos`` ends a token: end of buffer, whitespace, newline or ``#``."""
    if pos >= n:
        return True
    c = buf[pos]
    return c == 32 or (c >= 9 and c <= 13) or c == 35


@kernel_inline
def _skip_ws(buf, pos, n):
    """First position at or after ``pos`` that is not a field separator."""
    while pos < n and _is_ws(buf[pos]):
        pos += 1
    return pos


@kernel_inline
def _skip_line(buf, pos, n):
    """Position of the next newline at or after ``pos`` (``n`` when there is none)."""
    while pos < n and buf[pos] != 10:
        pos += 1
    return pos


@kernel_inline
def _token_end(buf, pos, n):
    """End (exclusive) of the token starting at ``pos``."""
    while not _is_end(buf, pos, n):
        pos += 1
    return pos


@kernel_inline
def _parse_sign(buf, pos, n):
    """Consume an optional ``+``/``-`` at ``pos``; return ``(negative, pos after it)``."""
    if pos < n and (buf[pos] == 43 or buf[pos] == 45):
        return buf[pos] == 45, pos + 1
    return False, pos


@kernel_inline
def _parse_int(buf, pos, n):
    """Parse ``[+-]digits`` at ``pos``, stopping at the first other byte.

    Returns
    -------
    value : int
        The signed integer (meaningless unless ``status == 0``).
    end : int
        Position after the last byte consumed.
    status : int
        0 ok, 1 no digits, 2 magnitude above ``INDEX_LIMIT``.
    """
    neg, pos = _parse_sign(buf, pos, n)
    v = 0
    n_dig = 0
    over = False
    while pos < n:
        d = np.int64(buf[pos]) - 48
        if d < 0 or d > 9:
            break
        if v > INDEX_LIMIT // 10:
            over = True
        else:
            v = v * 10 + d
        n_dig += 1
        pos += 1
    if n_dig == 0:
        return 0, pos, 1
    if over or v > INDEX_LIMIT:
        return 0, pos, 2
    return (-v if neg else v), pos, 0


@kernel_inline
def _parse_exponent(buf, pos, n):
    """Parse the ``[+-]digits`` after ``e``/``E``; magnitudes are capped at 10**6.

    Returns ``(exponent, end, ok)``; ``ok`` is False when there is no digit.
    """
    neg, pos = _parse_sign(buf, pos, n)
    ex = 0
    n_dig = 0
    while pos < n:
        d = np.int64(buf[pos]) - 48
        if d < 0 or d > 9:
            break
        if ex < 1000000:
            ex = ex * 10 + d
        n_dig += 1
        pos += 1
    return (-ex if neg else ex), pos, n_dig > 0


@kernel_inline
def _parse_significand(buf, pos, n):
    """Parse ``digits[.digits]`` at ``pos`` into an integer and a power of ten.

    Returns
    -------
    m : int
        The first 18 significant digits as an integer (leading zeros do not count).
    e10 : int
        Power of ten of ``m``'s last digit: minus the number of fraction digits in ``m``.
    n_dig : int
        Number of digits read, 0 when there is none.
    slow : bool
        More than 18 significant digits: ``m`` is not the whole significand.
    end : int
        Position after the last byte consumed.
    """
    m = 0
    n_sig = 0
    n_dig = 0
    e10 = 0
    dot = False
    slow = False
    while pos < n:
        d = np.int64(buf[pos]) - 48
        if d == -2 and not dot:
            dot = True
        elif d >= 0 and d <= 9:
            n_dig += 1
            if n_sig < 18:
                m = m * 10 + d
                if m != 0:
                    n_sig += 1
                if dot:
                    e10 -= 1
            else:
                slow = True
        else:
            break
        pos += 1
    return m, e10, n_dig, slow, pos


@kernel_inline
def _parse_number(buf, pos, n, pow10):
    """Parse a decimal float at ``pos``, stopping at the first byte that cannot continue it.

    Clinger's fast path: with an integer significand ``m <= 2**53`` and a decimal exponent
    ``|e| <= 22``, ``m * 10**e`` or ``m / 10**-e`` is one correctly rounded IEEE operation
    on exact operands. ``pow10`` holds the exact powers ``10**0 .. 10**22`` (``_POW10``).

    Returns
    -------
    value : float
        The number when ``status == _OK``, else 0.0.
    end : int
        Position after the last byte consumed.
    status : int
        ``_OK``, ``_SLOW`` (valid syntax, outside the fast path: recompute with
        ``float()``) or ``_BAD`` (not a number).
    """
    neg, pos = _parse_sign(buf, pos, n)
    m, e10, n_dig, slow, pos = _parse_significand(buf, pos, n)
    if n_dig == 0:
        return 0.0, pos, _BAD
    if pos < n and (buf[pos] | 32) == 101:
        ex, pos, ok = _parse_exponent(buf, pos + 1, n)
        if not ok:
            return 0.0, pos, _BAD
        e10 += ex
    if m == 0:
        return (-0.0 if neg else 0.0), pos, _OK
    if slow or m > 9007199254740992 or e10 < -22 or e10 > 22:
        return 0.0, pos, _SLOW
    x = np.float64(m) * pow10[e10] if e10 >= 0 else np.float64(m) / pow10[-e10]
    return (-x if neg else x), pos, _OK


@kernel_inline
def _skip_qid(buf, pos, n):
    """End of a ``qid:<int>`` token at ``pos``; -1 if it is malformed, ``pos`` if absent."""
    if pos + 4 > n or buf[pos] != 113 or buf[pos + 1] != 105 or buf[pos + 2] != 100 \
            or buf[pos + 3] != 58:
        return pos
    _, end, status = _parse_int(buf, pos + 4, n)
    if status != 0 or not _is_end(buf, end, n):
        return -1
    return end
