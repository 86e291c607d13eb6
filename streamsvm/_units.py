"""Parsing of human sizes ("2GB", "512MiB", "1.5G", 1048576)."""

from __future__ import annotations

import re

from .exceptions import InvalidParameterError

__all__ = ["parse_size"]

_UNITS = {"": 1, "b": 1, "k": 10**3, "kb": 10**3, "m": 10**6, "mb": 10**6, "g": 10**9,
          "gb": 10**9, "t": 10**12, "tb": 10**12, "kib": 2**10, "mib": 2**20, "gib": 2**30,
          "tib": 2**40}


def parse_size(value, name: str = "memory") -> int:
    """Bytes from an int or a string such as ``"2GB"``, ``"512MiB"``, ``"1.5G"``.

    Raises
    ------
    InvalidParameterError
        Naming ``name`` when the value is not a non-negative size.
    """
    if isinstance(value, bool):
        raise InvalidParameterError(f"The {name!r} parameter must be a size such as '2GB' or a "
                                    f"number of bytes. Got {value!r} instead.")
    if isinstance(value, (int, float)) and value >= 0:
        return int(value)
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[0-9]+)?)\s*([a-zA-Z]*)\s*", str(value))
    if m is None or m.group(2).lower() not in _UNITS:
        raise InvalidParameterError(f"The {name!r} parameter must be a size such as '2GB', "
                                    f"'512MiB' or a number of bytes. Got {value!r} instead.")
    return int(float(m.group(1)) * _UNITS[m.group(2).lower()])
