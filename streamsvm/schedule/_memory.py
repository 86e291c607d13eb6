"""Parsing of memory budgets: ``"2GB"``, ``"512MB"``, ``"1.5GiB"``, or a number of bytes."""

from __future__ import annotations

import math
import numbers
import re

from ..exceptions import InvalidParameterError

__all__ = ["parse_memory"]

# Decimal units as in dask's parse_bytes (``GB`` = 10**9), binary ones with ``i`` (``GiB`` = 2**30).
_UNITS = {
    "": 1, "b": 1,
    "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6,
    "g": 10**9, "gb": 10**9, "t": 10**12, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)(?:[eE]([+-]?\d+))?\s*([A-Za-z]*)\s*$")


def parse_memory(value, *, name: str = "memory", owner: str = "PassScheduler") -> int:
    """Number of bytes in a memory budget.

    Parameters
    ----------
    value : int, float or str
        Bytes (``1_000_000``), or a number with a unit: ``B``, ``kB``/``KB``, ``MB``,
        ``GB``, ``TB`` (powers of 1000) or ``KiB``, ``MiB``, ``GiB``, ``TiB`` (powers of
        1024), case-insensitive, e.g. ``"2GB"``, ``"512 MB"``, ``"1.5GiB"``.
    name, owner : str
        Parameter and object named in the error message.

    Returns
    -------
    int
        Bytes, rounded down; ``>= 0``.

    Raises
    ------
    InvalidParameterError
        Negative, non-finite, a bool, or an unparseable string.

    Examples
    --------
    >>> parse_memory("1.5GiB")
    1610612736
    >>> parse_memory("512MB")
    512000000
    """
    if isinstance(value, str):
        match = _PATTERN.match(value)
        unit = match.group(3).lower() if match else None
        if match and unit in _UNITS:
            exponent = f"e{match.group(2)}" if match.group(2) else ""
            number = float(match.group(1) + exponent) * _UNITS[unit]
            if math.isfinite(number):
                return int(number)
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        if math.isfinite(value) and value >= 0:
            return int(value)
    raise InvalidParameterError(
        f"The {name!r} parameter of {owner} must be a number of bytes (>= 0) or a string "
        f"with a unit such as '2GB', '512MB' or '1.5GiB'. Got {value!r} instead.")
