"""The PassScheduler: the only component that touches data (DESIGN.md §4).

Solvers see the store only as a stream of *blocks* (a chunk, or a slice of one when
``block_rows`` splits chunks), visited in an order they choose, plus per-row state the
scheduler keeps aligned with the blocks. One call is one *sweep* over some blocks;
``passes`` counts rows visited / n_rows, so skipping blocks (shrinking) or visiting a
weighted subset costs fractional passes.

The scheduler is three parts over one object: ``_budget`` (every byte: needs, blocks in
flight, cache, the room of resident and hot rows), ``_sweeps`` (the sweep engine: orders,
``blocks``, ``map_reduce``, ``sweep``, the visit counters) and ``_keeps`` (per-row states,
scratch files, seeded generators, derived values, resumable counters); this module holds
the layout, the backend and the lifetime. Below them, one module each: ``_orders``
(visiting orders, weighted schedules), ``_blocks`` (block layout), ``_local`` (the thread
backend: read-ahead and the cache, ``_prefetch`` and ``_cache``), ``_reduce`` (fixed-order
reduction), ``_state`` (per-row state and spilling), ``_resident`` and ``_hot`` (rows kept
for revisits), ``_memory`` (budget strings).

Determinism: a sweep's order depends only on the seed and the sweep counters; reductions fold
per-block partials in (block id, occurrence) order; the cache changes where bytes come
from, never their values. Results are therefore identical for every memory budget,
prefetch depth and visiting order of a reduction, and a run restored with
:meth:`PassScheduler.load_state_dict` continues with the same orders.
"""

from __future__ import annotations

import os
import weakref
from collections.abc import Iterator

import numpy as np

from ..exceptions import InvalidParameterError
from ..io import StoreMeta
from ._blocks import Block, BlockLayout
from ._budget import Budget
from ._checks import check_int
from ._keeps import Keeps
from ._local import LocalBackend, default_readers
from ._memory import parse_memory
from ._orders import chunk_groups, group_window
from ._state import RowState, ScratchDir
from ._sweeps import Group, Reduced, Swept, Sweeps

__all__ = ["PassScheduler", "Group", "Reduced", "Swept"]


def _weak_call(method):
    """A function calling the bound ``method`` while its object lives, holding it weakly:
    what the scheduler hands the objects it owns does not make a reference cycle (its O(d)
    arrays would stay until the cyclic collector's next full sweep)."""
    ref = weakref.WeakMethod(method)

    def call(*args):
        m = ref()
        return None if m is None else m(*args)
    return call


class PassScheduler(Budget, Sweeps, Keeps):
    """Stream a store's blocks through solver code, counting passes.

    Parameters
    ----------
    store : StoreMeta
        A streamsvm store (:func:`~streamsvm.io.open_store`, ``InMemoryStore``, or another
        :class:`~streamsvm.io.StoreMeta`).
    memory : int or str, default="1GB"
        Budget for per-row state plus cached decoded blocks (``"2GB"``, ``"512MB"``,
        ``"1.5GiB"`` or bytes). State is served first; blocks are cached in what is left.
        States that do not fit spill to memmap files. The blocks in flight (at most
        ``prefetch + 2`` and what the reader keeps decoded) are charged to the budget too.
    prefetch : int, default=8
        Blocks read ahead by background threads while the current block is processed.
        0 reads in the calling thread.
    readers : int, optional
        Threads that read and decompress those blocks (at most ``prefetch``). Default:
        for a local store one fewer than the usable CPUs (at least 1), so the solver's
        kernel keeps a core to itself; for a remote store, ``prefetch``
        (:func:`~streamsvm.schedule._local.default_readers`).
    block_rows : int, optional
        Split chunks into blocks of at most this many rows. Default: one block per chunk.
    seed : int, default=0
        Seed of every random order and of :meth:`block_rng` and :meth:`rng`.
    scratch_dir : str or os.PathLike, optional
        Where spilled state files go (a private subdirectory, deleted by :meth:`close`).
        Default: the system temporary directory.
    scheduler : distributed.Client or str, optional
        Run the passes on a dask cluster (a Client, or a scheduler address such as
        ``"tcp://host:8786"``; ``_dask.py``): its workers read the store themselves and
        keep the per-row state of the blocks they own; ``memory`` is then each worker's
        budget. Only :meth:`map_reduce` passes run there.
    interrupt : callable, optional
        Polled while the scheduler sets up, before the first sweep (allocating and
        reserving per-row state, restoring a checkpoint's resident rows): when it returns
        True, ``KeyboardInterrupt`` is raised (:meth:`poll_interrupt`). A run asked to stop
        (SIGTERM) during a long set-up stops there, not after its first pass.

    Attributes
    ----------
    store : Store or InMemoryStore
        For metadata (``task``, ``classes``, ...); read data only through the scheduler.
    memory : int
        The budget in bytes.
    seed : int
    sweeps : int
        Sweeps started so far (index of the next one).
    cyclic_sweeps : int
        ``"cyclic"`` sweeps started so far (their parity gives the next direction).
    rows_visited, blocks_visited : int
        Rows and blocks handed to the caller, over all sweeps.

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from streamsvm.io import InMemoryStore
    >>> from streamsvm.kernels import csr_matvec
    >>> from streamsvm.schedule import Accumulator
    >>> X = sp.random(10, 4, density=0.5, format="csr", random_state=0)
    >>> y = np.r_[np.ones(5), -np.ones(5)]
    >>> sched = PassScheduler(InMemoryStore(X, y, chunk_rows=4), memory="1MB")
    >>> margins = sched.state("margins", np.float64)
    >>> def loss(block, views, args, acc):       # a kernel: module-level in a solver
    ...     (m,), (w,) = views, args
    ...     csr_matvec((block.indptr, block.indices, block.data), w, m)
    ...     acc["loss"] += np.maximum(0.0, 1.0 - block.y * m).sum()
    >>> w = np.ones(4)
    >>> r = sched.map_reduce(loss, args=(w,), states=(margins,), acc={"loss": Accumulator(())})
    >>> bool(np.isclose(r["loss"], np.maximum(0, 1 - y * (X @ w)).sum()))
    True
    >>> sched.passes, sched.n_blocks
    (1.0, 3)
    """

    def __init__(self, store, *, memory="1GB", prefetch: int = 8, readers: int | None = None,
                 block_rows: int | None = None, seed: int = 0, scratch_dir=None,
                 scheduler=None, interrupt=None):
        if not isinstance(store, StoreMeta):
            raise InvalidParameterError(
                f"The 'store' parameter of PassScheduler must be a streamsvm store "
                f"(open_store(...), InMemoryStore, or another streamsvm.io.StoreMeta). Got "
                f"{type(store).__name__} instead.")
        self.memory = parse_memory(memory)
        prefetch = check_int("prefetch", prefetch, 0)
        readers = default_readers(store, prefetch) if readers is None else \
            check_int("readers", readers, 1)
        if block_rows is not None:
            block_rows = check_int("block_rows", block_rows, 1)
        self.seed = check_int("seed", seed, 0)
        if scratch_dir is not None and not isinstance(scratch_dir, (str, os.PathLike)):
            raise InvalidParameterError(
                f"The 'scratch_dir' parameter of PassScheduler must be a path or None. "
                f"Got {scratch_dir!r} instead.")
        self.store = store
        self._layout = BlockLayout.from_store(store, block_rows)
        if scheduler is None:
            self._backend = LocalBackend(store, self._layout, prefetch=prefetch,
                                         readers=readers, cache_bytes=0)
        else:
            from ._dask import DaskBackend, connect
            client, owned = connect(scheduler)
            try:
                self._backend = DaskBackend(client, store, self._layout, memory=self.memory,
                                            owned=owned)
            except BaseException:
                if owned:
                    client.close()
                raise
        self._keep_partial = self.KEEP_PARTIAL
        self._states: dict[str, RowState] = {}
        self._interrupt = interrupt
        self._setting_up = True         # until the first sweep (poll_interrupt)
        self._poll = _weak_call(self.poll_interrupt)    # (no cycle through the scheduler)
        self._scratch = ScratchDir(scratch_dir, poll=self._poll)
        if not self.remote:
            self._scratch.sweep()       # folders of dead runs (_scratch.py)
        self.sweeps = 0
        self.reserved = 0
        self._held = 0                # bytes of the needs check_budget accepted
        self._dropped = 0             # cached bytes dropped since the heap was trimmed
        self.cyclic_sweeps = 0
        self.rows_visited = 0
        self.blocks_visited = 0
        self.kernel_seconds = 0.0
        self.wait_seconds = 0.0
        self.resident_bytes_read = 0
        self._pending_collect = None
        self._backend.cache.resize(self._cache_capacity())

    @property
    def remote(self) -> bool:
        """Whether passes run on a dask cluster (only :meth:`map_reduce` then)."""
        return self._backend.remote

    @property
    def workers(self) -> list:
        """The dask workers the blocks are spread over ([] for the local backend)."""
        return list(self._backend.workers)

    @property
    def partitions(self) -> int:
        """How many workers own blocks (at most one per reduction group; 1 for the local
        backend): CoCoA+'s K."""
        return int(self._backend.partitions)

    def rebalance(self) -> None:
        """After a worker left: spread the blocks over the workers still there (the per-row
        state must then be loaded again, e.g. from a checkpoint)."""
        if self.remote:
            self._backend.rebalance()

    def __repr__(self) -> str:
        return (f"PassScheduler(n_rows={self.n_rows}, n_blocks={self.n_blocks}, "
                f"memory={self.memory}, passes={self.passes:.3f})")

    # -- layout --------------------------------------------------------------------
    n_rows = property(lambda self: self._layout.n_rows, doc="Rows in the store.")
    n_features = property(lambda self: int(self.store.n_features),
                          doc="Features in the store (no bias column).")
    n_blocks = property(lambda self: self._layout.n_blocks, doc="Number of blocks.")
    block_rows = property(lambda self: self._layout.block_rows,
                          doc="Maximum rows per block, or None for whole chunks.")
    prefetch = property(lambda self: self._backend.prefetch, doc="Read-ahead depth.")
    readers = property(lambda self: self._backend.readers, doc="Read-ahead threads.")

    @property
    def block_sizes(self) -> np.ndarray:
        """Rows of each block, ndarray of shape (n_blocks,)."""
        return self._layout.sizes.copy()

    @property
    def block_chunks(self) -> np.ndarray:
        """Store chunk of every block, shape (n_blocks,)."""
        return self._layout.chunk

    def chunk_order(self, ids, size: int, epoch: int) -> np.ndarray:
        """The blocks ``ids`` (ascending) in chunk groups of ``size``, new every ``epoch``,
        the blocks of one decoded window shuffled (:func:`~._orders.chunk_groups` with
        :func:`~._orders.group_window`): the order of :meth:`groups` over the store, for a
        solver that sweeps the store in groups itself."""
        window = group_window(size, self._keep_partial, self.block_rows, self.store)
        return chunk_groups(self.block_chunks, ids, size, self.rng(epoch, 0), window)

    def block_bounds(self, b: int) -> tuple[int, int]:
        """Global row range ``[start, stop)`` of block ``b``."""
        return int(self._layout.start[b]), int(self._layout.stop[b])

    # -- counters ------------------------------------------------------------------
    @property
    def passes(self) -> float:
        """Rows visited / n_rows over all sweeps (fractional)."""
        return self.rows_visited / self.n_rows if self.n_rows else 0.0

    store_reads = property(lambda self: self._backend.store_reads,
                           doc="Blocks read from the store (cache misses).")
    cache_hits = property(lambda self: self._backend.cache_hits,
                          doc="Blocks served from the cache.")
    bytes_read = property(lambda self: self._backend.bytes_read,
                          doc="Decoded bytes returned by the store.")

    @property
    def mb_read(self) -> float:
        """MB read so far: decoded bytes from the store plus resident rows read back from
        scratch disk."""
        return (self._backend.bytes_read + self.resident_bytes_read) / 1e6

    @property
    def disk_mb(self) -> float:
        """MB this process has read from the store's files, as stored (compressed): what
        the disk or the network delivered. On a dask cluster the workers read: 0 here."""
        return self.store.stored_bytes_read / 1e6

    cache_bytes = property(lambda self: self._backend.cache.nbytes,
                           doc="Bytes of cached blocks.")
    cached_blocks = property(lambda self: len(self._backend.cache), doc="Blocks in the cache.")
    fully_cached = property(lambda self: len(self._backend.cache) == self.n_blocks,
                            doc="Whether every block is cached (sweeps read nothing).")

    # -- reads outside sweeps, for the resident and hot rows -------------------------
    def poll_interrupt(self) -> None:
        """While setting up (before the first sweep), raise ``KeyboardInterrupt`` if the
        ``interrupt`` callable says the run was asked to stop; afterwards a no-op (a run
        stops between iterations, where it can write a checkpoint)."""
        if self._setting_up and self._interrupt is not None and self._interrupt():
            raise KeyboardInterrupt("interrupted while setting up the run")

    def read_blocks(self, ids) -> Iterator[Block]:
        """Blocks ``ids`` in order, outside any sweep: no sweep started, no row counted as
        visited (the orders and seeds of later sweeps do not change). For a solver that
        restores its own copy of some rows, e.g. after resuming from a checkpoint."""
        ids = [int(b) for b in ids]
        bad = [b for b in ids if not 0 <= b < self.n_blocks]
        if bad:
            raise InvalidParameterError(f"The 'ids' parameter of PassScheduler.read_blocks "
                                        f"must be block ids in [0, {self.n_blocks}). Got "
                                        f"{bad[:5]} instead.")
        return self._backend.iter_blocks(ids)

    def read_all(self) -> Block:
        """The whole store as one block (id -1), read at once and not cached.

        For the resident and hot rows when the whole store fits the budget (they
        :meth:`reserve` its bytes): one bulk read instead of a streamed first pass. Counts
        the bytes read, not rows visited (the sweeps over those rows count their visits).
        """
        return self._backend.read_all()

    # -- lifetime ------------------------------------------------------------------
    def close(self) -> None:
        """Free every state (deleting spilled files) and empty the cache."""
        for st in self._states.values():
            st._release()
        self._states.clear()
        self._scratch.remove()
        self._backend.cache.clear()
        if self.remote:
            self._backend.close()

    def __enter__(self) -> "PassScheduler":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
