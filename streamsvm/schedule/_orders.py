"""Block visiting orders: sequential, seeded random, cyclic, explicit and weighted schedules.

Every order depends only on ``(seed, sweep)`` — never on timing, thread count or the cache —
so a resumed run that restores the sweep counter visits exactly the same blocks.
Random streams are ``np.random.default_rng([seed, stream, ...])`` with a distinct
``stream`` constant per use, so the chunk order, the row permutations inside blocks and a
solver's own draws never share a generator.
"""

from __future__ import annotations

import numpy as np

from ..exceptions import InvalidParameterError

__all__ = ["ORDERS", "sweep_order", "visit_ranks", "weighted_schedule", "mix64",
           "chunk_groups", "group_window", "ORDER_STREAM", "ROW_STREAM", "USER_STREAM",
           "RESIDENT_STREAM"]

ORDERS = ("sequential", "random", "cyclic")

ORDER_STREAM = 0   # permutation of blocks in a "random" sweep
ROW_STREAM = 1     # PassScheduler.block_rng: randomness inside one visited block
USER_STREAM = 2    # PassScheduler.rng: a solver's own seeded draws
RESIDENT_STREAM = 3  # sweeps over resident rows on scratch disk: orders and row seeds

_MASK64 = (1 << 64) - 1


def mix64(*keys: int) -> int:
    """A 64-bit seed from non-negative integer keys: SplitMix64's finalizer applied after
    folding in each key (the same mixer as ``kernels._rng``)."""
    h = 0
    for key in keys:
        h = (h ^ (int(key) & _MASK64)) + 0x9E3779B97F4A7C15 & _MASK64
        h = (h ^ (h >> 30)) * 0xBF58476D1CE4E5B9 & _MASK64
        h = (h ^ (h >> 27)) * 0x94D049BB133111EB & _MASK64
        h ^= h >> 31
    return h


def sweep_order(order, n_blocks: int, seed: int, sweep: int, n_cyclic: int = 0) -> np.ndarray:
    """Block ids visited by one sweep, in visiting order.

    Parameters
    ----------
    order : {"sequential", "random", "cyclic"} or sequence of int
        ``"sequential"``: ``0, 1, ..., n_blocks - 1``. ``"random"``: a permutation drawn
        from ``default_rng([seed, ORDER_STREAM, sweep])``, new every sweep.
        ``"cyclic"``: ascending and descending in turn (ascending when ``n_cyclic`` is
        even), whatever other sweeps run in between. A sequence: those block ids in that
        order, repeats allowed (weighted schedules).
    n_blocks : int
    seed : int
    sweep : int
        Index of the sweep (0 for the first).
    n_cyclic : int
        Number of earlier ``"cyclic"`` sweeps.

    Returns
    -------
    ndarray of shape (n_visits,), int64
    """
    if isinstance(order, str):
        if order == "sequential":
            return np.arange(n_blocks, dtype=np.int64)
        if order == "random":
            rng = np.random.default_rng([seed, ORDER_STREAM, sweep])
            return rng.permutation(n_blocks).astype(np.int64)
        if order == "cyclic":
            ids = np.arange(n_blocks, dtype=np.int64)
            return ids if n_cyclic % 2 == 0 else ids[::-1].copy()
        raise InvalidParameterError(
            f"The 'order' parameter must be one of {ORDERS} or a sequence of block ids. "
            f"Got {order!r} instead.")
    ids = np.asarray(order)
    if ids.size == 0:
        return np.zeros(0, dtype=np.int64)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise InvalidParameterError(
            f"The 'order' parameter, when a sequence, must be a 1-d sequence of integer block "
            f"ids. Got an array of shape {ids.shape} and dtype {ids.dtype} instead.")
    bad = (ids < 0) | (ids >= n_blocks)
    if bad.any():
        raise InvalidParameterError(
            f"The 'order' parameter contains block id {int(ids[bad][0])}, outside "
            f"[0, {n_blocks}).")
    return ids.astype(np.int64)


def visit_ranks(ids: np.ndarray) -> np.ndarray:
    """Rank of each visit in ascending (block id, occurrence) order.

    ``ranks[j]`` is the position of visit ``j`` once the visits are sorted by block id, the
    k-th visit of a repeated block after its (k-1)-th. It depends only on the multiset of
    visits, not on their order: combining partial results by rank gives the same
    floating-point sums for every visiting order.

    Parameters
    ----------
    ids : ndarray of shape (n_visits,), int

    Returns
    -------
    ndarray of shape (n_visits,), int64
    """
    ranks = np.empty(len(ids), dtype=np.int64)
    ranks[np.argsort(ids, kind="stable")] = np.arange(len(ids), dtype=np.int64)
    return ranks


def weighted_schedule(weights, n: int, rng: np.random.Generator) -> np.ndarray:
    """A shuffled multiset of ``n`` block ids, block ``b`` appearing about ``n·w_b/Σw`` times.

    Counts use systematic sampling: with ``e_b = n·w_b/Σw`` and one uniform ``u``,
    block ``b`` gets ``ceil(E_b − u) − ceil(E_{b−1} − u)`` visits (``E`` the cumulative
    sum of ``e``). Every count is ``floor(e_b)`` or ``ceil(e_b)``, the expectation is
    exactly ``e_b``, and the counts sum to exactly ``n`` (no drift, unlike rounding each
    count). The multiset is then shuffled with ``rng``. Blocks of weight 0 never appear.

    Parameters
    ----------
    weights : array-like of shape (n_blocks,)
        Non-negative, finite, not all zero (e.g. AVSF chunk masses ``Σ_{i in b} p_i``).
    n : int
        Length of the schedule (number of block visits).
    rng : numpy.random.Generator
        For example ``sched.rng(epoch)``.

    Returns
    -------
    ndarray of shape (n,), int64
        Pass it as ``order`` to :meth:`PassScheduler.blocks` or ``map_reduce``.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 1 or not np.all(np.isfinite(w)) or np.any(w < 0) or not w.sum() > 0:
        raise InvalidParameterError(
            "The 'weights' parameter of weighted_schedule must be a 1-d array of finite, "
            "non-negative numbers that are not all zero.")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise InvalidParameterError(
            f"The 'n' parameter of weighted_schedule must be an int >= 0. Got {n!r} instead.")
    edges = np.cumsum(w) * (n / w.sum())
    edges[np.flatnonzero(w)[-1]:] = n   # exact total; trailing zero weights stay at 0 visits
    u = rng.random()
    cum = np.ceil(edges - u).astype(np.int64)
    counts = np.diff(np.concatenate(([0], np.maximum(cum, 0))))
    schedule = np.repeat(np.arange(len(w), dtype=np.int64), counts)
    return rng.permutation(schedule)


def chunk_groups(block_chunks: np.ndarray, ids: np.ndarray, size: int,
                 rng: np.random.Generator, window: int = 1) -> np.ndarray:
    """Blocks ``ids`` in a random order that reads each chunk once per pass and makes
    consecutive runs of ``size`` blocks come from ``size`` different chunks.

    Chunks are taken in random groups of ``size`` (new groups every pass) and their blocks
    alternate (``a0 b0 a1 b1 ...`` for two chunks), so every run of ``size`` consecutive
    blocks mixes rows of several chunks and no grouping is fixed (spec_003 §3.4: fixed
    contiguous groupings cost 3-8x more epochs). Within a chunk, windows of ``window``
    consecutive blocks keep their storage order, forwards or backwards at random, and the
    blocks inside a window are shuffled: neighbouring blocks share the store's compressed
    inner chunks at their boundary, and a window's blocks the inner chunks the reader keeps
    decoded (:func:`group_window`), so each inner chunk is decoded once.

    Parameters
    ----------
    block_chunks : ndarray of shape (n_blocks,)
        Store chunk of every block.
    ids : ndarray of int, ascending
        The blocks to visit.
    size : int
        Chunks per group (2: dcd's pairs).
    rng : numpy.random.Generator
    window : int
        Blocks per window (1: storage order; more draws from ``rng`` after the rest).

    Returns
    -------
    ndarray of int64
        ``ids`` reordered.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if len(ids) == 0:
        return ids
    chunk = block_chunks[ids]
    n_chunks = int(chunk.max()) + 1
    group_of = np.empty(n_chunks, dtype=np.int64)
    perm = rng.permutation(n_chunks)
    group_of[perm] = np.arange(n_chunks) // size      # chunk → its group this pass
    side = np.empty(n_chunks, dtype=np.int64)
    side[perm] = np.arange(n_chunks) % size           # its place in the group
    counts = np.bincount(chunk, minlength=n_chunks)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.arange(len(ids)) - starts[chunk]        # ids ascend: storage order
    backward = (rng.random(n_chunks) < 0.5)[chunk]
    within = np.where(backward, counts[chunk] - 1 - rank, rank)
    if window > 1:
        # windows of consecutive blocks keep their order; blocks inside one are shuffled
        shuffled = rng.permutation(len(ids))
        slot = np.empty(len(ids), dtype=np.int64)
        key = np.lexsort((shuffled, within // window, chunk))
        slot[key] = np.arange(len(ids))
        within = slot - starts[chunk]
    return ids[np.lexsort((side[chunk], within, group_of[chunk]))]


def group_window(size: int, keep: int, block_rows: int | None, store) -> int:
    """Consecutive blocks of a chunk that :func:`chunk_groups` may shuffle together (its
    ``window``) while each inner chunk is still decoded once.

    A window holds the rows of one inner chunk of the store's entry arrays
    (``store.rows_per_inner_chunk()``), so its rows straddle at most two; the reader keeps
    ``keep`` decoded inner chunks per array, shared by the ``size`` chunks of a group, and
    must keep two per chunk for that. Else (or where blocks are whole chunks) 1: storage
    order. The near-cyclic order of storage order costs dual coordinate descent dearly
    where a chunk has many blocks: a9a (one chunk), squared hinge, C = 0.01, ``--memory
    4MB`` (128 blocks of 256 rows): 201 passes uncertified in storage order, 13 with
    windows of 73 blocks, 8 with every block shuffled.
    """
    spare = keep // size - 1
    if block_rows is None or spare < 1:
        return 1
    return max(1, int(store.rows_per_inner_chunk() * spare) // block_rows)
