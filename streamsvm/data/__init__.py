"""Bundled sample data: LIBSVM's a9a (adult) training and test files, bzip2-compressed.

Source: https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary.html#a9a
(32,561 training rows, 16,281 test rows, 123 binary features, labels ±1).
"""

from __future__ import annotations

import pathlib

__all__ = ["sample_path"]

_FILES = {"a9a": "a9a.bz2", "a9a.t": "a9a.t.bz2"}


def sample_path(name: str) -> pathlib.Path:
    """Path of a bundled sample file (``"a9a"`` or ``"a9a.t"``)."""
    if name not in _FILES:
        raise KeyError(f"no bundled sample {name!r}; available: {sorted(_FILES)}")
    return pathlib.Path(__file__).with_name(_FILES[name])
