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

The worker's side is ``_dask_worker.py``. A pass with resident rows (newton's polish
and cg) counts each block's kept rows on its worker after the kernel and sends those the
training process collects into its RAM slab (the only slab on a cluster); their per-row
states are fetched and written back by row id (:meth:`DaskBackend.take_rows`,
:meth:`DaskBackend.put_rows`), and a resume reads them again on the workers
(:meth:`DaskBackend.store_rows`).

The client completes the tree and folds the per-block partials by rank, as the local
backend does: a map/reduce pass gives bit-for-bit the numbers of the local backend, on any
number of workers. A fused pass (``fuse=True``: each worker's blocks as one, in ascending
block order, kept on the worker between passes while they fit its budget; for CoCoA+) adds
the workers' run arrays in block order instead; its results depend on the cluster shape by
construction.

A worker that leaves during a pass makes the pass fail with
:class:`~streamsvm.exceptions.WorkerLostError` (the tasks pinned to it would wait forever:
they are cancelled); the driver then rebalances the blocks over the remaining workers and
resumes from its last snapshot of the run, per-row state included (``solvers/_driver.py``).
"""

from __future__ import annotations

import logging
import threading
import uuid

import numpy as np

from ..exceptions import InvalidParameterError, WorkerLostError
from ._backend import Backend
from ._cache import BlockCache
from ._dask_worker import (worker_drop, worker_get_state, worker_pass, worker_put_rows,
                           worker_set_state, worker_store_rows, worker_take_rows)

__all__ = ["DaskBackend", "connect"]

log = logging.getLogger(__name__)

_POLL_SECONDS = 0.5         # how often a waiting pass checks that its workers are alive
_FETCH_SECONDS = 5.0        # the first timeout of a finished task's result (then doubled)


def _worker_addresses(dask_scheduler=None) -> list:
    """The workers the scheduler has now (run on the scheduler)."""
    return list(dask_scheduler.workers)


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

    def _gone(self, names) -> list:
        """The workers of ``names`` the scheduler no longer has. The client's view
        (:meth:`alive`) is a copy it refreshes now and then, which once listed no worker
        for a moment while both were busy with a pass (a run then resumed from its
        snapshot for nothing): a loss it shows is confirmed by asking the scheduler."""
        alive = set(self.alive())
        if all(n in alive for n in names):
            return []
        try:
            alive = set(self.client.run_on_scheduler(_worker_addresses))
        except Exception:                   # (the scheduler itself unreachable)
            pass
        return [n for n in names if n not in alive]

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
        raised as it was.

        Waits on the tasks' states (woken by their callbacks, the workers' liveness checked
        every ``_POLL_SECONDS``) and fetches a result once its task has finished, with a
        timeout that doubles while its worker is alive: a result of many MB (the rows a
        pass sends) takes longer than a poll to arrive, and ``Future.result(timeout=…)``
        cut short in the middle of a transfer fails inside dask (an ``UnboundLocalError``
        in ``distributed.utils.sync``, seen on a 10^6-row store)."""
        pending = dict(futures)
        out = {}
        woken = threading.Event()
        for f in pending.values():
            f.add_done_callback(lambda _: woken.set())
        while pending:
            woken.clear()
            for w, f in list(pending.items()):
                if f.status == "finished":
                    out[w] = self._fetch(w, f, pending)
                    del pending[w]
                elif f.status == "error":           # the task's own exception
                    self._cancel(pending)
                    f.result()
            if pending:
                lost = self._gone([self.workers[w] for w in pending])
                if lost:
                    self._cancel(pending)
                    raise WorkerLostError(f"dask worker(s) {', '.join(lost)} left during a "
                                          f"pass; their per-row state is gone", lost)
                woken.wait(_POLL_SECONDS)
        return out

    def _fetch(self, w: int, f, pending: dict):
        """The result of the finished task ``f`` of worker ``w`` (held by that worker:
        lost with it if it dies meanwhile)."""
        import distributed
        timeout = _FETCH_SECONDS
        while True:
            try:
                return f.result(timeout=timeout)
            except (KeyboardInterrupt, SystemExit):
                raise
            except (TimeoutError, distributed.TimeoutError, UnboundLocalError):
                timeout *= 2                        # (still arriving: see _gather)
            except BaseException:                   # (CancelledError is one)
                if f.status == "error":
                    self._cancel(pending)
                    raise
                if not self._gone([self.workers[w]]):
                    raise
            if self._gone([self.workers[w]]):
                self._cancel(pending)
                raise WorkerLostError(f"dask worker(s) {self.workers[w]} left during a pass; "
                                      f"their per-row state is gone", [self.workers[w]])

    @staticmethod
    def _cancel(pending: dict) -> None:
        for g in pending.values():
            g.cancel()

    # -- passes ----------------------------------------------------------------------------
    def map_ids(self, kernel, ids, ranks, sweep: int, states, args, specs: dict,
                fuse: bool = False, visits: str | None = None, keep=None):
        """Run ``kernel`` on the blocks ``ids`` (visiting order, ``ranks`` their fold ranks)
        on their owners; returns, worker by worker in block order, ``(complete subtrees of
        run arrays, fused run arrays, {rank: per-block partials})``
        (:meth:`PassScheduler.map_reduce`), and the rows visited. ``fuse``: each worker
        hands the kernel its blocks as one (their rows concatenated, state written back
        after). ``visits``: the state whose flagged rows are the visits of a block in a
        worker's cache (:meth:`PassScheduler.map_reduce`). ``keep``: a dict, each block's
        rows whose state ``keep["state"]`` reaches ``keep["threshold"]`` counted after the
        kernel, and sent here (resident rows collected from the workers) up to
        ``keep["limit"]`` bytes in all (None: none; ``row_bytes`` per entry and ``extra``
        per row), each worker its share by rows; returned last, as ``({position: (block,
        rows, nnz, (ids, y, X) or None)}, whether a worker's rows went over its share and
        none were sent)``."""
        by_worker: dict = {}
        for position, (b, rank) in enumerate(zip(ids.tolist(), ranks.tolist())):
            by_worker.setdefault(int(self.owner[b]), []).append((b, rank, position))
        st = tuple((s.name,) + self.specs[s.name] for s in states)
        vst = None if visits is None else (visits,) + self.specs[visits]
        keeps = {w: None for w in by_worker}
        if keep is not None:
            spec = (keep["state"],) + self.specs[keep["state"]]
            sizes, total = self.layout.sizes, max(1, int(self.layout.sizes.sum()))
            for w in by_worker:
                share = None if keep["limit"] is None else \
                    keep["limit"] * int(sizes[self.owner == w].sum()) / total
                keeps[w] = dict(keep, state=spec, limit=share)
        futures = {w: self._submit(worker_pass, w, self.key, self.store, self.layout,
                                   self.memory, ids, mine, sweep, kernel, args, specs, st,
                                   fuse, vst, keeps[w])
                   for w, mine in by_worker.items()}
        results = self._gather(futures)
        order = sorted(results, key=lambda w: min(v[0] for v in by_worker[w]))
        parts = []
        visited = 0
        kept: dict = {}
        over = False
        for w in order:
            nodes, run, per_block, stats = results[w]
            visited += stats["visits"]
            kept.update(stats["kept"])
            over = over or stats["over"]
            parts.append((nodes, run, per_block))
            self.store_reads += stats["store_reads"]
            self.cache_hits += stats["cache_hits"]
            self.bytes_read += stats["bytes_read"]
            self.kernel_seconds += stats["kernel_seconds"]
        return parts, visited, (kept, over)

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
        futures = {w: self._submit(worker_get_state, w, self.key, name)
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
            futures[w] = self._submit(worker_set_state, w, self.key, name, mine)
        self._gather(futures)

    def _by_owner(self, ids: np.ndarray) -> dict:
        """``{worker: {block: (positions in ids, local rows)}}`` of the global rows ``ids``."""
        lay = self.layout
        blocks = np.searchsorted(lay.start, ids, side="right") - 1
        order = np.argsort(blocks, kind="stable")      # positions grouped by block, in order
        present, first = np.unique(blocks[order], return_index=True)
        out: dict = {}
        for b, at in zip(present.tolist(), np.split(order, first[1:])):
            out.setdefault(int(self.owner[b]), {})[b] = (at, ids[at] - lay.start[b])
        return out

    def take_rows(self, name: str, ids: np.ndarray, dtype) -> np.ndarray:
        """The rows ``ids`` of state ``name``, fetched from their owners (one task per
        worker holding some)."""
        dt, width, fill = self.specs[name]
        out = np.empty((len(ids),) if width is None else (len(ids), width), dtype=dtype)
        where = self._by_owner(ids)
        futures = {w: self._submit(worker_take_rows, w, self.key, (name, dt, width, fill),
                                   {b: (int(self.layout.sizes[b]), r)
                                    for b, (_, r) in mine.items()})
                   for w, mine in where.items()}
        for w, parts in self._gather(futures).items():
            for b, values in parts.items():
                out[where[w][b][0]] = values
        return out

    def store_rows(self, ids: np.ndarray, unit: bool) -> list:
        """``[(positions in ids, y, X)]``: the rows ``ids``, read from the store by the
        workers that own their blocks (``_slabs.rows_from_store``: a resume rebuilding a
        RAM slab in the training process)."""
        where = self._by_owner(ids)
        futures = {w: self._submit(worker_store_rows, w, self.key, self.store, self.layout,
                                   self.memory, mine, unit)
                   for w, mine in where.items()}
        return [piece for w in sorted(where) for piece in self._gather(futures)[w]] \
            if futures else []

    def put_rows(self, name: str, ids: np.ndarray, values: np.ndarray) -> None:
        """Write ``values`` into the rows ``ids`` of state ``name``, on their owners."""
        dt, width, fill = self.specs[name]
        where = self._by_owner(ids)
        self._gather({w: self._submit(worker_put_rows, w, self.key, (name, dt, width, fill),
                                      {b: (int(self.layout.sizes[b]), r, values[at])
                                       for b, (at, r) in mine.items()})
                      for w, mine in where.items()})

    def fill_state(self, name: str, value) -> None:
        dt, width, _ = self.specs[name]
        self.specs[name] = (dt, width, value)
        self._gather({w: self._submit(worker_drop, w, self.key, name)
                      for w in range(len(self.workers))})

    def drop_state(self, name: str) -> None:
        self.specs.pop(name, None)
        try:
            self._gather({w: self._submit(worker_drop, w, self.key, name)
                          for w in range(len(self.workers))})
        except WorkerLostError:
            pass

    def close(self) -> None:
        try:
            alive = set(self.alive())
            futures = {w: self._submit(worker_drop, w, self.key, None)
                       for w in range(len(self.workers)) if self.workers[w] in alive}
            self._gather(futures)
        except Exception as exc:        # the run's result stands; say what was left behind
            log.warning("dask backend: could not free the workers' state of run %s: %s",
                        self.key, exc)
        if self.owned:
            self.client.close()
