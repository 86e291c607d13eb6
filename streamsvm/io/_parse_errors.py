"""The messages of the libsvm parser's errors, and where in the file they point.

The line kernel (:mod:`._parse_lines`) reports an error as a code and a token's byte range;
the slow-token conversion of the driver (:mod:`._parse`) as the token of a non-finite or
too large value. Here both become ``(offset, message)``: one line that quotes the token
(truncated, unprintable bytes escaped), says what was expected and, where the user can fix
it with an option of ``streamsvm convert``, names that option. :func:`_line_column` turns
the offset into the 1-based line and byte column the :class:`FormatError` carries.
"""

from __future__ import annotations

import re

import numpy as np

from ._parse_lines import (_E_ABOVE, _E_BELOW, _E_DUPLICATE_SORTED, _E_LABEL, _E_NEGATIVE,
                           _E_OVERFLOW, _E_PAIR, _E_QID, _E_UNSORTED, _E_VALUE)

__all__ = ["FLOAT32_MAX_VALUE"]

FLOAT32_MAX_VALUE = float(np.nextafter(2.0**128 - 2.0**103, 0.0))
"""Largest float64 magnitude that float32 rounds to a finite number (to its largest value,
3.4028235e38): from ``2**128 - 2**103``, halfway to the next power of two, ``np.float32``
gives inf. Pass it as ``max_value`` for a float32 store."""

_INT_RE = re.compile(rb"[+-]?[0-9]+\Z")
_NONFINITE_RE = re.compile(rb"[+-]?(nan|inf|infinity)\Z", re.IGNORECASE)
_TOKEN_RE = re.compile(rb"[^ \t\n\v\f\r#]+")


def _value_range_message(tok: bytes, max_value: float) -> str:
    """Why the finite value ``tok`` is refused: its magnitude is above ``max_value``."""
    if max_value == FLOAT32_MAX_VALUE:
        return (f"value {_quote(tok)} overflows float32 (largest 3.4028235e+38) and would be "
                f"stored as inf; use --dtype float64")
    return f"value {_quote(tok)} out of range (magnitude above max_value={max_value!r})"


def _nonfinite_message(tok: bytes, is_label: bool) -> str:
    """Why a token that ``float()`` turns into inf or nan is refused."""
    what = " as label" if is_label else ""
    return f"non-finite value {_quote(tok)}{what} (overflows a float64)"


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
    return start, _index_message(code, int(tok), aux, min_index, max_index)


def _index_message(code, idx, prev, min_index, max_index) -> str:
    """Why index ``idx``, after ``prev`` on its line, is refused (the kernel's ``code``)."""
    if code == _E_NEGATIVE:
        return f"negative index {idx}"
    if code == _E_BELOW:
        hint = (" (one-based indices; use --zero-based yes for zero-based files)"
                if min_index == 1 else "")
        return f"index {idx} is below the smallest allowed index {min_index}{hint}"
    if code == _E_ABOVE:
        return f"index {idx} above the largest allowed index {max_index} (--n-features)"
    if code == _E_UNSORTED:
        return (f"indices not strictly increasing ({idx} after {prev}); "
                "pass --sort-indices to repair unsorted input")
    return f"duplicate index {idx}"


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
