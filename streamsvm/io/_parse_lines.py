"""The numba line kernel of the libsvm parser: a block of whole lines to CSR arrays.

Accepted, per line: ``label [qid:N] index:value ... [# comment]`` (tokens as
:mod:`._parse_tokens` reads them); ``#`` starts a comment anywhere on a line. Indices are
strictly increasing within a line, or sorted here with ``sort_indices``. Blank and
comment-only lines give no row; a label alone gives an empty row. ``qid:N`` right after the
label is accepted and ignored.

The kernel writes into arrays the driver (:mod:`._parse`) sizes from :func:`_count_bytes`,
and keeps its counts in ``out_state`` (slots ``_S_*``). It stops at the first bad token and
records an error code (``_E_*``) with the token's byte range there; the driver turns it into
a message (:mod:`._parse_errors`). Tokens outside the exact fast path of
:func:`._parse_tokens._parse_number` are listed in ``out_slow`` as ``(slot, start, end)``:
``slot`` is the position in ``out_values``, or ``-1 - row`` for a label.

All functions allocate nothing and are ``kernel_inline``.
"""

from __future__ import annotations

import numpy as np

from ..kernels._jit import kernel_inline
from ._parse_tokens import (_BAD, _SLOW, _is_end, _parse_int, _parse_number, _skip_line,
                            _skip_qid, _skip_ws, _token_end)

__all__ = ["NO_MIN_INDEX"]

NO_MIN_INDEX = int(np.iinfo(np.int64).max)
"""``ParsedBlock.min_index`` of a block without any feature."""

# Error codes written to out_state[_S_CODE].
(_E_NONE, _E_LABEL, _E_PAIR, _E_QID, _E_OVERFLOW, _E_NEGATIVE, _E_BELOW, _E_ABOVE,
 _E_UNSORTED, _E_DUPLICATE, _E_DUPLICATE_SORTED, _E_VALUE) = range(12)
# Slots of out_state: row, nnz and slow counts; error code, token range and auxiliary
# value; smallest and largest index (start at NO_MIN_INDEX and -1).
_S_ROWS, _S_NNZ, _S_SLOW, _S_CODE, _S_START, _S_END, _S_AUX, _S_MIN, _S_MAX = range(9)
_N_STATE = 9
_INSERTION_SORT_MAX = 32


@kernel_inline
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


@kernel_inline
def _fail(out_state, code, start, end, aux):
    """Record an error (code, token byte range, auxiliary value) and return -1."""
    out_state[_S_CODE] = code
    out_state[_S_START] = start
    out_state[_S_END] = end
    out_state[_S_AUX] = aux
    return -1


@kernel_inline
def _push_slow(out_slow, out_state, slot, start, end):
    """List the token ``[start, end)`` for ``float()``; its value goes to ``slot``."""
    s = out_state[_S_SLOW]
    out_slow[s, 0] = slot
    out_slow[s, 1] = start
    out_slow[s, 2] = end
    out_state[_S_SLOW] = s + 1  # kept current: errors report the earliest token


@kernel_inline
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


@kernel_inline
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


@kernel_inline
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


@kernel_inline
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


@kernel_inline
def _parse_pair(buf, start, n, prev, min_index, max_index, max_value, sort_indices, pow10,
                out_state):
    """Parse the ``index:value`` token at ``start``, following index ``prev`` on its line.

    Returns
    -------
    idx, value : int, float
        The pair (``value`` is 0.0 when ``status == _SLOW``).
    value_start, end : int
        Byte range of the value; ``end`` is -1 after an error (recorded in ``out_state``).
    status : int
        ``_OK`` or ``_SLOW``, the status of the value.
    """
    idx, pos, status = _parse_int(buf, start, n)
    if status == 1 or pos >= n or buf[pos] != 58:
        return 0, 0.0, 0, _fail(out_state, _E_PAIR, start, _token_end(buf, start, n), 0), 0
    code = _check_index(idx, status, prev, min_index, max_index, sort_indices)
    if code != _E_NONE:
        return 0, 0.0, 0, _fail(out_state, code, start, pos, prev), 0
    val, end, status = _parse_number(buf, pos + 1, n, pow10)
    if status == _BAD or not _is_end(buf, end, n):
        return 0, 0.0, 0, _fail(out_state, _E_PAIR, start, _token_end(buf, start, n), 0), 0
    if abs(val) > max_value:     # slow-path values are checked by the driver's float()
        return 0, 0.0, 0, _fail(out_state, _E_VALUE, pos + 1, end, 0), 0
    return idx, val, pos + 1, end, status


@kernel_inline
def _end_line(out_indices, out_values, out_slow, out_state, first, first_slow, nnz,
              unsorted, line_pos, pos):
    """Close a line whose pairs are ``[first, nnz)`` and slow tokens ``[first_slow, ...)``.

    Sorts the pairs if they came ``unsorted`` (a duplicate index is an error over the line's
    bytes ``[line_pos, pos)``), then updates the nnz count and the index range in
    ``out_state``. Returns ``pos``, or -1 after an error.
    """
    if unsorted:
        dup = _sort_pairs(out_indices, out_values, out_slow, first, nnz, first_slow,
                          out_state[_S_SLOW])
        if dup >= 0:
            return _fail(out_state, _E_DUPLICATE_SORTED, line_pos, pos, dup)
    if nnz > first:
        out_state[_S_MIN] = min(out_state[_S_MIN], out_indices[first])
        out_state[_S_MAX] = max(out_state[_S_MAX], out_indices[nnz - 1])
    out_state[_S_NNZ] = nnz
    return pos


@kernel_inline
def _parse_pairs(buf, pos, n, min_index, max_index, max_value, sort_indices, pow10,
                 out_indices, out_values, out_slow, out_state):
    """Parse the ``[qid:N] index:value ...`` part of one line, from ``pos`` to its end.

    Appends to ``out_indices``/``out_values`` and the slow list at the counts held in
    ``out_state``. Returns the position of the line's newline, ``#`` or buffer end; -1
    after an error (recorded in ``out_state``).
    """
    first, first_slow, line_pos = out_state[_S_NNZ], out_state[_S_SLOW], pos
    nnz = first
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
        idx, val, at, end, status = _parse_pair(buf, pos, n, prev, min_index, max_index,
                                                max_value, sort_indices, pow10, out_state)
        if end < 0:
            return -1
        if status == _SLOW:
            _push_slow(out_slow, out_state, nnz, at, end)
        unsorted = unsorted or idx <= prev
        prev = idx
        out_indices[nnz] = idx
        out_values[nnz] = val
        nnz += 1
        pos = end
    return _end_line(out_indices, out_values, out_slow, out_state, first, first_slow, nnz,
                     unsorted, line_pos, pos)


@kernel_inline
def _next_row(buf, pos, n):
    """Position of the next row's label at or after ``pos``, past blank and comment-only
    lines (``n`` at the end of the block)."""
    while True:
        pos = _skip_ws(buf, pos, n)
        if pos < n and buf[pos] == 35:
            pos = _skip_line(buf, pos, n)
        if pos >= n or buf[pos] != 10:
            return pos
        pos += 1


@kernel_inline
def _parse_label(buf, pos, n, row, pow10, out_labels, out_slow, out_state):
    """Parse the label of ``row`` at ``pos``; return its end, or -1 after an error."""
    val, end, status = _parse_number(buf, pos, n, pow10)
    if status == _BAD or not _is_end(buf, end, n):
        return _fail(out_state, _E_LABEL, pos, _token_end(buf, pos, n), 0)
    if status == _SLOW:
        _push_slow(out_slow, out_state, -1 - row, pos, end)
    out_labels[row] = val
    return end


@kernel_inline
def _parse_kernel(buf, min_index, max_index, max_value, sort_indices, pow10, out_labels,
                  out_indptr, out_indices, out_values, out_slow, out_state):
    """Parse a block of whole libsvm lines into CSR arrays.

    ``min_index``, ``max_index``, ``max_value`` and ``sort_indices`` as in
    :func:`._parse.parse_block`, ``pow10`` the ``_POW10`` of :mod:`._parse_tokens`. The
    outputs have room for one row per newline plus one and one pair per colon, ``out_slow``
    for every label and value; ``out_state`` (``_N_STATE`` slots) comes in as zeros but for
    ``_S_MIN = NO_MIN_INDEX`` and ``_S_MAX = -1``, and goes out with the counts, the index
    range and the error, if any.
    """
    n = buf.shape[0]
    pos = 0
    row = 0
    out_indptr[0] = 0
    while True:
        pos = _next_row(buf, pos, n)
        if pos >= n:
            break
        pos = _parse_label(buf, pos, n, row, pow10, out_labels, out_slow, out_state)
        if pos < 0:
            break
        pos = _parse_pairs(buf, pos, n, min_index, max_index, max_value, sort_indices,
                           pow10, out_indices, out_values, out_slow, out_state)
        if pos < 0:
            break
        row += 1
        out_indptr[row] = out_state[_S_NNZ]
        pos = _skip_line(buf, pos, n) + 1
    out_state[_S_ROWS] = row
