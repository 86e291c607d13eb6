"""The worker's side of the dask backend (``_dask.py``): what runs in each worker
process — its share of a pass, the per-row state of the blocks it owns, and the rows it
sends to the training process (resident rows collected in a pass, rows read again on a
resume, a RAM slab's local state copies fetched and written back)."""

from __future__ import annotations

import dataclasses
import time

import numpy as np

from ._reduce import GroupRuns
from ._state import flagged_rows

__all__ = ["worker_drop", "worker_get_state", "worker_pass", "worker_put_rows",
           "worker_set_state", "worker_store_rows", "worker_take_rows"]

_CONTEXTS: dict = {}        # run key -> _Context, in each worker process


@dataclasses.dataclass
class _Context:
    backend: object                                   # a LocalBackend over the store
    states: dict = dataclasses.field(default_factory=dict)   # name -> {block: array}
    fused: tuple | None = None                        # (block ids, their rows as one block)
    joined: dict = dataclasses.field(default_factory=dict)  # name -> (ids, whole, views)


def _room(ctx, memory) -> int:
    """Bytes of this worker's budget left for its blocks (the cache or the fused copy)."""
    held = sum(a.nbytes for blocks in ctx.states.values() for a in blocks.values())
    return max(0, int(0.75 * memory) - held)


def _context(key, store, layout, memory) -> _Context:
    ctx = _CONTEXTS.setdefault(key, _Context(None))
    if ctx.backend is None:
        from ._local import LocalBackend
        ctx.backend = LocalBackend(store, layout, prefetch=2, readers=1, cache_bytes=0)
    fused = 0 if ctx.fused is None else ctx.fused[1].nbytes
    ctx.backend.cache.resize(max(0, _room(ctx, memory) - fused))
    return ctx


def _block_state(ctx, spec, block: int, n_rows: int) -> np.ndarray:
    """Block ``block``'s rows of state ``spec`` on this worker (created at its fill)."""
    name, dtype, width, fill = spec
    blocks = ctx.states.setdefault(name, {})
    arr = blocks.get(block)
    if arr is None:
        shape = (n_rows,) if width is None else (n_rows, width)
        arr = blocks[block] = np.full(shape, fill, dtype=np.dtype(dtype))
    return arr


def _joined_state(ctx, spec, ids, sizes) -> np.ndarray:
    """State ``spec`` of this worker's blocks ``ids`` (ascending, ``sizes`` rows each) as one
    array whose slices are the blocks' own arrays from now on: a fused pass's kernel writes
    the blocks' states in place, and the next fused pass over the same blocks takes the same
    array (CoCoA's rounds: each concatenated every state of the worker's rows and wrote it
    back, O(rows) a round whatever few rows it visits)."""
    name = spec[0]
    blocks = ctx.states.setdefault(name, {})
    got = ctx.joined.get(name)
    if got is not None and got[0] == ids and all(
            blocks.get(b) is v for b, v in zip(ids, got[2])):
        return got[1]
    if got is not None:                  # blocks no longer fused own their rows again (the
        for b, v in zip(got[0], got[2]):     # old array is freed once none is a view of it)
            if b not in ids and blocks.get(b) is v:
                blocks[b] = v.copy()
    whole = np.concatenate([_block_state(ctx, spec, b, n) for b, n in zip(ids, sizes)])
    cuts = np.cumsum([0] + list(sizes))
    views = tuple(whole[a:z] for a, z in zip(cuts[:-1], cuts[1:]))
    blocks.update(zip(ids, views))
    ctx.joined[name] = (ids, whole, views)
    return whole


def _state_view(ctx, spec, block):
    return _block_state(ctx, spec, block.id, block.n_rows)


def _fused_block(ctx, memory, ids):
    """This worker's blocks ``ids`` as one block, rows concatenated in ascending block
    order (whatever the pass's order: the kernels of fused passes visit rows in their own
    random order): ``(block, served from memory)``. The copy is kept for the next fused
    pass when it fits the worker's room for blocks, which then holds it instead of the
    cache's blocks (CoCoA's rounds: each concatenated the worker's share of the store
    again, most of a round's time on 10^7 rows)."""
    from ._blocks import Block
    be = ctx.backend
    key = tuple(sorted(ids))
    if ctx.fused is not None and ctx.fused[0] == key:
        be.cache_hits += len(key)
        return ctx.fused[1], True
    ctx.fused = None
    blocks = list(be.iter_blocks(list(key)))
    cached = all(b in be.cache for b in key)
    lens = np.concatenate([[0]] + [np.diff(b.indptr) for b in blocks])
    first = blocks[0]
    one = Block(first.id, first.row_start, np.cumsum(lens).astype(first.indptr.dtype),
                np.concatenate([b.indices for b in blocks]),
                np.concatenate([b.data for b in blocks]),
                np.concatenate([b.y for b in blocks]), chunk=first.chunk, memo={})
    del blocks
    held = one.nbytes + 16 * one.n_rows     # (and the 8-byte values its memo keeps a row)
    if held <= _room(ctx, memory):
        ctx.fused = (key, one)
        be.cache.resize(_room(ctx, memory) - held)
    return one, cached


def _kept(ctx, block, keep, ship: bool):
    """``(rows, nnz, (ids, y, X) or None)`` of the rows of ``block`` that ``keep`` marks
    (:meth:`DaskBackend.map_ids`), the rows themselves when ``ship``."""
    from ..kernels import kept_rows
    from ._slabs import block_rows
    key = _state_view(ctx, keep["state"], block)
    mask = np.empty(block.n_rows, dtype=bool)
    rows, nnz = kept_rows(block.indptr, key if key.ndim == 2 else key[:, None],
                          keep["threshold"], mask)
    if not ship or rows == 0:
        return int(rows), int(nnz), None
    r = np.flatnonzero(mask)
    return int(rows), int(nnz), (block.row_start + r, *block_rows(block, r, keep["unit"]))


def worker_pass(key, store, layout, memory, all_ids, visits, sweep, kernel, args, specs,
                 states, fuse=False, visit_state=None, keep=None):
    """One worker's share of a pass (module doc): ``(complete subtrees of run arrays,
    fused run arrays, {rank: per-block accumulators}, counters)``; ``all_ids`` are the
    whole pass's visits (which groups the tree waits for); ``visit_state``: the spec of
    the state whose flagged rows are a cached block's visits; ``keep``: the rows kept
    for the client (:meth:`DaskBackend.map_ids`): once those shipped exceed
    ``keep["limit"]`` bytes, none is (``over``: the client's collection gives up, as a
    local one over its room does)."""
    ctx = _context(key, store, layout, memory)
    be = ctx.backend

    def rows_visited(blk) -> int:           # (after the block is read: cached or not)
        if visit_state is None or blk.id not in be.cache:
            return int(blk.n_rows)
        return flagged_rows(_state_view(ctx, visit_state, blk))
    n_visited = 0
    before = (be.store_reads, be.cache_hits, be.bytes_read)
    run_specs = {k: s for k, s in specs.items() if not s.per_block}
    runs = None if fuse else GroupRuns(run_specs, all_ids, layout.groups)
    run = {k: s.new() for k, s in run_specs.items()} if fuse else None
    per_block, kept = {}, {}
    shipped, over = 0, False
    ids = [b for b, _, _ in visits]
    t_kernel = 0.0
    if fuse:
        b0, rank0, pos0 = visits[0]
        one, in_memory = _fused_block(ctx, memory, ids)
        mine = tuple(sorted(ids))
        sizes = [int(layout.sizes[b]) for b in mine]
        if visit_state is None or not in_memory:
            n_visited = int(one.n_rows)
        else:
            n_visited = sum(flagged_rows(_block_state(ctx, visit_state, b, n))
                            for b, n in zip(mine, sizes))
        views = tuple(_joined_state(ctx, s, mine, sizes) for s in states)
        # named by the pass's first block, as when the blocks were concatenated in the
        # pass's order: the kernels seed their draws by it (a fixed name fixed CoCoA's parts
        # of a sweep: dcd on a9a, 2 workers, 101 passes and 6,208 rounds against 67.6, 2,742)
        one = dataclasses.replace(one, id=b0, row_start=int(layout.start[b0]), sweep=sweep,
                                  position=pos0, rank=rank0)
        t0 = time.perf_counter()
        kernel(one, views, args, run)
        t_kernel += time.perf_counter() - t0
    else:
        for (b, rank, position), block in zip(visits, be.iter_blocks(ids)):
            block = dataclasses.replace(block, sweep=sweep, position=position, rank=rank)
            n_visited += rows_visited(block)
            views = tuple(_state_view(ctx, s, block) for s in states)
            acc = dict(runs.arrays(b))
            acc.update({k: s.new() for k, s in specs.items() if s.per_block})
            t0 = time.perf_counter()
            kernel(block, views, args, acc)
            t_kernel += time.perf_counter() - t0
            runs.done(b)
            per_block[rank] = {k: acc[k] for k, s in specs.items() if s.per_block}
            if keep is not None:           # (the rows shipped up to this worker's limit)
                ship = keep["limit"] is not None and not over
                rows, nnz, part = _kept(ctx, block, keep, ship)
                if part is not None:
                    shipped += nnz * keep["row_bytes"] + rows * keep["extra"]
                    if shipped > keep["limit"]:
                        over, part = True, None
                        kept = {p: v[:3] + (None,) for p, v in kept.items()}
                kept[position] = (b, rows, nnz, part)
    stats = {"store_reads": be.store_reads - before[0], "cache_hits": be.cache_hits - before[1],
             "bytes_read": be.bytes_read - before[2], "kernel_seconds": t_kernel,
             "visits": n_visited, "kept": kept, "over": over}
    return ({} if fuse else runs.nodes()), run, per_block, stats


def worker_get_state(key, name):
    ctx = _CONTEXTS.get(key)
    return dict(ctx.states.get(name, {})) if ctx is not None else {}


def worker_set_state(key, name, blocks):
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = _CONTEXTS[key] = _Context(None)
    ctx.states[name] = dict(blocks)
    ctx.joined.pop(name, None)


def worker_take_rows(key, spec, wanted):
    """``{block: its rows' values}`` for ``wanted`` = ``{block: (rows, local rows)}``."""
    ctx = _CONTEXTS.setdefault(key, _Context(None))
    return {b: _block_state(ctx, spec, b, n)[r] for b, (n, r) in wanted.items()}


def worker_store_rows(key, store, layout, memory, wanted, unit):
    """``[(positions, y, X)]`` of ``wanted`` = ``{block: (positions, local rows)}``, the
    blocks read here (from this worker's cache or the store)."""
    from ._slabs import block_rows
    be = _context(key, store, layout, memory).backend
    ids = sorted(wanted)
    return [(wanted[b][0], *block_rows(blk, wanted[b][1], unit))
            for b, blk in zip(ids, be.iter_blocks(ids))]


def worker_put_rows(key, spec, given):
    """Write ``given`` = ``{block: (rows, local rows, values)}`` into state ``spec``."""
    ctx = _CONTEXTS.setdefault(key, _Context(None))
    for b, (n, r, values) in given.items():
        _block_state(ctx, spec, b, n)[r] = values


def worker_drop(key, name):
    """Forget state ``name`` of run ``key`` (every state and the cache when None)."""
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        return
    if name is None:
        del _CONTEXTS[key]
    else:
        ctx.states.pop(name, None)
        ctx.joined.pop(name, None)
