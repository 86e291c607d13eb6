"""The numba hot loop of the libsvm/svmlight parser: one block of whole lines to CSR arrays.

Accepted, per line: ``label [qid:N] index:value ... [# comment]``. Fields are separated by
spaces, tabs, ``\\r``, ``\\v`` or ``\\f``; ``#`` starts a comment anywhere on a line. Labels
and values are decimal numbers (``[+-]`` digits with optional ``.`` fraction and ``e``/``E``
exponent: ``+1``, ``.5``, ``5.``, ``-2.5E+04``), indices are ``[+-]`` digits, strictly
increasing within a line. Blank and comment-only lines give no row; a label alone gives an
empty row. ``qid:N`` right after the label is accepted and ignored.

Errors: the kernel stops at the first bad token and returns its byte range; Python then
raises :class:`~streamsvm.exceptions.FormatError` naming the file, the 1-based line and byte
column, and the token text. Values are checked against a largest magnitude (``max_value``)
so that a float32 store never receives a value that its dtype turns into inf.

Floats are correctly rounded, bit-identical to Python's ``float(token)`` (and so to
scikit-learn's ``load_svmlight_file``): the kernel uses Clinger's exact fast path (at most
2**53 as integer significand, decimal exponent within +-22) and lists every other token,
which Python then converts with ``float()``.
"""

from __future__ import annotations

import dataclasses
import re

import numba
import numpy as np

from ..exceptions import FormatError, InvalidParameterError
from ..kernels._jit import kernel_inline

__all__ = ["ParsedBlock", "parse_block", "INDEX_LIMIT", "NO_MIN_INDEX", "FLOAT32_MAX_VALUE"]

INDEX_LIMIT = 1 << 62
"""Largest index the parser can represent; pass it as ``max_index`` for "no limit"."""

NO_MIN_INDEX = int(np.iinfo(np.int64).max)
"""``ParsedBlock.min_index`` of a block without any feature."""

FLOAT32_MAX_VALUE = float(np.nextafter(2.0**128 - 2.0**103, 0.0))
"""Largest float64 magnitude that float32 rounds to a finite number (to its largest value,
3.4028235e38): from ``2**128 - 2**103``, halfway to the next power of two, ``np.float32``
gives inf. Pass it as ``max_value`` for a float32 store."""

_POW10 = np.array([float(10**k) for k in range(23)])  # exact: 10**22 < 2**53 * 2**22

# Status of _parse_number.
_OK, _SLOW, _BAD = 0, 1, 2
# Error codes written to out_state[_S_CODE].
(_E_NONE, _E_LABEL, _E_PAIR, _E_QID, _E_OVERFLOW, _E_NEGATIVE, _E_BELOW, _E_ABOVE,
 _E_UNSORTED, _E_DUPLICATE, _E_DUPLICATE_SORTED, _E_VALUE) = range(12)
# Slots of out_state.
_S_ROWS, _S_NNZ, _S_SLOW, _S_CODE, _S_START, _S_END, _S_AUX, _S_MIN, _S_MAX = range(9)
_N_STATE = 9
_INSERTION_SORT_MAX = 32

# The kernels allocate nothing: compiled without numba's runtime (see kernels/_jit.py).
_kernel = kernel_inline


@dataclasses.dataclass(frozen=True)
class ParsedBlock:
    """The rows of one block of libsvm text, as CSR arrays.

    Attributes
    ----------
    labels : ndarray of shape (n_rows,), float64
        One label per row.
    indptr : ndarray of shape (n_rows + 1,), int64
        Row pointer starting at 0.
    indices : ndarray of shape (nnz,), int64
        Raw indices as written in the file (not shifted), strictly increasing within a row.
    values : ndarray of shape (nnz,), float64
        Feature values, explicit zeros kept.
    n_lines : int
        Number of ``'\\n'``-terminated lines consumed, blank and comment lines included
        (a last line without newline is parsed but not counted).
    min_index : int
        Smallest raw index in the block, or :data:`NO_MIN_INDEX` when ``nnz == 0``.
    max_index : int
        Largest raw index in the block, or -1 when ``nnz == 0``.
    """

    labels: np.ndarray
    indptr: np.ndarray
    indices: np.ndarray
    values: np.ndarray
    n_lines: int
    min_index: int
    max_index: int


# ---------------------------------------------------------------------------------------
# Kernels.
# ---------------------------------------------------------------------------------------

@_kernel
def _count_bytes(buf, out_counts):
    """Count newlines and colons, the bounds on rows and nnz that pre-size the outputs.

    Parameters
    ----------
    buf : ndarray of shape (n_bytes,), uint8
    out_counts : ndarray of shape (2,), int64
        Receives ``[n_newlines, n_colons]``.
    """
    n_nl = 0
    n_colon = 0
    for i in range(buf.shape[0]):
        c = buf[i]
        if c == 10:
            n_nl += 1
        elif c == 58:
            n_colon += 1
    out_counts[0] = n_nl
    out_counts[1] = n_colon


@_kernel
def _is_ws(c):
    """Field separator within a line: space, ``\\t``, ``\\v``, ``\\f`` or ``\\r``."""
    return c == 32 or (c >= 9 and c <= 13 and c != 10)


@_kernel
def _is_end(buf, pos, n):
    """Whether ``pos`` ends a token: end of buffer, whitespace, newline or ``#``."""
    if pos >= n:
        return True
    c = buf[pos]
    return c == 32 or (c >= 9 and c <= 13) or c == 35


@_kernel
def _skip_ws(buf, pos, n):
    """First position at or after ``pos`` that is not a field separator."""
    while pos < n and _is_ws(buf[pos]):
        pos += 1
    return pos


@_kernel
def _skip_line(buf, pos, n):
    """Position of the next newline at or after ``pos`` (``n`` when there is none)."""
    while pos < n and buf[pos] != 10:
        pos += 1
    return pos


@_kernel
def _token_end(buf, pos, n):
    """End (exclusive) of the token starting at ``pos``."""
    while not _is_end(buf, pos, n):
        pos += 1
    return pos


@_kernel
def _fail(out_state, code, start, end, aux):
    """Record an error (code, token byte range, auxiliary value) and return -1."""
    out_state[_S_CODE] = code
    out_state[_S_START] = start
    out_state[_S_END] = end
    out_state[_S_AUX] = aux
    return -1


@_kernel
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
    neg = False
    if pos < n and (buf[pos] == 43 or buf[pos] == 45):
        neg = buf[pos] == 45
        pos += 1
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


@_kernel
def _parse_exponent(buf, pos, n):
    """Parse the ``[+-]digits`` after ``e``/``E``; magnitudes are capped at 10**6.

    Returns ``(exponent, end, ok)``; ``ok`` is False when there is no digit.
    """
    neg = False
    if pos < n and (buf[pos] == 43 or buf[pos] == 45):
        neg = buf[pos] == 45
        pos += 1
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


@_kernel
def _parse_number(buf, pos, n, pow10):
    """Parse a decimal float at ``pos``, stopping at the first byte that cannot continue it.

    Clinger's fast path: with an integer significand ``m <= 2**53`` (leading zeros do not
    count) and a decimal exponent ``|e| <= 22``, ``m * 10**e`` or ``m / 10**-e`` is one
    correctly rounded IEEE operation on exact operands.

    Parameters
    ----------
    buf : ndarray of shape (n_bytes,), uint8
    pos, n : int
        Start position and buffer length.
    pow10 : ndarray of shape (23,), float64
        Exact powers ``10**0 .. 10**22``.

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
    neg = False
    if pos < n and (buf[pos] == 43 or buf[pos] == 45):
        neg = buf[pos] == 45
        pos += 1
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


@_kernel
def _skip_qid(buf, pos, n):
    """End of a ``qid:<int>`` token at ``pos``; -1 if it is malformed, ``pos`` if absent."""
    if pos + 4 > n or buf[pos] != 113 or buf[pos + 1] != 105 or buf[pos + 2] != 100 \
            or buf[pos + 3] != 58:
        return pos
    _, end, status = _parse_int(buf, pos + 4, n)
    if status != 0 or not _is_end(buf, end, n):
        return -1
    return end


@_kernel
def _check_index(idx, status, prev, min_index, max_index, sort_indices):
    """Error code for index ``idx`` following ``prev`` on its line (0 when valid)."""
    if status == 2:
        return _E_OVERFLOW
    if idx < 0:
        return _E_NEGATIVE
    if idx < min_index:
        return _E_BELOW
    if idx > max_index:
        return _E_ABOVE
    if idx <= prev and not sort_indices:
        return _E_DUPLICATE if idx == prev else _E_UNSORTED
    return _E_NONE


@_kernel
def _sift_down(out_indices, out_values, lo, root, size):
    """Restore the max-heap on ``[lo, lo + size)`` below ``root`` (offsets from ``lo``)."""
    while 2 * root + 1 < size:
        child = 2 * root + 1
        if child + 1 < size and out_indices[lo + child + 1] > out_indices[lo + child]:
            child += 1
        if out_indices[lo + root] >= out_indices[lo + child]:
            return
        a, b = lo + root, lo + child
        out_indices[a], out_indices[b] = out_indices[b], out_indices[a]
        out_values[a], out_values[b] = out_values[b], out_values[a]
        root = child


@_kernel
def _sort_by_index(out_indices, out_values, lo, hi):
    """Sort pairs ``[lo, hi)`` by index in place: insertion sort, heapsort for long lines."""
    if hi - lo <= _INSERTION_SORT_MAX:
        for i in range(lo + 1, hi):
            k = out_indices[i]
            v = out_values[i]
            j = i - 1
            while j >= lo and out_indices[j] > k:
                out_indices[j + 1] = out_indices[j]
                out_values[j + 1] = out_values[j]
                j -= 1
            out_indices[j + 1] = k
            out_values[j + 1] = v
        return
    size = hi - lo
    for root in range(size // 2 - 1, -1, -1):
        _sift_down(out_indices, out_values, lo, root, size)
    for last in range(size - 1, 0, -1):
        a, b = lo, lo + last
        out_indices[a], out_indices[b] = out_indices[b], out_indices[a]
        out_values[a], out_values[b] = out_values[b], out_values[a]
        _sift_down(out_indices, out_values, lo, 0, last)


@_kernel
def _sort_pairs(out_indices, out_values, out_slow, lo, hi, slow_lo, slow_hi):
    """Sort pairs ``[lo, hi)`` by index, keeping slow-list slots on their values.

    Returns
    -------
    dup : int
        The smallest duplicated index, or -1 when the indices are unique.
    """
    for s in range(slow_lo, slow_hi):  # slot -> index (slots of values are >= 0)
        if out_slow[s, 0] >= 0:
            out_slow[s, 0] = out_indices[out_slow[s, 0]]
    _sort_by_index(out_indices, out_values, lo, hi)
    for s in range(slow_lo, slow_hi):  # index -> new slot
        if out_slow[s, 0] >= 0:
            out_slow[s, 0] = lo + np.searchsorted(out_indices[lo:hi], out_slow[s, 0])
    for i in range(lo + 1, hi):
        if out_indices[i] == out_indices[i - 1]:
            return out_indices[i]
    return -1


@_kernel
def _parse_pairs(buf, pos, n, min_index, max_index, max_value, sort_indices, pow10,
                 out_indices, out_values, out_slow, out_state):
    """Parse the ``[qid:N] index:value ...`` part of one line, from ``pos`` to its end.

    Appends to ``out_indices``/``out_values`` and the slow list at the counts held in
    ``out_state``, which it updates (nnz, slow count, min and max index).

    Returns
    -------
    pos : int
        Position of the line's newline, ``#`` or buffer end; -1 after an error (recorded
        in ``out_state``).
    """
    nnz = out_state[_S_NNZ]
    n_slow = out_state[_S_SLOW]
    first, first_slow, line_pos = nnz, n_slow, pos
    prev = -1
    unsorted = False
    pos = _skip_ws(buf, pos, n)
    end = _skip_qid(buf, pos, n)
    if end < 0:
        return _fail(out_state, _E_QID, pos, _token_end(buf, pos, n), 0)
    pos = end
    while True:
        pos = _skip_ws(buf, pos, n)
        if pos >= n or buf[pos] == 10 or buf[pos] == 35:
            break
        start = pos
        idx, pos, status = _parse_int(buf, pos, n)
        if status == 1 or pos >= n or buf[pos] != 58:
            return _fail(out_state, _E_PAIR, start, _token_end(buf, start, n), 0)
        code = _check_index(idx, status, prev, min_index, max_index, sort_indices)
        if code != _E_NONE:
            return _fail(out_state, code, start, pos, prev)
        unsorted = unsorted or idx <= prev
        prev = idx
        val, end, status = _parse_number(buf, pos + 1, n, pow10)
        if status == _BAD or not _is_end(buf, end, n):
            return _fail(out_state, _E_PAIR, start, _token_end(buf, start, n), 0)
        if abs(val) > max_value:     # slow-path values are checked by _convert_slow
            return _fail(out_state, _E_VALUE, pos + 1, end, 0)
        if status == _SLOW:
            out_slow[n_slow, 0] = nnz
            out_slow[n_slow, 1] = pos + 1
            out_slow[n_slow, 2] = end
            n_slow += 1
            out_state[_S_SLOW] = n_slow  # kept current: errors report the earliest token
        out_indices[nnz] = idx
        out_values[nnz] = val
        nnz += 1
        pos = end
    if unsorted:
        dup = _sort_pairs(out_indices, out_values, out_slow, first, nnz, first_slow, n_slow)
        if dup >= 0:
            return _fail(out_state, _E_DUPLICATE_SORTED, line_pos, pos, dup)
    if nnz > first:
        out_state[_S_MIN] = min(out_state[_S_MIN], out_indices[first])
        out_state[_S_MAX] = max(out_state[_S_MAX], out_indices[nnz - 1])
    out_state[_S_NNZ] = nnz
    return pos


@_kernel
def _parse_kernel(buf, min_index, max_index, max_value, sort_indices, pow10, out_labels,
                  out_indptr, out_indices, out_values, out_slow, out_state):
    """Parse a block of whole libsvm lines into CSR arrays.

    Parameters
    ----------
    buf : ndarray of shape (n_bytes,), uint8
    min_index, max_index : int
        Allowed range of raw indices.
    max_value : float
        Largest allowed magnitude of a value (labels are not checked).
    sort_indices : bool
        Sort each line's pairs instead of rejecting unsorted ones.
    pow10 : ndarray of shape (23,), float64
        Exact powers of ten for :func:`_parse_number`.
    out_labels : ndarray of shape (>= n_rows,), float64
    out_indptr : ndarray of shape (>= n_rows + 1,), int64
    out_indices : ndarray of shape (>= nnz,), int64
    out_values : ndarray of shape (>= nnz,), float64
    out_slow : ndarray of shape (>= n_slow, 3), int64
        Tokens to convert with ``float()``: ``(slot, start, end)``; ``slot`` is the
        position in ``out_values``, or ``-1 - row`` for a label.
    out_state : ndarray of shape (9,), int64
        In: zeros, with ``out_state[_S_MIN] = NO_MIN_INDEX`` and ``out_state[_S_MAX] = -1``.
        Out: row, nnz and slow counts, error code and token range and auxiliary value,
        min and max index.
    """
    n = buf.shape[0]
    pos = 0
    row = 0
    out_indptr[0] = 0
    while True:
        pos = _skip_ws(buf, pos, n)
        if pos < n and buf[pos] == 35:
            pos = _skip_line(buf, pos, n)
        if pos >= n:
            break
        if buf[pos] == 10:
            pos += 1
            continue
        val, end, status = _parse_number(buf, pos, n, pow10)
        if status == _BAD or not _is_end(buf, end, n):
            _fail(out_state, _E_LABEL, pos, _token_end(buf, pos, n), 0)
            break
        if status == _SLOW:
            s = out_state[_S_SLOW]
            out_slow[s, 0] = -1 - row
            out_slow[s, 1] = pos
            out_slow[s, 2] = end
            out_state[_S_SLOW] = s + 1
        out_labels[row] = val
        pos = _parse_pairs(buf, end, n, min_index, max_index, max_value, sort_indices,
                           pow10, out_indices, out_values, out_slow, out_state)
        if pos < 0:
            break
        row += 1
        out_indptr[row] = out_state[_S_NNZ]
        pos = _skip_line(buf, pos, n) + 1
    out_state[_S_ROWS] = row


# ---------------------------------------------------------------------------------------
# Python driver.
# ---------------------------------------------------------------------------------------

def parse_block(buf, *, file: str, first_line: int, min_index: int, max_index: int,
                sort_indices: bool = False, max_value: float = np.inf) -> ParsedBlock:
    """Parse a block of whole libsvm/svmlight lines into CSR arrays.

    Parameters
    ----------
    buf : bytes, bytearray, memoryview or ndarray of shape (n_bytes,), uint8
        Whole lines; the last may lack its newline at end of file. Viewed, not copied.
    file : str
        Name of the input, for error messages.
    first_line : int
        1-based line number of the block's first line in ``file``.
    min_index : int
        Smallest allowed raw index: 1 for one-based files, 0 for zero-based ones.
    max_index : int
        Largest allowed raw index, e.g. ``n_features`` for one-based files;
        :data:`INDEX_LIMIT` (``2**62``) for no limit.
    sort_indices : bool, default=False
        Sort each line's pairs by index instead of rejecting unsorted lines (duplicates
        are still rejected).
    max_value : float, default=np.inf
        Largest allowed magnitude of a value (labels are not checked):
        :data:`FLOAT32_MAX_VALUE` for a float32 store, whose dtype would turn larger
        values into inf. Non-finite values are always rejected.

    Returns
    -------
    ParsedBlock
        Views on arrays sized by the block's newline and colon counts.

    Raises
    ------
    FormatError
        On the first malformed token, with ``file``, ``line`` and ``column`` (1-based,
        bytes) set and the token text in the message.
    InvalidParameterError
        If ``min_index``/``max_index`` are not ``0 <= min_index <= max_index <= 2**62``.

    Examples
    --------
    >>> block = parse_block(b"+1 1:0.5 3:2\\n-1 2:1e-3\\n", file="toy.svm", first_line=1,
    ...                     min_index=1, max_index=INDEX_LIMIT)
    >>> block.labels, block.indptr, block.indices, block.values
    (array([ 1., -1.]), array([0, 2, 3]), array([1, 3, 2]), array([5.e-01, 2.e+00, 1.e-03]))
    """
    if not 0 <= min_index <= max_index <= INDEX_LIMIT:
        raise InvalidParameterError(
            f"need 0 <= min_index <= max_index <= 2**62, got min_index={min_index}, "
            f"max_index={max_index}")
    if not max_value > 0:
        raise InvalidParameterError(f"The 'max_value' parameter must be a float > 0. "
                                    f"Got {max_value!r} instead.")
    arr = _as_uint8(buf)
    counts = np.zeros(2, dtype=np.int64)
    _count_bytes(arr, counts)
    n_lines, n_colons = int(counts[0]), int(counts[1])
    labels = np.empty(n_lines + 1, dtype=np.float64)
    indptr = np.empty(n_lines + 2, dtype=np.int64)
    indices = np.empty(n_colons, dtype=np.int64)
    values = np.empty(n_colons, dtype=np.float64)
    # Pages are committed only when written: the worst-case size costs nothing otherwise.
    slow = np.empty((n_lines + 1 + n_colons, 3), dtype=np.int64)
    state = np.zeros(_N_STATE, dtype=np.int64)
    state[_S_MIN], state[_S_MAX] = NO_MIN_INDEX, -1
    _parse_kernel(arr, min_index, max_index, float(max_value), bool(sort_indices), _POW10,
                  labels, indptr, indices, values, slow, state)
    n_rows, nnz, n_slow, code = (int(v) for v in state[[_S_ROWS, _S_NNZ, _S_SLOW, _S_CODE]])
    errors = _convert_slow(arr, slow[:n_slow], labels, values, max_value)
    if code != _E_NONE:
        errors.append(_kernel_error(arr, code, *(int(v) for v in state[_S_START:_S_AUX + 1]),
                                    min_index=min_index, max_index=max_index,
                                    max_value=max_value))
    if errors:
        offset, message = min(errors)
        line, column = _line_column(arr, offset, first_line)
        raise FormatError(message, file=file, line=line, column=column)
    return ParsedBlock(labels=labels[:n_rows], indptr=indptr[:n_rows + 1],
                       indices=indices[:nnz], values=values[:nnz], n_lines=n_lines,
                       min_index=int(state[_S_MIN]), max_index=int(state[_S_MAX]))


def _as_uint8(buf) -> np.ndarray:
    """``buf`` as a contiguous 1-d uint8 array, without copying when possible."""
    if isinstance(buf, np.ndarray):
        if buf.dtype != np.uint8 or buf.ndim != 1:
            raise TypeError(f"expected a 1-d uint8 array, got {buf.dtype} with shape {buf.shape}")
        return np.ascontiguousarray(buf)
    if isinstance(buf, memoryview) and not buf.c_contiguous:
        buf = buf.tobytes()
    if isinstance(buf, (bytes, bytearray, memoryview)):
        return np.frombuffer(buf, dtype=np.uint8)
    raise TypeError(f"expected bytes, bytearray, memoryview or a uint8 array, "
                    f"got {type(buf).__name__}")


def _convert_slow(arr, slow, labels, values, max_value) -> list[tuple[int, str]]:
    """Convert the listed tokens with ``float()``; return the first non-finite value or
    label, or value of magnitude above ``max_value``, as an error."""
    if len(slow) == 0:
        return []
    text = memoryview(arr)
    slot, start, end = slow[:, 0], slow[:, 1], slow[:, 2]
    x = np.array([float(text[s:e]) for s, e in zip(start.tolist(), end.tolist())])
    is_label = slot < 0
    labels[-1 - slot[is_label]] = x[is_label]
    values[slot[~is_label]] = x[~is_label]
    finite = np.isfinite(x)
    bad = np.flatnonzero(~finite | (~is_label & (np.abs(x) > max_value)))
    if len(bad) == 0:
        return []
    k = bad[0]
    tok = bytes(text[start[k]:end[k]])
    if finite[k]:
        return [(int(start[k]), _value_range_message(tok, max_value))]
    what = " as label" if is_label[k] else ""
    return [(int(start[k]), f"non-finite value {_quote(tok)}{what} (overflows a float64)")]


def _value_range_message(tok: bytes, max_value: float) -> str:
    if max_value == FLOAT32_MAX_VALUE:
        return (f"value {_quote(tok)} overflows float32 (largest 3.4028235e+38) and would be "
                f"stored as inf; use --dtype float64")
    return f"value {_quote(tok)} out of range (magnitude above max_value={max_value!r})"


_INT_RE = re.compile(rb"[+-]?[0-9]+\Z")
_NONFINITE_RE = re.compile(rb"[+-]?(nan|inf|infinity)\Z", re.IGNORECASE)
_TOKEN_RE = re.compile(rb"[^ \t\n\v\f\r#]+")


def _kernel_error(arr, code, start, end, aux, *, min_index, max_index,
                  max_value) -> tuple[int, str]:
    """The ``(offset, message)`` of the error the kernel reported."""
    tok = bytes(arr[start:end])
    if code == _E_VALUE:
        return start, _value_range_message(tok, max_value)
    if code == _E_LABEL:
        if _NONFINITE_RE.match(tok):
            return start, f"non-finite value {_quote(tok)} as label"
        if b":" in tok:
            return start, f"missing label: the line starts with pair {_quote(tok)}"
        return start, f"non-numeric label {_quote(tok)}"
    if code == _E_PAIR:
        return _pair_error(tok, start)
    if code == _E_QID:
        return start, f"invalid qid {_quote(tok)} (expected qid:<integer>)"
    if code == _E_OVERFLOW:
        return start, f"index {_quote(tok)} out of range (magnitude above 2**62)"
    if code == _E_DUPLICATE_SORTED:
        return _find_duplicate(tok, start, aux), f"duplicate index {aux}"
    idx = int(tok)
    if code == _E_NEGATIVE:
        return start, f"negative index {idx}"
    if code == _E_BELOW:
        hint = (" (one-based indices; use --zero-based yes for zero-based files)"
                if min_index == 1 else "")
        return start, f"index {idx} is below the smallest allowed index {min_index}{hint}"
    if code == _E_ABOVE:
        return start, f"index {idx} above the largest allowed index {max_index} (--n-features)"
    if code == _E_UNSORTED:
        return start, (f"indices not strictly increasing ({idx} after {aux}); "
                       "pass --sort-indices to repair unsorted input")
    return start, f"duplicate index {idx}"


def _pair_error(tok: bytes, start: int) -> tuple[int, str]:
    """Why ``tok`` is not a valid ``index:value`` pair, and where."""
    if b":" not in tok:
        return start, f"expected 'index:value', got {_quote(tok)}"
    idx, val = tok.split(b":", 1)
    if not idx:
        return start, f"missing index before ':' in {_quote(tok)}"
    if idx == b"qid":
        return start, f"{_quote(tok)} must come right after the label"
    if not _INT_RE.match(idx):
        return start, f"non-numeric index {_quote(idx)}"
    at = start + len(idx) + 1
    if not val:
        return start, f"missing value after ':' in {_quote(tok)}"
    if _NONFINITE_RE.match(val):
        return at, f"non-finite value {_quote(val)}"
    return at, f"non-numeric value {_quote(val)}"


def _find_duplicate(line: bytes, start: int, idx: int) -> int:
    """Offset of the second pair with index ``idx`` in the text ``line`` at ``start``."""
    seen = False
    for m in _TOKEN_RE.finditer(line):
        head = m.group().split(b":", 1)[0]
        if _INT_RE.match(head) and int(head) == idx:
            if seen:
                return start + m.start()
            seen = True
    return start


def _line_column(arr, offset: int, first_line: int) -> tuple[int, int]:
    """1-based line number and byte column of ``offset`` within the block."""
    newlines = np.flatnonzero(arr[:offset] == 10)
    line_start = int(newlines[-1]) + 1 if len(newlines) else 0
    return first_line + len(newlines), offset - line_start + 1


def _quote(tok: bytes, limit: int = 40) -> str:
    """``tok`` decoded and single-quoted, truncated to ``limit`` characters."""
    text = tok.decode("utf-8", errors="backslashreplace")
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    if len(text) > limit:
        text = text[:limit] + "..."
    return f"'{text}'"
