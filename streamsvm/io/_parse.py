"""The libsvm/svmlight parser: one block of whole lines to CSR arrays (:func:`parse_block`).

Accepted, per line: ``label [qid:N] index:value ... [# comment]``. Fields are separated by
spaces, tabs, ``\\r``, ``\\v`` or ``\\f``; ``#`` starts a comment anywhere on a line. Labels
and values are decimal numbers (``[+-]`` digits with optional ``.`` fraction and ``e``/``E``
exponent: ``+1``, ``.5``, ``5.``, ``-2.5E+04``), indices are ``[+-]`` digits, strictly
increasing within a line. Blank and comment-only lines give no row; a label alone gives an
empty row. ``qid:N`` right after the label is accepted and ignored.

This module is the Python driver: it sizes the outputs, runs the numba line kernel
(:mod:`._parse_lines`, over the token scanners of :mod:`._parse_tokens`), converts the
tokens outside the kernel's exact fast path with ``float()``, and raises the first error.

Errors: the kernel stops at the first bad token and returns its byte range; the driver then
raises :class:`~streamsvm.exceptions.FormatError` naming the file, the 1-based line and byte
column, and the token text (messages: :mod:`._parse_errors`). Values are checked against a
largest magnitude (``max_value``) so that a float32 store never receives a value that its
dtype turns into inf.

Floats are correctly rounded, bit-identical to Python's ``float(token)`` (and so to
scikit-learn's ``load_svmlight_file``): the kernel uses Clinger's exact fast path (at most
2**53 as integer significand, decimal exponent within +-22) and lists every other token,
which the driver converts with ``float()``.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..exceptions import FormatError, InvalidParameterError
from ._parse_errors import (FLOAT32_MAX_VALUE, _kernel_error, _line_column,
                            _nonfinite_message, _value_range_message)
from ._parse_lines import (_E_NONE, _N_STATE, _S_AUX, _S_CODE, _S_MAX, _S_MIN, _S_NNZ,
                           _S_ROWS, _S_SLOW, _S_START, NO_MIN_INDEX, _count_bytes,
                           _parse_kernel)
from ._parse_tokens import _POW10, INDEX_LIMIT

__all__ = ["ParsedBlock", "parse_block", "INDEX_LIMIT", "NO_MIN_INDEX", "FLOAT32_MAX_VALUE"]


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
    return [(int(start[k]), _nonfinite_message(tok, bool(is_label[k])))]
