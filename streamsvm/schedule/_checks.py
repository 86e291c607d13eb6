"""Small checks and formats the scheduler's parts share: an int parameter, bytes for messages."""

from __future__ import annotations

import numbers

from ..exceptions import InvalidParameterError

__all__ = ["check_int", "mb"]


def mb(nbytes: int) -> str:
    """``nbytes`` for messages: "1.5 MB", "12 kB"."""
    return f"{nbytes / 1e6:.3g} MB" if nbytes >= 1e5 else f"{nbytes / 1e3:.3g} kB"


def check_int(name: str, value, low: int) -> int:
    """``value`` as an int, or the error naming the parameter ``name`` of PassScheduler."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < low:
        raise InvalidParameterError(
            f"The {name!r} parameter of PassScheduler must be an int in the range "
            f"[{low}, inf). Got {value!r} instead.")
    return int(value)
