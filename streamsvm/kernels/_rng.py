"""A small, fast random generator for kernels: SplitMix64 (Steele, Lea & Flood 2014).

The epoch loops draw one bounded integer per visited row to shuffle the visit order;
numba's ``np.random.randint`` costs about 11 ns a draw here, SplitMix64 about 1 ns
(scratch measurement while writing this module, 20 shuffles of 32,561 ids). The state is a
one-element uint64 array owned by the caller, so a call is reproducible from its seed and
the state after it can be saved.
"""

from __future__ import annotations

import numpy as np

from ._jit import kernel_inline

__all__ = ["rand_below", "rand_unit", "splitmix", "shuffle_prefix"]

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31, _S11 = np.uint64(30), np.uint64(27), np.uint64(31), np.uint64(11)


@kernel_inline
def splitmix(s):
    """``(next state, uniform float in [0, 1) with 53 random bits)`` from a state value: for
    loops that keep the state in a register (:func:`rand_unit` is the same draw)."""
    s = s + _GOLDEN
    z = (s ^ (s >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    z = z ^ (z >> _S31)
    return s, np.float64(z >> _S11) * (1.0 / 9007199254740992.0)


@kernel_inline
def rand_unit(state):
    """A uniform float in ``[0, 1)`` with 53 random bits; advances ``state[0]``."""
    s, u = splitmix(state[0])
    state[0] = s
    return u


@kernel_inline
def rand_below(state, m):
    """A uniform integer in ``[0, m)`` (``0 < m ≤ 2**53``); advances ``state[0]``."""
    j = np.int64(rand_unit(state) * m)
    return min(j, m - 1)


@kernel_inline
def shuffle_prefix(work, m, state):
    """Fisher–Yates shuffle of ``work[:m]`` in place."""
    for t in range(m - 1):
        j = t + rand_below(state, m - t)
        tmp = work[t]
        work[t] = work[j]
        work[j] = tmp
