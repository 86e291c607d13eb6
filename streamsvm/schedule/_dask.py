"""The ``dask.distributed`` backend (DESIGN.md §4): passes run on a cluster's workers.

Reduction groups of blocks (``_reduce.py``) are split into contiguous ranges, one per worker
(balanced by rows; stable for the run, rebalanced only when a worker leaves). A pass submits one task per worker that owns
visited blocks; the worker

* reads its blocks from the store itself (the store object carries its URL and storage
  options; a shared filesystem or S3 — chunk data never goes through the client or the
  dask scheduler) and keeps them in its own cache (the run's ``memory`` budget per worker,
  less its states);
* keeps the per-row state of the blocks it owns (created on first use, in its memory);
* runs the same module-level kernel as the local backend on each block, in visiting order,
  adding into its groups' run accumulators, folds them along the reduction tree as far as
  its own groups allow, and returns those subtrees with the per-block partials.

The client completes the tree and folds the per-block partials by rank, as the local
backend does: a map/reduce pass gives bit-for-bit the numbers of the local backend, on any
number of workers. A fused pass (``fuse=True``: each worker's blocks as one, for CoCoA+)
adds the workers' run arrays in block order instead; its results depend on the cluster
shape by construction.

A worker that leaves during a pass makes the pass fail with
:class:`~streamsvm.exceptions.WorkerLostError` (the tasks pinned to it would wait forever:
they are cancelled); the driver then rebalances the blocks over the remaining workers and
resumes from its last snapshot of the run, per-row state included (``solvers/_driver.py``).
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid

import numpy as np

from ..exceptions import InvalidParameterError, WorkerLostError
from ._backend import Backend
from ._cache import BlockCache
from ._reduce import GroupRuns
from ._state import flagged_rows

__all__ = ["DaskBackend", "connect"]

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.5         # how often a waiting pass checks that its workers are alive


def connect(scheduler):
    """``(client, owned)``: a ``distributed.Client`` for ``scheduler`` (a Client, or the
    address of a dask scheduler such as ``"tcp://10.0.0.5:8786"``), and whether this call
    created it (and so closes it)."""
    try:
        import distributed
    except ImportError:             # pragma: no cover - the dask extra is declared
        raise InvalidParameterError("scheduler= needs dask.distributed: pip install "
                                    "'streamsvm[dask]'") from None
    if isinstance(scheduler, distributed.Client):
        return scheduler, False
    if not isinstance(scheduler, str) or not scheduler:
        raise InvalidParameterError(f"The 'scheduler' parameter must be a dask Client or a "
                                    f"scheduler address such as 'tcp://host:8786'. Got "
                                    f"{scheduler!r} instead.")
    try:
        client = distributed.Client(scheduler, set_as_default=False, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise InvalidParameterError(f"cannot reach the dask scheduler at {scheduler!r}: "
                                    f"{exc}") from None
    return client, True


def _not_in_this_process() -> InvalidParameterError:
    """The error of a request for blocks in the training process (a sweep over resident
    rows, a kernel run here), which this backend's workers do not send back."""
    return InvalidParameterError(
        "this solver reads blocks in the training process (dual coordinate descent, "
        "resident rows), which a dask cluster does not provide: its workers run "
        "map/reduce passes only; train without scheduler=")


class DaskBackend(Backend):
    """Run map/reduce passes on the workers of ``client`` (module doc).

    Parameters
    ----------
    client : distributed.Client
    store : Store
        Opened again by every worker (a local ``InMemoryStore`` cannot be).
    layout : BlockLayout
    memory : int
        Bytes each worker may use for its blocks' cache and per-row state.
    owned : bool
        Close ``client`` with the backend.
    """

    remote = True

    def __init__(self, client, store, layout, *, memory: int, owned: bool = False):
        from ..io import InMemoryStore
        if isinstance(store, InMemoryStore):
            raise InvalidParameterError(
                "a dask cluster reads the store itself: give a store path or URL that every "
                "worker can read (a shared filesystem or S3), not an in-memory store")
        self.client, self.owned = client, owned
        self.store, self.layout, self.memory = store, layout, int(memory)
        self.key = uuid.uuid4().hex
        self.cache = BlockCache(0)           # nothing is cached in this process
        self.prefetch = self.prefetch_asked = 0
        self.readers = self.readers_asked = self.threads = 1
        self.helps = False          # (the workers read; the client never waits on a read)
        self.keep_chunks = 0
        self.store_reads = self.cache_hits = self.bytes_read = 0
        self.kernel_seconds = 0.0
        self.specs: dict = {}                # state name -> (dtype, width, fill)
        self.workers: list = []
        self.owner = np.zeros(layout.n_blocks, dtype=np.int64)
        self.rebalance()

    # -- placement -----------------------------------------------------------------------
    def alive(self) -> list:
        return sorted(self.client.scheduler_info()["workers"])

    def rebalance(self) -> None:
        """Reduction groups split into contiguous ranges of about equal rows, one per live
        worker (at most one worker per group: more stay idle)."""
        workers = self.alive()
        if not workers:
            raise WorkerLostError("the dask cluster has no workers left", self.workers)
        groups = self.layout.groups
        n_groups = int(groups.max()) + 1 if len(groups) else 1
        sizes = np.bincount(groups, weights=self.layout.sizes, minlength=n_groups)
        cum = np.cumsum(sizes) - 0.5 * sizes
        total = max(float(sizes.sum()), 1.0)
        used = min(len(workers), n_groups)
        per_group = np.minimum((cum / total * used).astype(np.int64), used - 1)
        self.owner = per_group[groups] if len(groups) else np.zeros(0, dtype=np.int64)
        self.workers = workers
        if used < len(workers):
            log.warning("dask backend: the store has %d reduction group(s) (_reduce.py: at "
                        "most 32, fewer for a small store next to its width or with few "
                        "blocks): %d of %d workers get no blocks", n_groups,
                        len(workers) - used, len(workers))
        log.info("dask backend: %d blocks on %d workers", self.layout.n_blocks, len(workers))

    @property
    def partitions(self) -> int:
        """How many workers own blocks."""
        return max(1, len(np.unique(self.owner)))

    def _submit(self, fn, w, *args):
        return self.client.submit(fn, *args, workers=[self.workers[w]],
                                  allow_other_workers=False, pure=False)

    def _gather(self, futures: dict) -> dict:
        """``{w: result}`` of one task per worker; a worker that left raises
        :class:`WorkerLostError` (its pinned tasks cancelled), a task's own error is
        raised as it was."""
        import distributed
        pending = dict(futures)
        out = {}
        while pending:
            # wait on one task at a time through its own future (distributed.wait would
            # need a default client, which a process that only passed scheduler= has not)
            w, f = next(iter(pending.items()))
            try:
                out[w] = f.result(timeout=_POLL_SECONDS)
                del pending[w]
            except (TimeoutError, distributed.TimeoutError):
                pass
            except (KeyboardInterrupt, SystemExit):
                raise
            except BaseException:                   # (CancelledError is one)
                if f.status == "error":             # the task's own exception
                    for g in pending.values():
                        g.cancel()
                    raise
                if self.workers[w] in set(self.alive()):
                    raise
            for w2, g in list(pending.items()):     # the others done meanwhile
                if g.status == "finished":
                    try:        # held by its worker: lost with it if it dies meanwhile
                        out[w2] = g.result(timeout=_POLL_SECONDS)
                    except (TimeoutError, distributed.TimeoutError):
                        continue
                    del pending[w2]
                elif g.status == "error":
                    for h in pending.values():
                        h.cancel()
                    g.result()                      # raises the worker's exception
            if pending:
                alive = set(self.alive())
                lost = [self.workers[w] for w in pending if self.workers[w] not in alive]
                if lost:
                    for g in pending.values():
                        g.cancel()
                    raise WorkerLostError(f"dask worker(s) {', '.join(lost)} left during a "
                                          f"pass; their per-row state is gone", lost)
        return out

    # -- passes ----------------------------------------------------------------------------
    def map_ids(self, kernel, ids, ranks, sweep: int, states, args, specs: dict,
                fuse: bool = False, visits: str | None = None):
        """Run ``kernel`` on the blocks ``ids`` (visiting order, ``ranks`` their fold ranks)
        on their owners; returns, worker by worker in block order, ``(complete subtrees of
        run arrays, fused run arrays, {rank: per-block partials})``
        (:meth:`PassScheduler.map_reduce`), and the rows visited. ``fuse``: each worker
        hands the kernel its blocks as one (their rows concatenated, state written back
        after). ``visits``: the state whose flagged rows are the visits of a block in a
        worker's cache (:meth:`PassScheduler.map_reduce`)."""
        by_worker: dict = {}
        for position, (b, rank) in enumerate(zip(ids.tolist(), ranks.tolist())):
            by_worker.setdefault(int(self.owner[b]), []).append((b, rank, position))
        st = tuple((s.name,) + self.specs[s.name] for s in states)
        vst = None if visits is None else (visits,) + self.specs[visits]
        futures = {w: self._submit(_worker_pass, w, self.key, self.store, self.layout,
                                   self.memory, ids, mine, sweep, kernel, args, specs, st,
                                   fuse, vst)
                   for w, mine in by_worker.items()}
        results = self._gather(futures)
        order = sorted(results, key=lambda w: min(v[0] for v in by_worker[w]))
        parts = []
        visited = 0
        for w in order:
            nodes, run, per_block, stats = results[w]
            visited += stats["visits"]
            parts.append((nodes, run, per_block))
            self.store_reads += stats["store_reads"]
            self.cache_hits += stats["cache_hits"]
            self.bytes_read += stats["bytes_read"]
            self.kernel_seconds += stats["kernel_seconds"]
        return parts, visited

    # -- blocks in this process: none --------------------------------------------------
    def iter_blocks(self, ids, source=None):
        raise _not_in_this_process()

    def map_blocks(self, kernel, blocks, *, views, args, folder, after=None) -> None:
        raise _not_in_this_process()

    def read_all(self):
        raise _not_in_this_process()

    # -- per-row state -------------------------------------------------------------------
    def new_state(self, name: str, dtype, width, fill) -> None:
        self.specs[name] = (np.dtype(dtype).str, width, fill)

    def gather_state(self, name: str, shape: tuple, dtype) -> np.ndarray:
        """The whole state, its blocks collected from their owners (unset blocks: fill)."""
        dt, width, fill = self.specs[name]
        out = np.full(shape, fill, dtype=dtype)
        futures = {w: self._submit(_worker_get_state, w, self.key, name)
                   for w in range(len(self.workers))}
        for parts in self._gather(futures).values():
            for b, arr in parts.items():
                out[self.layout.start[b]:self.layout.stop[b]] = arr
        return out

    def scatter_state(self, name: str, values: np.ndarray) -> None:
        """Set the whole state: each owner gets its blocks (and drops any others)."""
        lay = self.layout
        futures = {}
        for w in range(len(self.workers)):
            mine = {int(b): np.array(values[lay.start[b]:lay.stop[b]])
                    for b in np.flatnonzero(self.owner == w)}
            futures[w] = self._submit(_worker_set_state, w, self.key, name, mine)
        self._gather(futures)

    def fill_state(self, name: str, value) -> None:
        dt, width, _ = self.specs[name]
        self.specs[name] = (dt, width, value)
        self._gather({w: self._submit(_worker_drop, w, self.key, name)
                      for w in range(len(self.workers))})

    def drop_state(self, name: str) -> None:
        self.specs.pop(name, None)
        try:
            self._gather({w: self._submit(_worker_drop, w, self.key, name)
                          for w in range(len(self.workers))})
        except WorkerLostError:
            pass

    def close(self) -> None:
        try:
            alive = set(self.alive())
            futures = {w: self._submit(_worker_drop, w, self.key, None)
                       for w in range(len(self.workers)) if self.workers[w] in alive}
            self._gather(futures)
        except Exception as exc:        # the run's result stands; say what was left behind
            log.warning("dask backend: could not free the workers' state of run %s: %s",
                        self.key, exc)
        if self.owned:
            self.client.close()


# -- the worker's side ---------------------------------------------------------------------

_CONTEXTS: dict = {}        # run key -> _Context, in each worker process


@dataclasses.dataclass
class _Context:
    backend: object                                   # a LocalBackend over the store
    states: dict = dataclasses.field(default_factory=dict)   # name -> {block: array}


def _context(key, store, layout, memory) -> _Context:
    ctx = _CONTEXTS.setdefault(key, _Context(None))
    if ctx.backend is None:
        from ._local import LocalBackend
        ctx.backend = LocalBackend(store, layout, prefetch=2, readers=1, cache_bytes=0)
    held = sum(a.nbytes for blocks in ctx.states.values() for a in blocks.values())
    ctx.backend.cache.resize(max(0, int(0.75 * memory) - held))
    return ctx


def _state_view(ctx, spec, block):
    name, dtype, width, fill = spec
    blocks = ctx.states.setdefault(name, {})
    arr = blocks.get(block.id)
    if arr is None:
        shape = (block.n_rows,) if width is None else (block.n_rows, width)
        arr = blocks[block.id] = np.full(shape, fill, dtype=np.dtype(dtype))
    return arr


def _fused(blocks, views_of):
    """The blocks as one (rows concatenated in order), with their states' rows."""
    from ._blocks import Block
    lens = np.concatenate([[0]] + [np.diff(b.indptr) for b in blocks])
    first = blocks[0]
    one = Block(first.id, first.row_start, np.cumsum(lens).astype(first.indptr.dtype),
                np.concatenate([b.indices for b in blocks]),
                np.concatenate([b.data for b in blocks]),
                np.concatenate([b.y for b in blocks]), chunk=first.chunk)
    per = [views_of(b) for b in blocks]
    views = tuple(np.concatenate([v[j] for v in per]) for j in range(len(per[0])))
    return one, views, per


def _worker_pass(key, store, layout, memory, all_ids, visits, sweep, kernel, args, specs,
                 states, fuse=False, visit_state=None):
    """One worker's share of a pass (module doc): ``(complete subtrees of run arrays,
    fused run arrays, {rank: per-block accumulators}, counters)``; ``all_ids`` are the
    whole pass's visits (which groups the tree waits for); ``visit_state``: the spec of
    the state whose flagged rows are a cached block's visits."""
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
    per_block = {}
    ids = [b for b, _, _ in visits]
    t_kernel = 0.0
    if fuse:
        blocks = list(be.iter_blocks(ids))
        b0, rank0, pos0 = visits[0]
        n_visited = sum(rows_visited(blk) for blk in blocks)
        one, views, per = _fused(blocks, lambda blk: tuple(_state_view(ctx, s, blk)
                                                           for s in states))
        one = dataclasses.replace(one, sweep=sweep, position=pos0, rank=rank0)
        t0 = time.perf_counter()
        kernel(one, views, args, run)
        t_kernel += time.perf_counter() - t0
        start = 0
        for blk, vs in zip(blocks, per):            # the states' rows written back
            for j, v in enumerate(vs):
                v[...] = views[j][start:start + blk.n_rows]
            start += blk.n_rows
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
    stats = {"store_reads": be.store_reads - before[0], "cache_hits": be.cache_hits - before[1],
             "bytes_read": be.bytes_read - before[2], "kernel_seconds": t_kernel,
             "visits": n_visited}
    return ({} if fuse else runs.nodes()), run, per_block, stats


def _worker_get_state(key, name):
    ctx = _CONTEXTS.get(key)
    return dict(ctx.states.get(name, {})) if ctx is not None else {}


def _worker_set_state(key, name, blocks):
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        ctx = _CONTEXTS[key] = _Context(None)
    ctx.states[name] = dict(blocks)


def _worker_drop(key, name):
    """Forget state ``name`` of run ``key`` (every state and the cache when None)."""
    ctx = _CONTEXTS.get(key)
    if ctx is None:
        return
    if name is None:
        del _CONTEXTS[key]
    else:
        ctx.states.pop(name, None)
