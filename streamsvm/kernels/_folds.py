"""Kernels of cross-validation in shared passes (``streamsvm._cv``): the fold of each row,
and a block of rows written once per model that trains on it.

A row's fold is a hash of its global row id and the seed (SplitMix64's finalizer), so the
folds do not depend on how the store is chunked or in which order blocks are read.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel
from ._rng import splitmix

__all__ = ["fold_of_rows", "expand_folds"]

_SEED_MIX = np.uint64(0xD1B54A32D192ED03)


@kernel
def fold_of_rows(row_start, k, seed, out):
    """``out[i]``: the fold in ``[0, k)`` of global row ``row_start + i``."""
    mix = np.uint64(seed) * _SEED_MIX
    for i in range(len(out)):
        _, u = splitmix(np.uint64(row_start + i) ^ mix)
        f = np.int64(u * k)
        out[i] = min(f, k - 1)


@kernel
def expand_folds(indptr, indices, data, y, folds, k, scales, width, n_features, bias,
                 out_indptr, out_indices, out_data, out_y):
    """Row ``i`` (of fold ``folds[i]``) written once for each model that trains on it: for
    each scale ``s = scales[j]`` and each fold ``c`` in ``[0, k)`` but its own, into the
    block ``b = j * k + c``: its features shifted by ``b * width`` and times ``s``, and when
    ``bias`` is not 0 the bias feature ``b * width + n_features`` of value ``bias * s``
    appended; the labels repeated."""
    p = 0
    r = 0
    out_indptr[0] = 0
    for i in range(len(y)):
        f = folds[i]
        a = indptr[i]
        b = indptr[i + 1]
        for j in range(len(scales)):
            s = scales[j]
            for c in range(k):
                if c == f:
                    continue
                off = (j * k + c) * width
                for t in range(a, b):
                    out_indices[p] = indices[t] + off
                    out_data[p] = data[t] * s
                    p += 1
                if bias != 0.0:
                    out_indices[p] = off + n_features
                    out_data[p] = bias * s
                    p += 1
                out_y[r] = y[i]
                r += 1
                out_indptr[r] = p
